-- The catalog, and the access index List reads.
--
-- Names and ids compare as bytes (COLLATE "C"), the order the API promises:
-- by name, ties by id.

-- +goose Up

-- plants holds the catalog as imported, one row per plant. tag is NULL when
-- the plant has none.
CREATE TABLE plants (
    id      text COLLATE "C" PRIMARY KEY,
    name    text COLLATE "C" NOT NULL CHECK (name <> ''),
    tag     text CHECK (tag <> ''),
    readers text[] NOT NULL CHECK (cardinality(readers) > 0)
);

-- plant_readers has one row per plant and distinct reader, keyed in list
-- order within each principal, so a caller's plants are a merge of one
-- ordered index range per principal. name and tag are copied from plants so
-- that List reads the index alone (index-only scan, no join). Import writes
-- both tables in one transaction; there is no foreign key, whose checks
-- would slow the import and the replacement of a large catalog.
CREATE TABLE plant_readers (
    principal text COLLATE "C" NOT NULL,
    name      text COLLATE "C" NOT NULL,
    plant_id  text COLLATE "C" NOT NULL,
    tag       text,
    PRIMARY KEY (principal, name, plant_id) INCLUDE (tag)
);

-- +goose Down
DROP TABLE plant_readers;
DROP TABLE plants;
