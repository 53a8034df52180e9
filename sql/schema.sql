-- The PostgreSQL store's tables and types (src/stores/postgres/postgres-store.ts). Rendered by src/stores/postgres/sql.ts,
-- which replaces each name between at signs: the schema one by the schema option, every other one by the
-- table prefix followed by that name, both as quoted identifiers (never inside a comment, where a name
-- holding a line break would end it). Safe to run again: everything is created only where it is
-- missing, and the functions are replaced.

CREATE SCHEMA IF NOT EXISTS @schema@;

-- Which version of this schema the database holds: one row, written last by the installation.
CREATE TABLE IF NOT EXISTS @schema@.@schema_version@ (
  one boolean PRIMARY KEY DEFAULT true CHECK (one),
  version integer NOT NULL
);

-- One row per rule and identity that holds something: the count state of its window type, and its lock.
-- key_hash = sha256(key): identities are up to 8192 characters, more than a btree entry holds.
-- The state means nothing from expires_ms on: amount (a count, scaled tokens, GCRA's arrival time in µs or
-- the last slot id), time_ms (a window's end or the last refill, epoch ms) and pairs (a log's, a sliding
-- counter's or the slot holders' pairs, flattened); each sql/<type>.sql says which it uses. The lock is in
-- force until lock_until and its level is remembered until forget_ms. A row holding neither is deleted.
CREATE TABLE IF NOT EXISTS @schema@.@keys@ (
  rule text COLLATE "C" NOT NULL,
  key_hash bytea NOT NULL,
  key bytea NOT NULL,
  amount bigint,
  time_ms bigint,
  pairs bigint[],
  expires_ms bigint,
  lock_until bigint,
  lock_level integer,
  forget_ms bigint,
  PRIMARY KEY (rule, key_hash)
);

-- locked(rule): the locks of a rule, soonest end first.
CREATE INDEX IF NOT EXISTS @keys_locks@ ON @schema@.@keys@ (rule, lock_until) WHERE lock_until IS NOT NULL;

-- Limits an operator set for one key of one rule (limiter.override), or for every key of a rule (limiter.setLimit:
-- key_hash and key empty), until until_ms (NULL: until cleared).
CREATE TABLE IF NOT EXISTS @schema@.@overrides@ (
  rule text COLLATE "C" NOT NULL,
  key_hash bytea NOT NULL,
  key bytea NOT NULL,
  lim bigint NOT NULL,
  until_ms bigint,
  PRIMARY KEY (rule, key_hash)
);

-- An op as the algorithms read it (src/algorithms/types.ts StoreOp): type 1 fixed, 2 calendar,
-- 3 sliding-log, 4 sliding, 5 token-bucket, 6 gcra, 7 concurrency (size_ms: the lease); lim is the limit
-- in force (an override's, if any).
DO $$ BEGIN
  CREATE TYPE @schema@.@op@ AS (
    type smallint, size_ms bigint, buckets bigint, burst bigint, cost bigint, lim bigint,
    period_end bigint, next_period_end bigint
  );
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

-- A count state (the amount, time_ms, pairs columns); NULL when there is none.
DO $$ BEGIN
  CREATE TYPE @schema@.@state@ AS (amount bigint, time_ms bigint, pairs bigint[]);
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

-- Version 3 named the state and key hash columns for what they hold (before: a, b, xs, kh): a schema of an
-- older version gets the new names here, before the functions that read them are replaced.
DO $$ BEGIN
  -- Read, not tried: a failed ALTER on every installation would lock the table each time.
  IF (SELECT v.version FROM @schema@.@schema_version@ v) < 3 THEN
    -- Each object once: one already renamed (an upgrade that ran before, by hand) is left as it is.
    BEGIN
      ALTER TABLE @schema@.@keys@ RENAME COLUMN kh TO key_hash;
      ALTER TABLE @schema@.@keys@ RENAME COLUMN a TO amount;
      ALTER TABLE @schema@.@keys@ RENAME COLUMN b TO time_ms;
      ALTER TABLE @schema@.@keys@ RENAME COLUMN xs TO pairs;
    EXCEPTION WHEN undefined_column THEN NULL;
    END;
    BEGIN
      ALTER TABLE @schema@.@overrides@ RENAME COLUMN kh TO key_hash;
    EXCEPTION WHEN undefined_column THEN NULL;
    END;
    BEGIN
      ALTER TYPE @schema@.@state@ RENAME ATTRIBUTE a TO amount;
      ALTER TYPE @schema@.@state@ RENAME ATTRIBUTE b TO time_ms;
      ALTER TYPE @schema@.@state@ RENAME ATTRIBUTE xs TO pairs;
    EXCEPTION WHEN undefined_column THEN NULL;
    END;
  END IF;
END $$;

-- An algorithm's answer for one op (src/algorithms/algorithm.ts Verdict, without the lock fields).
DO $$ BEGIN
  CREATE TYPE @schema@.@verdict@ AS (
    allowed boolean, remaining bigint, reset_ms bigint, retry_ms bigint, count bigint, receipt bigint
  );
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

-- floor(a / b) and ceil(a / b) for integers, b > 0, exact (src/algorithms/int-math.ts).
CREATE OR REPLACE FUNCTION @schema@.@floor_div@(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT (a - ((a % b) + b) % b) / b $$;

CREATE OR REPLACE FUNCTION @schema@.@ceil_div@(a bigint, b bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT -@schema@.@floor_div@(-a, b) $$;

-- JavaScript's Math.round of a non-negative quotient, as the Lua twin computes it (x - floor(x) is exact).
CREATE OR REPLACE FUNCTION @schema@.@js_round@(x float8) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT (floor(x) + CASE WHEN x - floor(x) >= 0.5 THEN 1 ELSE 0 END)::bigint $$;

-- Token bucket and GCRA capacity: the explicit burst, else the limit in force.
CREATE OR REPLACE FUNCTION @schema@.@burst_of@(op @schema@.@op@) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN op.burst > 0 THEN op.burst ELSE op.lim END $$;
