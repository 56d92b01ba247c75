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
