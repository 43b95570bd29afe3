package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/pressly/goose/v3"

	"github.com/plantstore/plantstore/plants/postgres/pgtest"
)

// TestMigrateFromVersion1 upgrades a schema that holds a catalog at
// version 1, as a running deployment's does: the version row counts the
// plants already there, and an import then raises it. Down and up again
// leave the same schema.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewSchema(t)
	if err := withProvider(t.Context(), dsn, func(p *goose.Provider) error {
		_, err := p.UpTo(t.Context(), 1)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), `INSERT INTO plants (id, name, readers) VALUES ('a', 'Aloe', '{*}'), ('b', 'Basil', '{*}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := Migrate(t.Context(), dsn); err != nil {
		t.Fatalf("Migrate from version 1: %v", err)
	}
	read := func() catalogVersion {
		t.Helper()
		v, err := readVersion(t.Context(), conn, DefaultQueryTimeout)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := read(); v != (catalogVersion{version: 1, plants: 2, textBytes: 11}) {
		t.Errorf("catalog_version after the upgrade = %+v; want version 1, 2 plants, 11 bytes", v)
	}
	if err := withProvider(t.Context(), dsn, func(p *goose.Provider) error {
		if _, err := p.Down(t.Context()); err != nil {
			return err
		}
		_, err := p.Up(t.Context())
		return err
	}); err != nil {
		t.Fatalf("down and up again: %v", err)
	}
	if v := read(); v != (catalogVersion{version: 1, plants: 2, textBytes: 11}) {
		t.Errorf("catalog_version after down and up = %+v; want version 1, 2 plants, 11 bytes", v)
	}
}
