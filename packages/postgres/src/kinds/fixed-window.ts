/**
 * @module fixedWindow in PL/pgSQL: `a` is the window's start, `b` its count (core's rules/fixed-window.ts).
 * Params: limit, windowMs.
 */
import type { FixedWindowRule } from '@sluice/core'
import type { KindSql } from './kind.ts'

/** The start of the window holding `t`. */
const start = (t: string) => `(${t} - (${t}::bigint % p2::bigint))`

export const fixedWindowSql: KindSql<FixedWindowRule> = {
  code: 1,
  params: (rule) => [rule.limit, rule.windowMs],
  decide: `
    x := ${start('now')};
    y := CASE WHEN st.a = x THEN st.b ELSE 0 END;
    ok := y + cc <= p1;
    z := CASE WHEN ok THEN y + cc ELSE y END;
    -- Nothing counted (only with cost 0: another rule denied the call) means nothing to replenish.
    rst := CASE WHEN z = 0 THEN 0 ELSE x + p2 - now END;
    rem := greatest(p1 - z, 0);
    rty := CASE WHEN ok THEN 0 ELSE rst END;`,
  admit: `
    x := ${start('now')};
    IF st.a IS DISTINCT FROM x THEN st.a := x; st.b := 0; END IF;
    st.b := st.b + cc;
    st.expires := greatest(st.expires, st.a + p2);
    changed := true;`,
  refund: `
    -- Only the current window's count: units of a window that is over no longer count anyway.
    IF st.a = ${start('now')} THEN st.b := greatest(st.b - cc, 0); changed := true; END IF;`,
  refundCall: `
    -- The call's units count only in the window it was counted in, and only while that window lasts.
    m := mk::float8;
    IF ${start('m')} = ${start('now')} AND st.a = ${start('now')} THEN
      st.b := greatest(st.b - cc, 0); changed := true;
    END IF;`,
  penalize: `
    x := ${start('now')};
    IF st.a IS DISTINCT FROM x THEN st.a := x; st.b := 0; END IF;
    st.b := greatest(st.b, least(st.b + cc, p1 + cc));
    st.expires := greatest(st.expires, st.a + p2);
    changed := true;`,
}

/**
 * The commonest call, one fixedWindow rule consumed without a block, as one upsert (no function): it
 * counts the call when it fits, and otherwise only marks the row's `c` 0 (`c` is 1 when the call was
 * counted; fixedWindow keeps nothing else there), so the row lock that makes it atomic is the only lock it
 * takes. Its arguments: key, rule id, limit, windowMs, cost, the caller's ms (or null), deadline, budget,
 * lock_timeout (text); the deadline checks and the lock wait's bound are those of the apply function. It
 * returns no row when the call was late, else the row's window start, count, `c`, the call's ms and the
 * server's ms.
 */
export function fixedWindowConsume(table: string): string {
  const ms = (t: string) => `floor(extract(epoch FROM ${t}) * 1000)::float8`
  const before = `${ms('clock_timestamp()')} < coalesce($7::float8, ${ms('statement_timestamp()')} + $8::float8)`
  const count = '(CASE WHEN x.a = EXCLUDED.a THEN x.b ELSE 0 END)'
  const fits = `${count} + $5::float8 <= $3::float8`
  return `WITH t AS MATERIALIZED (
  SELECT ${ms('clock_timestamp()')} AS server, set_config('lock_timeout', $9::text, true) AS cfg
), s AS (
  SELECT server, coalesce($6::float8, server) AS now FROM t
), w AS (
  SELECT server, now, now - (now::bigint % $4::bigint) AS start FROM s
)
INSERT INTO ${table} AS x (k, r, a, b, c, expires)
SELECT $1::text, $2::text, w.start, $5::float8, 1, w.start + $4::float8 FROM w WHERE ${before}
ON CONFLICT (k, r) DO UPDATE SET
  a = EXCLUDED.a,
  b = CASE WHEN ${fits} THEN ${count} + $5::float8 ELSE x.b END,
  c = CASE WHEN ${fits} THEN 1 ELSE 0 END,
  expires = greatest(x.expires, EXCLUDED.expires)
WHERE ${before}
RETURNING a, b, c, (SELECT now FROM w) AS now, (SELECT server FROM w) AS server`
}
