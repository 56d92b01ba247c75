/**
 * @module leakyBucket in PL/pgSQL (core's rules/leaky-bucket.ts): `a` is the start (-Infinity when nothing
 * has passed), `b` the units queued behind it, `c` when the bucket has drained for a full queue (from then
 * on it reads as fresh). Params: ratePerSecond, maxQueueMs, limit.
 */
import type { LeakyBucketRule } from '@sluice/core'
import type { KindSql } from './kind.ts'

/** ms that `units` units take to pass. */
const span = (units: string) => `((${units}) * 1000 / p1)`

export function leakyBucketSql(name: (suffix: string) => string): KindSql<LeakyBucketRule> {
  const remaining = name('lb_remaining')
  const drained = name('lb_drained')
  /** The state as it reads at now: `x` its start, `y` its units. */
  const live = `IF st.c IS NULL OR now >= st.c THEN x := '-Infinity'; y := 0; ELSE x := st.a; y := st.b; END IF;`
  const until = `st.c := st.a + ceil(${span('st.b + p3')}); st.expires := greatest(st.expires, st.c); changed := true;`
  const refund = `
    IF now < st.c THEN
      -- The slot goes back by \`cost\` intervals, but not before now.
      z := now - st.a;
      IF st.b >= cc AND ${span('st.b - cc')} >= z THEN st.b := st.b - cc; ${until}
      ELSIF ${span('st.b')} > z THEN st.a := now; st.b := 0; ${until}
      END IF;
    END IF;`
  return {
    code: 5,
    params: (rule) => [rule.ratePerSecond, rule.maxQueueMs, rule.limit],
    helpers: () => `
-- Units of cost 1 that could still be admitted at \`now\`, behind the queued units.
CREATE OR REPLACE FUNCTION ${remaining}(p1 float8, p2 float8, p3 float8, start float8, units float8, now float8)
RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
  elapsed float8 := now - start;
  ms float8;
  n float8;
BEGIN
  IF ${span('units + 1')} <= elapsed THEN RETURN p3; END IF;
  -- The most units whose intervals fit in \`maxQueueMs + elapsed\`, settled by at most two steps each way.
  ms := p2 + elapsed;
  n := greatest(0, floor((ms * p1) / 1000));
  FOR i IN 1..2 LOOP EXIT WHEN NOT (((n + 1) * 1000) / p1 <= ms); n := n + 1; END LOOP;
  FOR i IN 1..2 LOOP EXIT WHEN NOT (n > 0 AND (n * 1000) / p1 > ms); n := n - 1; END LOOP;
  n := n - units;
  RETURN CASE WHEN n < 0 THEN 0 ELSE least(n, p3) END;
END
$f$;
-- Whole ms from \`now\` until the bucket is drained.
CREATE OR REPLACE FUNCTION ${drained}(p1 float8, start float8, units float8, now float8)
RETURNS float8 LANGUAGE sql IMMUTABLE AS $f$
  SELECT greatest(ceil(${span('units + 1')}) - (now - start), 0)
$f$;`,
    decide: `
    ${live}
    IF cc = 0 THEN
      rem := ${remaining}(p1, p2, p3, x, y, now); rst := ${drained}(p1, x, y, now);
    ELSE
      z := ceil(${span('y + cc')}) - (now - x);
      IF z > p2 THEN
        ok := false; rty := z - p2;
        rem := ${remaining}(p1, p2, p3, x, y, now); rst := ${drained}(p1, x, y, now);
      ELSIF z <= 0 THEN
        rem := ${remaining}(p1, p2, p3, now, 0, now); rst := ${drained}(p1, now, 0, now);
      ELSE
        rem := ${remaining}(p1, p2, p3, x, y + cc, now); rst := ${drained}(p1, x, y + cc, now); wt := z;
      END IF;
    END IF;`,
    admit: `
    IF st.c IS NOT NULL AND now < st.c AND ceil(${span('st.b + cc')}) > now - st.a THEN st.b := st.b + cc;
    ELSE st.a := now; st.b := 0;
    END IF;
    ${until}
    q1 := st.a; q2 := st.b;`,
    refund,
    // The call's slot (its ms plus its wait): while it is ahead, every later call queued behind it.
    refundCall: `IF mk::float8 > now THEN ${refund} END IF;`,
    penalize: `
    ${live}
    s := x; u := y;
    IF ${span('u')} >= now - s THEN u := u + cc; ELSE s := now; u := cc; END IF;
    z := now + p2;
    IF s + ${span('u')} > z + ${span('cc')} THEN
      IF x + ${span('y')} >= z + ${span('cc')} THEN s := NULL; ELSE s := z; u := cc; END IF;
    END IF;
    IF s IS NOT NULL THEN st.a := s; st.b := u; ${until} END IF;`,
    // Only where the queue is still exactly as the call left it (its mark: start and units).
    unqueue: `
    IF st.a = split_part(mk, ':', 1)::float8 AND st.b = split_part(mk, ':', 2)::float8 THEN ${refund} END IF;`,
  }
}
