-- Revocations of tokens (plantstore revoke): every replica holds them all in
-- memory and learns of a change by LISTEN/NOTIFY, polling besides.
--
-- Expand only: no table of 00001 or 00002 changes, so a binary that knows
-- only those keeps working on this schema.

-- +goose Up

-- revocations has one row per revocation, scoped to an issuer (its
-- configured name, '' for the unnamed one): a before cutoff for a subject,
-- a client or the whole issuer (value '') whose tokens issued before it
-- are refused, or one token by its jti (value) until its exp (until).
-- plantstore revoke inserts a row and sends
-- pg_notify('plantstore_revocations', '<schema>') in its transaction.
CREATE TABLE revocations (
    id     bigserial PRIMARY KEY,
    issuer text NOT NULL DEFAULT '',
    kind   text NOT NULL CHECK (kind IN ('subject', 'client', 'issuer', 'token')),
    value  text NOT NULL CHECK ((kind = 'issuer') = (value = '')),
    before timestamptz CHECK ((kind = 'token') = (before IS NULL)),
    until  timestamptz CHECK ((kind = 'token') = (until IS NOT NULL)),
    added  timestamptz NOT NULL DEFAULT now()
);

-- security_events has one row per Security Event Token applied (the
-- Shared Signals receiver, -ssf-path), by issuer and jti, so that a SET is
-- applied once across the replicas however often it is delivered.
CREATE TABLE security_events (
    issuer   text NOT NULL,
    jti      text NOT NULL,
    received timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (issuer, jti)
);

-- +goose Down
DROP TABLE security_events;
DROP TABLE revocations;
