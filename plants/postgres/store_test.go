package postgres_test

import (
	"testing"

	"github.com/plantstore/plantstore/plants"
	"github.com/plantstore/plantstore/plants/postgres"
	"github.com/plantstore/plantstore/plants/storetest"
)

// TestConformance runs the store suite shared with the in-memory store, each
// subtest on its own schema holding the imported catalog.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, c *plants.Catalog) plants.Store {
		dsn := migrated(t)
		if err := postgres.Import(t.Context(), dsn, c, false); err != nil {
			t.Fatalf("Import: %v", err)
		}
		return openStore(t, dsn, postgres.Options{})
	})
}
