package postgres

import (
	"context"

	"github.com/plantstore/plantstore/plants"
)

// NewConnsCount returns how many connections s's pool has opened, so tests
// can tell a connection returned to the pool from one replaced.
func NewConnsCount(s *Store) int64 { return s.pool.Stat().NewConnsCount() }

// ListSQL and ListLimitedSQL expose the list queries to the plan logs.
var (
	ListSQL        = listSQL
	ListLimitedSQL = listLimitedSQL
)

// Load reads the catalog as a reload does, without serving it.
func (s *Snapshot) Load(ctx context.Context) (*plants.Catalog, error) {
	c, _, err := s.load(ctx)
	return c, err
}
