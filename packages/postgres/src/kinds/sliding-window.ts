/**
 * @module slidingWindow in PL/pgSQL (core's rules/sliding-window.ts): `xs` holds each slot's bucket start
 * (-Infinity for a slot never used), `ys` its count. Params: limit, windowMs, buckets, bucketMs.
 */
import type { SlidingWindowRule } from '@sluice/core'
import type { KindSql } from './kind.ts'

/** The bucket start holding `t`. */
const start = (t: string) => `(${t} - (${t}::bigint % p4::bigint))`
/** The 1-based slot of the bucket starting at `t`. */
const slot = (t: string) => `((${t}::bigint / p4::bigint) % p3::bigint)::int + 1`
/** Fresh slots. */
const create = `
    IF st.xs IS NULL THEN
      st.xs := array_fill('-Infinity'::float8, ARRAY[p3::int]);
      st.ys := array_fill(0::float8, ARRAY[p3::int]);
    END IF;`
/** `tot`: the units in the live buckets (`x` the current bucket, `y` the oldest live), `v` the newest counted. */
const total = `
    x := ${start('now')}; y := x - p2 + p4; tot := 0; v := '-Infinity';
    IF st.xs IS NOT NULL THEN
      FOR j IN 1..p3::int LOOP
        s := st.xs[j];
        IF s >= y AND s <= x AND st.ys[j] > 0 THEN
          tot := tot + st.ys[j];
          IF s > v THEN v := s; END IF;
        END IF;
      END LOOP;
    END IF;`
/** Counts `u` units in the current bucket. */
const count = `
    ${create}
    x := ${start('now')}; j := ${slot('x')};
    IF st.xs[j] <> x THEN st.xs[j] := x; st.ys[j] := 0; END IF;
    st.ys[j] := st.ys[j] + u;
    w := '-Infinity';
    FOR j IN 1..p3::int LOOP IF st.xs[j] > w THEN w := st.xs[j]; END IF; END LOOP;
    st.expires := greatest(st.expires, w + p2);
    changed := true;`

export const slidingWindowSql: KindSql<SlidingWindowRule> = {
  code: 3,
  params: (rule) => [rule.limit, rule.windowMs, rule.buckets, rule.bucketMs],
  decide: `${total}
    ok := tot + cc <= p1;
    IF ok THEN
      -- The newest counted bucket is this call's, or with cost 0 the newest holding anything.
      z := CASE WHEN cc > 0 THEN x ELSE v END;
      rst := CASE WHEN z = '-Infinity' THEN 0 ELSE z + p2 - now END;
      rem := p1 - tot - cc;
    ELSE
      -- Walk the live buckets oldest first until enough units have expired for the call to fit.
      z := tot + cc - p1; w := 0; s := y;
      WHILE s <= x LOOP
        j := ${slot('s')};
        IF st.xs[j] = s THEN w := w + st.ys[j]; END IF;
        EXIT WHEN w >= z;
        s := s + p4;
      END LOOP;
      rem := greatest(p1 - tot, 0);
      rst := v + p2 - now;
      rty := s + p2 - now;
    END IF;`,
  admit: `u := cc; ${count}`,
  refund: `
    -- Newest live bucket first: at most \`buckets\` steps, however large the refund.
    x := ${start('now')}; y := x - p2 + p4; z := cc; s := x;
    WHILE s >= y AND z > 0 LOOP
      j := ${slot('s')};
      IF st.xs[j] = s AND st.ys[j] > 0 THEN
        w := least(st.ys[j], z);
        st.ys[j] := st.ys[j] - w; z := z - w; changed := true;
      END IF;
      s := s - p4;
    END LOOP;`,
  refundCall: `
    -- The call's units are in the bucket that holds its ms, and count while that bucket is live.
    m := mk::float8; s := ${start('m')};
    IF s + p2 > now THEN
      j := ${slot('s')};
      IF st.xs[j] = s THEN st.ys[j] := st.ys[j] - least(st.ys[j], cc); changed := true; END IF;
    END IF;`,
  penalize: `${total}
    u := least(cc, p1 + cc - tot);
    IF u > 0 THEN ${count} END IF;`,
}

/**
 * One slidingWindow rule consumed without a block, as one upsert (no function), as `fixedWindowConsume`
 * is (the live total is summed once, in the sub-select that sets the row): it writes the call's bucket when the call fits, and otherwise only marks the row's `c` 0 (`c` is 1
 * when the call was counted). Its arguments: key, rule id, limit, windowMs, buckets, bucketMs, cost, the
 * caller's ms (or null), deadline, budget, lock_timeout (text). It returns no row when the call was late,
 * else `c`, the units the live buckets hold after the call, the newest live bucket holding units, the start
 * of the bucket whose expiry lets the call fit (a denied call's), the call's ms and the server's ms.
 */
