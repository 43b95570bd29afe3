-- PostgreSQL roles and database for plantstore (docs/deploy.md). Run once,
-- as a superuser or a managed service's administrator role (it needs
-- CREATEROLE, CREATEDB, and to act for the owner role it creates, for the
-- default privileges):
--
--   psql "$ADMIN_DSN" -v ON_ERROR_STOP=1 \
--     -v db=plants -v owner=plantstore_owner -v reader=plantstore_reader \
--     -v login_a=plantstore_a -v login_b=plantstore_b -v budget=50 \
--     -v owner_password="$OWNER_PASSWORD" -v a_password="$A_PASSWORD" \
--     -f deploy/postgres/roles.sql
--
-- owner    owns the database and the schema: the migration Job and
--          "plantstore import" connect as it (Secret plantstore-database-owner).
-- reader   a group without login holding what serving needs: read the
--          catalog tables. Grants go to it, never to a login role.
-- login_a, login_b
--          the serving logins, members of reader, used in turn so that a
--          password rotates without a moment when the Secret and the
--          database disagree (docs/operations.md). One has LOGIN, the other
--          NOLOGIN between rotations. Each may hold at most :budget
--          connections, the Deployment's plantstore/postgres-connection-budget.
-- deploy/check/database_test.go runs this file against a real PostgreSQL.

CREATE ROLE :"owner" LOGIN PASSWORD :'owner_password';
CREATE ROLE :"reader" NOLOGIN;
CREATE ROLE :"login_a" LOGIN PASSWORD :'a_password' CONNECTION LIMIT :budget IN ROLE :"reader";
CREATE ROLE :"login_b" NOLOGIN CONNECTION LIMIT :budget IN ROLE :"reader";

CREATE DATABASE :"db" OWNER :"owner";
REVOKE ALL ON DATABASE :"db" FROM PUBLIC;
GRANT CONNECT ON DATABASE :"db" TO :"reader";

\connect :"db"
-- The migrations create their tables in the public schema, which the
-- database owner owns (PostgreSQL 15 and later; before, revoke CREATE on it
-- from PUBLIC too). Tables the owner creates from now on are readable by
-- the reader group, and only readable.
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE :"owner" IN SCHEMA public GRANT SELECT ON TABLES TO :"reader";
