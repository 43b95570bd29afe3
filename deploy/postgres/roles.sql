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
-- The database :db and its grants are database.sql's, which this file
-- includes. deploy/check/database_test.go runs both against a real
-- PostgreSQL.

CREATE ROLE :"owner" LOGIN PASSWORD :'owner_password';
CREATE ROLE :"reader" NOLOGIN;
CREATE ROLE :"login_a" LOGIN PASSWORD :'a_password' CONNECTION LIMIT :budget IN ROLE :"reader";
CREATE ROLE :"login_b" NOLOGIN CONNECTION LIMIT :budget IN ROLE :"reader";

-- The database and its grants: database.sql, which a restore runs alone.
\ir database.sql
