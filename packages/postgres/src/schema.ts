/**
 * @module What `migrate()` creates, and the statements the store runs: the state table (one row per key and
 * rule, plus one per blocked key), its index on expiry, the apply function that decides a whole call in one
 * statement, and the sweep that deletes expired rows in small batches.
 *
 * Over 300 lines would be the apply function alone if each kind's steps lived here: they live in kinds/*.ts,
 * one file per kind, and are inlined here as one CASE branch per kind and step.
 *
 * The apply function: it takes the key's advisory lock (one per call, so two calls never wait on each other
 * in a cycle; rows of one key are only ever written under its lock), then reads the key's rows in a stable
 * order, locked FOR UPDATE (the sweep skips locked rows), decides every rule, admits all or none, begins a
 * block, writes what changed and replies. It reads the time from `clock_timestamp()` (or the caller's clock
 * in tests), checks the call's deadline in the database's clock before and after taking locks, and waits
 * for a lock no longer than the deadline allows (`lock_timeout`, local to the call's transaction), so a call
 * the caller has given up on is ended by the server, not left running, and counts nothing.
 */

import type { Rule } from '@sluice/core'
import { concurrencySql } from './kinds/concurrency.ts'
import { fixedWindowSql } from './kinds/fixed-window.ts'
import { type KindSql, PARAMS_PER_RULE } from './kinds/kind.ts'
import { leakyBucketSql } from './kinds/leaky-bucket.ts'
import { slidingLogSql } from './kinds/sliding-log.ts'
import { slidingWindowSql } from './kinds/sliding-window.ts'
import { tokenBucketSql } from './kinds/token-bucket.ts'
import { warmUpSql } from './kinds/warm-up.ts'

/** What a call asks the apply function to do (its `act` argument). */
export const ACT = {
  peek: 0,
  consume: 1,
  penalize: 2,
  refund: 3,
  refundCall: 4,
  unqueue: 5,
  release: 6,
  settle: 7,
} as const

/** The reply's head: status, server ms, the call's ms, then the block begun (or the block's ms left). */
export const STATUS = { ok: 0, blocked: 1, late: 2 } as const
export const HEAD = 4
/** Per rule: allowed (1/0), remaining, resetMs, retryAfterMs, waitMs, and where a queued call left the queue. */
export const PER_RULE = 7

/** A table name as the store takes it: `name` or `schema.name`, lower case, so every derived name is plain. */
export const TABLE_NAME = /^(?:[a-z_][a-z0-9_]{0,47}\.)?[a-z_][a-z0-9_]{0,47}$/

/** The store's SQL names, derived from its table: `"schema"."table_suffix"`. */
export class Names {
  readonly table: string
  readonly #schema: string
  readonly #base: string

  constructor(table: string) {
    const dot = table.indexOf('.')
    this.#schema = dot === -1 ? '' : `"${table.slice(0, dot)}".`
    this.#base = table.slice(dot + 1)
    this.table = `${this.#schema}"${this.#base}"`
  }

  /** A function or index named after the table. */
  of = (suffix: string): string => `${this.#schema}"${this.#base}_${suffix}"`

  /** The plain name of an index (CREATE INDEX takes no schema). */
  plain(suffix: string): string {
    return `"${this.#base}_${suffix}"`
  }
}

/** Every kind's SQL, by kind. */
export function kindsOf(names: Names): { readonly [K in Rule['kind']]: KindSql<Extract<Rule, { kind: K }>> } {
  return {
    fixedWindow: fixedWindowSql,
    slidingLog: slidingLogSql,
    slidingWindow: slidingWindowSql,
    tokenBucket: tokenBucketSql(names.of),
    leakyBucket: leakyBucketSql(names.of),
    concurrency: concurrencySql,
    warmUp: warmUpSql(names.of),
  }
}

type Step = 'decide' | 'admit' | 'refund' | 'refundCall' | 'penalize' | 'unqueue' | 'release'

