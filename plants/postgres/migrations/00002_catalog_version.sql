-- The catalog's version, which replicas serving from a snapshot compare
-- with the one they hold, and the index they read the catalog in order by.
--
-- Expand only: the tables of 00001 are unchanged, so a binary that knows
-- only 00001 keeps working on this schema (its imports do not bump the
-- version; see docs/postgres.md).

-- +goose Up

-- catalog_version has exactly one row. plantstore import raises version by
-- one in its transaction, sets plants to the number of plants stored and
-- text_bytes to the bytes of their ids and names (what a snapshot sizes
-- its memory by), and then sends
-- pg_notify('plantstore_catalog', '<version> <schema>'), which PostgreSQL
-- delivers only once the transaction has committed.
CREATE TABLE catalog_version (
    one        boolean PRIMARY KEY DEFAULT true CHECK (one),
    version    bigint NOT NULL CHECK (version > 0),
    plants     bigint NOT NULL CHECK (plants >= 0),
    text_bytes bigint NOT NULL CHECK (text_bytes >= 0),
    changed    timestamptz NOT NULL DEFAULT now()
);
INSERT INTO catalog_version (version, plants, text_bytes)
SELECT 1, count(*), coalesce(sum(octet_length(id) + octet_length(name)), 0) FROM plants;

-- A snapshot reads the whole catalog in the contract's order.
CREATE INDEX plants_name_id ON plants (name, id);

-- +goose Down
DROP INDEX plants_name_id;
DROP TABLE catalog_version;
