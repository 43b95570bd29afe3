package main

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/plants/postgres"
)

// TestImportMemoryBudget: by default import refuses a catalog that the
// replicas' memory (-replica-memory) cannot hold beside the process, the
// token cache (-jwt-cache-bytes) and a full DPoP replay cache through a
// reload; -max-catalog-bytes, when given, is the limit instead; a memory
// those fill alone is a usage error.
func TestImportMemoryBudget(t *testing.T) {
	dsn := migratedDatabase(t)
	// "Aloe", "Basil": the id, the name and the reader "*" of each, 20 bytes.
	path := writeCatalog(t, "Aloe", "Basil")
	const text = 20
	fixed := int64(postgres.ProcessBytes + auth.DefaultCacheBytes + dpop.ReplayCacheBytes)
	memory := func(limit int64) string {
		return strconv.FormatInt(fixed+limit*postgres.BytesPerTextByte*postgres.ReloadCopies, 10)
	}
	tests := []struct {
		name  string
		flags []string
		want  string // "" for success, else in the error
		usage bool
	}{
		{"the default", nil, "", false},
		{"a memory that holds it", []string{"-replica-memory", memory(text)}, "", false},
		{"a memory one byte short", []string{"-replica-memory", memory(text - 1)}, "20 bytes of text, over the limit of 19", false},
		{"a smaller token cache makes room", []string{"-replica-memory", memory(text - 1), "-jwt-cache-bytes", strconv.Itoa(auth.DefaultCacheBytes - 1<<20)}, "", false},
		{"a memory the caches fill", []string{"-replica-memory", "100MiB"}, "holds no catalog", true},
		{"an explicit limit wins", []string{"-replica-memory", "100MiB", "-max-catalog-bytes", "1MiB"}, "", false},
		{"an explicit limit too small", []string{"-max-catalog-bytes", "19"}, "over the limit of 19", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{"import", "-replace"}, tt.flags...), "-database-url", dsn, path)
			err := run(context.Background(), args, nil, nil, io.Discard, io.Discard)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("import %q: %v, want success", tt.flags, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("import %q: %v, want an error containing %q", tt.flags, err, tt.want)
			case errors.Is(err, errUsage) != tt.usage:
				t.Errorf("import %q: %v, a usage error: %v, want %v", tt.flags, err, errors.Is(err, errUsage), tt.usage)
			}
		})
	}
}
