-- The database plantstore's catalog lives in, with the grants serving
-- needs: owned by the owner role, open to the reader group only, and every
-- table the owner creates in it readable by that group (and only
-- readable). roles.sql runs it after it has made the roles; run it on its
-- own for a database of roles that exist already, as a restore does
-- (docs/operations.md, disaster recovery):
--
--   psql "$ADMIN_DSN" -v ON_ERROR_STOP=1 \
--     -v db=plants_restored -v owner=plantstore_owner -v reader=plantstore_reader \
--     -f deploy/postgres/database.sql

CREATE DATABASE :"db" OWNER :"owner";
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"db" TO :"reader";

\connect :"db"
-- The migrations create their tables in the public schema, which the
-- database owner owns (PostgreSQL 15 and later; before, revoke CREATE on it
-- from PUBLIC too). Tables the owner creates from now on (a migration, a
-- restore) are readable by the reader group, and only readable.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public GRANT SELECT ON TABLES TO :"reader";
