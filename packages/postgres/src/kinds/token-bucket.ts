/**
 * @module tokenBucket in PL/pgSQL (core's rules/token-bucket.ts): `a` is the level in thousandths, `b` when
 * it was last brought up to date, `c` when the bucket is full again (from then on it reads as a fresh, full
 * bucket). Params: capacity, refillPerSecond.
 */
import type { TokenBucketRule } from '@sluice/core'
import type { KindSql } from './kind.ts'

/** Thousandths at `t` for a bucket that held `m0` at `t0`. */
const milliAt = (m0: string, t0: string, t: string) =>
  `least(${m0} + (CASE WHEN ${t} > ${t0} THEN ${t} - ${t0} ELSE 0 END) * p2, p1 * 1000)`

/** Brings a bucket that reads as full (fresh, or past `c`) to a full one at `now`. */
const freshen = `IF st.c IS NULL OR now >= st.c THEN st.a := p1 * 1000; st.b := now; END IF;`
/** After a write: `b` moves up to now, `c` is when the level is full again. */
const written = (untilFn: string) => `
    IF now > st.b THEN st.b := now; END IF;
    st.c := st.b + ${untilFn}(p1, p2, st.a, st.b, p1 * 1000, st.b);
    st.expires := greatest(st.expires, st.c);
    changed := true;`

export function tokenBucketSql(name: (suffix: string) => string): KindSql<TokenBucketRule> {
  const msUntil = name('tb_ms_until')
  const refund = `
    IF now < st.c THEN
      st.a := least(${milliAt('st.a', 'st.b', 'now')} + cc * 1000, p1 * 1000);
      ${written(msUntil)}
    END IF;`
  return {
    code: 4,
    params: (rule) => [rule.capacity, rule.refillPerSecond],
    helpers: () => `
-- Whole ms from \`now\` until a bucket that held \`m0\` at \`t0\` holds \`target\` thousandths: the least such ms
-- under the arithmetic that judges the retry, settled by at most two steps each way.
CREATE OR REPLACE FUNCTION ${msUntil}(p1 float8, p2 float8, m0 float8, t0 float8, target float8, now float8)
RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
  have float8 := ${milliAt('m0', 't0', 'now')};
  ms float8;
BEGIN
  IF have >= target THEN RETURN 0; END IF;
  ms := ceil((target - have) / p2);
  FOR i IN 1..2 LOOP
    EXIT WHEN NOT (ms > 1 AND ${milliAt('m0', 't0', 'now + ms - 1')} >= target);
    ms := ms - 1;
  END LOOP;
  FOR i IN 1..2 LOOP
    EXIT WHEN NOT (${milliAt('m0', 't0', 'now + ms')} < target);
    ms := ms + 1;
  END LOOP;
  RETURN ms;
END
$f$;`,
    decide: `
    IF st.c IS NULL OR now >= st.c THEN x := p1 * 1000; y := now; ELSE x := st.a; y := st.b; END IF;
    z := ${milliAt('x', 'y', 'now')};
    IF z >= cc * 1000 THEN
      w := z - cc * 1000;
      rst := ${msUntil}(p1, p2, w, greatest(now, y), p1 * 1000, now);
      rem := floor(w / 1000);
    ELSE
      ok := false;
      rst := ${msUntil}(p1, p2, x, y, p1 * 1000, now);
      rty := ${msUntil}(p1, p2, x, y, cc * 1000, now);
      rem := greatest(floor(z / 1000), 0);
    END IF;`,
    admit: `
    ${freshen}
    st.a := ${milliAt('st.a', 'st.b', 'now')} - cc * 1000;
    ${written(msUntil)}`,
    // Past `c` the bucket reads as full: nothing to give back.
    refund,
    // Only while the state was last written in the call's own ms (see core's refundCall).
    refundCall: `IF st.b = mk::float8 THEN ${refund} END IF;`,
    penalize: `
    ${freshen}
    z := ${milliAt('st.a', 'st.b', 'now')};
    -- Below zero by at most the penalty; a bucket already lower than that stays where it is.
    st.a := least(z, greatest(z - cc * 1000, -cc * 1000));
    ${written(msUntil)}`,
  }
}
