package auth_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plantstore/plantstore/auth"
	"github.com/plantstore/plantstore/auth/authtest"
	"github.com/plantstore/plantstore/auth/dpop"
	"github.com/plantstore/plantstore/auth/keys"
	"github.com/plantstore/plantstore/observability"
	"github.com/plantstore/plantstore/observability/logtest"
)

// TestNonceKeyWatch is the nonce key's rotation as a mounted Secret makes
// it: the volume's link swapped, no SIGHUP. The replica follows the new
// key by itself, issues its nonces, and keeps accepting the previous
// key's, so a replica that has not seen the update yet and one that has
// accept each other's; a bad update is refused, the key in use stays; the
// log never holds a key.
func TestNonceKeyWatch(t *testing.T) {
	const lifetime = 4 * time.Minute
	dir := t.TempDir()
	oldKey, newKey, otherKey := nonceKeyFile(t, dir, "old", 32), nonceKeyFile(t, dir, "new", 40), nonceKeyFile(t, dir, "other", 32)
	// What other replicas issue, before and after they see the update.
	before, after, other := loadNonces(t, oldKey, lifetime), loadNonces(t, newKey, lifetime), loadNonces(t, otherKey, lifetime)
	read := func(path string) []byte {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	vol := authtest.NewVolume(t, map[string][]byte{"nonce.key": read(oldKey)})
	n := loadNonces(t, vol.Path("nonce.key"), lifetime)
	logs := &logtest.Buffer{}
	log, _, err := observability.NewLogger(logs, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// As serve watches it.
	done := keys.WatchFile(ctx, vol.Path("nonce.key"), log, func() { _, _ = n.ReloadLogged(log, time.Now()) })
	t.Cleanup(func() {
		cancel()
		<-done
	})
	s := newNonceServer(t, lifetime)
	v := newDPoPServer(t, s.issuer, auth.DPoPOptional, auth.Options{Nonces: n, DPoPWindow: time.Hour})
	accepts := func(nonce string) bool {
		t.Helper()
		proof := authtest.Proof(t, s.client, "GET", v.url, s.token, nil, map[string]any{"iat": time.Now().Unix(), "nonce": nonce})
		return dpopResponse(t, "GET", v.url, "DPoP "+s.token, proof).StatusCode == http.StatusOK
	}

	const (
		rotated = "DPoP nonce key rotated; nonces of the previous key are accepted for one lifetime more"
		refused = "DPoP nonce key reload refused; the previous key keeps serving"
	)
	tests := []struct {
		name   string
		update []byte // the volume's new nonce.key
		wait   string // the log line the update is seen by
		issues *dpop.Nonces
		accept []*dpop.Nonces
		refuse []*dpop.Nonces
	}{
		{name: "before the update", issues: before, accept: []*dpop.Nonces{before}, refuse: []*dpop.Nonces{after, other}},
		{name: "a new key", update: read(newKey), wait: rotated, issues: after, accept: []*dpop.Nonces{after, before}, refuse: []*dpop.Nonces{other}},
		{name: "a key too short", update: []byte(strings.Repeat("k", 31)), wait: refused, issues: after, accept: []*dpop.Nonces{after, before}, refuse: []*dpop.Nonces{other}},
		{name: "a third key", update: read(otherKey), wait: rotated, issues: other, accept: []*dpop.Nonces{other, after}, refuse: []*dpop.Nonces{before}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.update != nil {
				seen := len(linesOf(t, logs, tt.wait))
				vol.Update(t, map[string][]byte{"nonce.key": tt.update})
				logs.WaitCount(t, tt.wait, seen+1)
			}
			now := time.Now()
			if got, want := n.Issue(now), tt.issues.Issue(now); got != want {
				t.Errorf("Issue = %q; want %q, the nonce of the key the file holds", got, want)
			}
			for i, o := range tt.accept {
				if nonce := o.Issue(time.Now()); !accepts(nonce) {
					t.Errorf("accepted nonce %d (%q) refused", i, nonce)
				}
			}
			for i, o := range tt.refuse {
				if nonce := o.Issue(time.Now()); accepts(nonce) {
					t.Errorf("refused nonce %d (%q) accepted", i, nonce)
				}
			}
		})
	}
	for _, k := range []string{oldKey, newKey, otherKey} {
		if secret := strings.TrimSuffix(string(read(k)), "\n"); strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds the key of %s", filepath.Base(k))
		}
	}
	for _, l := range linesOf(t, logs, rotated) {
		if l["source"] != vol.Path("nonce.key") {
			t.Errorf("rotation line %v; want source %s", l, vol.Path("nonce.key"))
		}
	}
}

// linesOf returns the lines of logs whose msg is msg.
func linesOf(t testing.TB, logs *logtest.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range logs.Lines(t) {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}
