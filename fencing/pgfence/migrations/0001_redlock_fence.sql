-- redlock fencing tokens in PostgreSQL (package pgfence, docs/fencing.md).
--
-- One row per fenced resource: the highest fencing token a write for it
-- has carried. A write is applied only in a transaction that first records
-- its token here, which succeeds only if the token is at least the one
-- stored; the row stays locked until that transaction ends, so fenced
-- transactions on one resource run one at a time, in token order. Rows are
-- never deleted by pgfence: forgetting a resource's token would let a stale
-- holder back in.
--
-- Safe to run more than once: pgfence.Migrate runs it, or run it yourself
-- (psql -f 0001_redlock_fence.sql) or copy it into your migrations.

CREATE TABLE IF NOT EXISTS redlock_fence (
    resource   text        PRIMARY KEY,
    token      bigint      NOT NULL CHECK (token > 0),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- redlock_fence(resource, token): the same step for SQL and psql users.
-- Call it first in the transaction that writes:
--
--   BEGIN;
--   SELECT redlock_fence('nightly-report', 1733318400000001);
--   UPDATE ...;
--   COMMIT;
--
-- It records token as the resource's highest (an equal token is accepted
-- again: one holder may write several times) and returns it, holding the
-- row's lock until the transaction ends. A lower token raises SQLSTATE
-- RLF01 ("stale token"), which aborts the transaction: nothing it wrote is
-- kept.
CREATE OR REPLACE FUNCTION redlock_fence(p_resource text, p_token bigint)
RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    highest bigint;
BEGIN
    IF p_token IS NULL OR p_token <= 0 THEN
        RAISE EXCEPTION 'redlock fencing: invalid token % for "%" (redlock never issues it)', p_token, p_resource
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO redlock_fence AS f (resource, token) VALUES (p_resource, p_token)
    ON CONFLICT (resource) DO UPDATE SET token = excluded.token, updated_at = now()
        WHERE f.token <= excluded.token
    RETURNING f.token INTO highest;
    IF FOUND THEN
        RETURN highest;
    END IF;
    SELECT f.token INTO highest FROM redlock_fence f WHERE f.resource = p_resource FOR UPDATE;
    RAISE EXCEPTION 'redlock fencing: stale token % for "%": highest accepted is %', p_token, p_resource, highest
        USING ERRCODE = 'RLF01', HINT = 'a newer holder of the lock has written; this holder''s lease has ended';
END
$$;