export function slidingWindowConsume(table: string): string {
  const ms = (t: string) => `floor(extract(epoch FROM ${t}) * 1000)::float8`
  const before = `${ms('clock_timestamp()')} < coalesce($9::float8, ${ms('statement_timestamp()')} + $10::float8)`
  /** The row's buckets as they count at the call's ms (none when the row has expired). */
  const live = (xs: string, ys: string) =>
    `unnest(${xs}, ${ys}) AS u(s, n) WHERE s >= EXCLUDED.a - $4::float8 + $6::float8 AND s <= EXCLUDED.a AND n > 0`
  const fresh = 'x.expires <= EXCLUDED.c'
  const total = `(CASE WHEN ${fresh} THEN 0 ELSE (SELECT coalesce(sum(n), 0) FROM ${live('x.xs', 'x.ys')}) END)`
  const fits = `${total} + $7::float8 <= $3::float8`
  const slot = '((EXCLUDED.a::bigint / $6::bigint) % $5::bigint)::int + 1'
  const xs = `ARRAY(SELECT CASE WHEN i = ${slot} THEN EXCLUDED.a WHEN ${fresh} THEN '-Infinity'::float8 ELSE x.xs[i] END FROM generate_series(1, $5::int) AS i)`
  const ys = `ARRAY(SELECT CASE WHEN i = ${slot} THEN (CASE WHEN NOT ${fresh} AND x.xs[i] = EXCLUDED.a THEN x.ys[i] ELSE 0 END) + $7::float8 WHEN ${fresh} THEN 0 ELSE x.ys[i] END FROM generate_series(1, $5::int) AS i)`
  /** In RETURNING: the row as written, live at the call's ms (`now` from w). */
  const after = (what: string) =>
    `(SELECT ${what} FROM unnest(xs, ys) AS u(s, n), w WHERE s >= w.cur - $4::float8 + $6::float8 AND s <= w.cur AND n > 0)`
  return `WITH t AS MATERIALIZED (
  SELECT ${ms('clock_timestamp()')} AS server, set_config('lock_timeout', $11::text, true) AS cfg
), s AS (
  SELECT server, coalesce($8::float8, server) AS now FROM t
), w AS (
  SELECT server, now, now - (now::bigint % $6::bigint) AS cur FROM s
)
INSERT INTO ${table} AS x (k, r, a, b, c, xs, ys, expires)
SELECT $1::text, $2::text, w.cur, NULL, w.now,
  ARRAY(SELECT CASE WHEN i = ((w.cur::bigint / $6::bigint) % $5::bigint)::int + 1 THEN w.cur ELSE '-Infinity'::float8 END FROM generate_series(1, $5::int) AS i),
  ARRAY(SELECT CASE WHEN i = ((w.cur::bigint / $6::bigint) % $5::bigint)::int + 1 THEN $7::float8 ELSE 0 END FROM generate_series(1, $5::int) AS i),
  w.cur + $4::float8
FROM w WHERE ${before}
ON CONFLICT (k, r) DO UPDATE SET (xs, ys, c, expires) = (
  SELECT
    CASE WHEN fits THEN ${xs} ELSE x.xs END,
    CASE WHEN fits THEN ${ys} ELSE x.ys END,
    CASE WHEN fits THEN 1 ELSE 0 END,
    CASE WHEN fits THEN greatest(CASE WHEN ${fresh} THEN '-Infinity'::float8 ELSE x.expires END, EXCLUDED.expires)
      ELSE x.expires END
  FROM (SELECT ${fits} AS fits) AS q
)
WHERE ${before}
RETURNING CASE WHEN c = 0 THEN 0 ELSE 1 END AS ok, ${after('coalesce(sum(n), 0)')} AS total,
  CASE WHEN c = 0 THEN ${after('max(s)')} END AS newest, (SELECT now FROM w) AS now,
  (SELECT server FROM w) AS server,
  CASE WHEN c = 0 THEN (SELECT min(s) FROM (
    SELECT s, sum(n) OVER (ORDER BY s) AS freed
    FROM unnest(xs, ys) AS u(s, n), w WHERE s >= w.cur - $4::float8 + $6::float8 AND s <= w.cur AND n > 0
  ) AS walk, w WHERE freed >= ${after('coalesce(sum(n), 0)')} + $7::float8 - $3::float8) END AS retry`
}