/** One step of every kind, as a CASE on the rule's kind number. */
function step(kinds: readonly KindSql[], name: Step): string {
  const branches = kinds.map((k) => `WHEN ${k.code} THEN ${k[name] ?? ''} NULL;`).join('\n')
  return `CASE kinds[i]\n${branches}\nEND CASE;`
}

/** The ms of the database's clock. */
const SERVER_MS = `floor(extract(epoch FROM clock_timestamp()) * 1000)::float8`

/**
 * The migration, one script of statements (sent as one simple query, which PostgreSQL runs as one
 * transaction): idempotent, and two processes running it at once take turns (a transaction-scoped advisory
 * lock named after the table).
 */
export function migration(names: Names): string {
  const kinds = Object.values(kindsOf(names)) as KindSql[]
  const T = names.table
  const params = (i: number) => `p${i} := p[o + ${i}];`
  /** Loads rule i's row (fresh when it has expired) and params. */
  const load = `
      st := rows[i]; o := (i - 1) * ${PARAMS_PER_RULE}; mk := marks[i];
      IF st.expires IS NULL OR st.expires <= now THEN
        st := ROW(key, rids[i], NULL, NULL, NULL, NULL, NULL, NULL, '-Infinity');
      END IF;
      ${Array.from({ length: PARAMS_PER_RULE }, (_, j) => params(j + 1)).join(' ')}
      ok := true; rem := 0; rst := 0; rty := 0; wt := 0; q1 := NULL; q2 := NULL; changed := false;`
  /** Writes the row in \`st\`. */
  const write = `
        INSERT INTO ${T} VALUES (st.*)
        ON CONFLICT (k, r) DO UPDATE SET a = EXCLUDED.a, b = EXCLUDED.b, c = EXCLUDED.c, xs = EXCLUDED.xs,
          ys = EXCLUDED.ys, ids = EXCLUDED.ids, expires = EXCLUDED.expires;`
  /** Writes rule i's row when a step changed it. */
  const save = `IF changed THEN ${write} rows[i] := st; END IF;`
  /** Decides every rule at cost `cost`; when one denies, the others report what they have left (cost 0). */
  const decideAll = `
    allowed := true;
    FOR i IN 1..n LOOP
      ${load}
      cc := coalesce(costs[i], cost);
      ${step(kinds, 'decide')}
      IF NOT ok THEN allowed := false; END IF;
      reply := reply || ARRAY[CASE WHEN ok THEN 1 ELSE 0 END, rem, rst, rty, wt, NULL, NULL]::float8[];
    END LOOP;
    IF NOT allowed AND n > 1 THEN
      FOR i IN 1..n LOOP
        CONTINUE WHEN reply[${HEAD} + (i - 1) * ${PER_RULE} + 1] = 0;
        ${load}
        cc := 0;
        ${step(kinds, 'decide')}
        reply[${HEAD} + (i - 1) * ${PER_RULE} + 2] := rem;
        reply[${HEAD} + (i - 1) * ${PER_RULE} + 3] := rst;
        reply[${HEAD} + (i - 1) * ${PER_RULE} + 4] := rty;
        reply[${HEAD} + (i - 1) * ${PER_RULE} + 5] := wt;
      END LOOP;
    END IF;`
  /** Runs one adjusting step on every rule that has state (and, but for penalize, a mark when marks are given). */
  const adjustAll = (name: Step, fresh: boolean) => `
    FOR i IN 1..n LOOP
      ${load}
      ${fresh ? '' : "CONTINUE WHEN st.expires = '-Infinity';"}
      ${name === 'refund' || name === 'penalize' ? '' : 'CONTINUE WHEN mk IS NULL;'}
      cc := coalesce(costs[i], cost);
      ${step(kinds, name)}
      ${save}
    END LOOP;`
  /**
   * A settle: each rule by its own signed amount in \`costs\`, below 0 one call's refund by its mark (a rule
   * without state or mark gives nothing), above 0 a penalty; 0 leaves the rule alone.
   */
  const settleAll = `
    FOR i IN 1..n LOOP
      ${load}
      cc := costs[i];
      IF cc > 0 THEN
        ${step(kinds, 'penalize')}
        ${save}
      ELSIF cc < 0 AND mk IS NOT NULL AND st.expires <> '-Infinity' THEN
        cc := -cc;
        ${step(kinds, 'refundCall')}
        ${save}
      END IF;
    END LOOP;`
  return `
SELECT pg_advisory_xact_lock(hashtextextended('sluice migrate ' || ${quote(T)}, 0));
CREATE TABLE IF NOT EXISTS ${T} (
  k text NOT NULL,
  r text NOT NULL,
  a float8,
  b float8,
  c float8,
  xs float8[],
  ys float8[],
  ids text[],
  expires float8 NOT NULL,
  PRIMARY KEY (k, r)
);
CREATE INDEX IF NOT EXISTS ${names.plain('expires')} ON ${T} (expires);
${kinds.map((k) => k.helpers?.(names.of) ?? '').join('\n')}

-- This version's apply function takes one argument more than the one before per-rule costs, so it is a
-- function of its own: a database migrated by the earlier version keeps that one for its processes still
-- running (a rolling deploy); both keep the same rows.
CREATE OR REPLACE FUNCTION ${names.of('apply')}(
  key text, rids text[], kinds int[], p float8[], cost float8, act int, at float8, deadline float8,
  blk float8[], marks text[], budget float8, costs float8[]
) RETURNS float8[] LANGUAGE plpgsql AS $fn$
DECLARE
  server float8 := ${SERVER_MS};
  now float8 := coalesce(at, server);
  n int := cardinality(rids);
  rows ${T}[] := array_fill(NULL::${T}, ARRAY[cardinality(rids)]);
  brow ${T};
  st ${T};
  reply float8[];
  allowed boolean;
  blocklen float8 := 0;
  ok boolean; changed boolean;
  rem float8; rst float8; rty float8; wt float8; q1 float8; q2 float8;
  p1 float8; p2 float8; p3 float8; p4 float8; p5 float8; p6 float8; p7 float8; p8 float8;
  cc float8; mk text; m float8;
  x float8; y float8; z float8; w float8; u float8; v float8; s float8; tot float8; base float8;
  i int; j int; f int; lo int; hi int; mid int; nn int; o int;
BEGIN
  IF deadline IS NULL AND budget IS NOT NULL THEN deadline := server + budget; END IF;
  IF deadline IS NOT NULL THEN
    IF server >= deadline THEN RETURN ARRAY[${STATUS.late}, server]; END IF;
    PERFORM set_config('lock_timeout', (deadline - server)::bigint || 'ms', true);
  END IF;
  IF act = ${ACT.peek} THEN
    FOR st IN SELECT * FROM ${T} WHERE k = key AND (r = ANY(rids) OR r = '') LOOP
      IF st.r = '' THEN brow := st; ELSE rows[array_position(rids, st.r)] := st; END IF;
    END LOOP;
  ELSE
    PERFORM pg_advisory_xact_lock(hashtext(${quote(T)}), hashtext(key));
    FOR st IN SELECT * FROM ${T} WHERE k = key AND (r = ANY(rids) OR r = '') ORDER BY r FOR UPDATE LOOP
      IF st.r = '' THEN brow := st; ELSE rows[array_position(rids, st.r)] := st; END IF;
    END LOOP;
    IF deadline IS NOT NULL AND ${SERVER_MS} >= deadline THEN RETURN ARRAY[${STATUS.late}, server]; END IF;
  END IF;
  reply := ARRAY[${STATUS.ok}, server, now, 0]::float8[];

  IF act = ${ACT.penalize} THEN
    ${adjustAll('penalize', true)}
    cost := 1;
  ELSIF act = ${ACT.settle} THEN
    ${settleAll}
    cost := 1; costs := NULL;
  ELSIF act = ${ACT.refund} THEN
    ${adjustAll('refund', false)}
    RETURN reply;
  ELSIF act = ${ACT.refundCall} THEN
    ${adjustAll('refundCall', false)}
    RETURN reply;
  ELSIF act = ${ACT.unqueue} THEN
    ${adjustAll('unqueue', false)}
    RETURN reply;
  ELSIF act = ${ACT.release} THEN
    ${adjustAll('release', false)}
    RETURN reply;
  END IF;

  -- A blocked key is denied outright, its rules unread.
  IF blk IS NOT NULL AND brow.a > now THEN RETURN ARRAY[${STATUS.blocked}, server, now, brow.a - now]; END IF;
  ${decideAll}
  IF act = ${ACT.consume} AND allowed THEN
    FOR i IN 1..n LOOP
      ${load}
      cc := coalesce(costs[i], cost);
      ${step(kinds, 'admit')}
      ${save}
      reply[${HEAD} + (i - 1) * ${PER_RULE} + 6] := q1;
      reply[${HEAD} + (i - 1) * ${PER_RULE} + 7] := q2;
    END LOOP;
  ELSIF act = ${ACT.consume} AND blk IS NOT NULL THEN
    -- Begins a block (core's block.ts): blk is ms, factor, maxMs, forgetMs, keep.
    y := CASE WHEN brow.xs IS NULL THEN 0 ELSE
      (SELECT count(*) FROM unnest(brow.xs) AS t WHERE t > now - blk[4]) END;
    blocklen := blk[1]; j := 1;
    WHILE j < y + 1 AND blocklen < blk[3] LOOP blocklen := blocklen * blk[2]; j := j + 1; END LOOP;
    blocklen := least(ceil(blocklen), blk[3]);
    st := ROW(key, '', now + blocklen, NULL, NULL,
      (SELECT coalesce(array_agg(t ORDER BY t), '{}') FROM (
        SELECT t FROM unnest(coalesce(brow.xs, '{}') || now) AS t WHERE t > now - blk[4]
        ORDER BY t DESC LIMIT blk[5]::int) AS kept),
      NULL, NULL, 0);
    st.expires := greatest(st.a, coalesce(st.xs[cardinality(st.xs)], '-Infinity') + blk[4]);
    ${write}
    reply[4] := blocklen;
  END IF;
  RETURN reply;
END
$fn$;

-- Deletes up to \`batch\` rows that have expired, skipping rows a call holds; returns how many it deleted.
CREATE OR REPLACE FUNCTION ${names.of('sweep')}(batch int) RETURNS int LANGUAGE plpgsql AS $fn$
DECLARE
  server float8 := ${SERVER_MS};
  deleted int;
BEGIN
  DELETE FROM ${T} WHERE (k, r) IN (
    SELECT k, r FROM ${T} WHERE expires < server ORDER BY expires LIMIT batch FOR UPDATE SKIP LOCKED
  ) AND expires < server;
  GET DIAGNOSTICS deleted = ROW_COUNT;
  RETURN deleted;
END
$fn$;
`
}

/** A string as an SQL literal. */
function quote(text: string): string {
  return `'${text.replaceAll("'", "''")}'`
}

/** The statement that applies a call (its params in order: see the apply function). */
export function applyStatement(names: Names): string {
  return `SELECT ${names.of('apply')}($1::text, $2::text[], $3::int[], $4::float8[], $5::float8, $6::int, $7::float8, $8::float8, $9::float8[], $10::text[], $11::float8, $12::float8[]) AS r`
}

export function resetStatement(names: Names): string {
  return `DELETE FROM ${names.table} WHERE k = $1::text`
}

export function sweepStatement(names: Names): string {
  return `SELECT ${names.of('sweep')}($1::int) AS n`
}
