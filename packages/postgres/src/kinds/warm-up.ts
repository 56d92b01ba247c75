/**
 * @module warmUp in PL/pgSQL (core's rules/warm-up.ts): `a` is the next slot, `b` the stored permits, `c`
 * when the meter is cold again (from then on it reads as fresh). Params: stableMs, maxQueueMs, limit,
 * thresholdPermits, maxPermits, slope, coolDownMs.
 */
import type { WarmUpRule } from '@sluice/core'
import type { KindSql } from './kind.ts'

/** Idle time stores permits: `x` the next slot, `y` the stored permits, brought to now. */
const idle = `IF now > x THEN y := least(p5, y + (now - x) / p7); x := now; END IF;`
const cold = `
    st.c := ceil(st.a + (p5 - st.b + 1) * p7) + 1;
    st.expires := greatest(st.expires, st.c);
    changed := true;`

export function warmUpSql(name: (suffix: string) => string): KindSql<WarmUpRule> {
  const waitFor = name('wu_wait_for')
  const remaining = name('wu_remaining')
  const reset = (ahead: string) => `CASE WHEN ${ahead} > 0 THEN ceil(${ahead}) ELSE 0 END`
  const live = `IF st.c IS NULL OR now >= st.c THEN x := now; y := p5; ELSE x := st.a; y := st.b; END IF;`
  const refund = `
    -- The next slot goes back by \`cost\` stable intervals, not before now; stored permits stay spent.
    IF now < st.c AND st.a > now THEN st.a := greatest(now, st.a - cc * p1); ${cold} END IF;`
  return {
    code: 7,
    params: (rule) => [
      rule.stableMs,
      rule.maxQueueMs,
      rule.limit,
      rule.thresholdPermits,
      rule.maxPermits,
      rule.slope,
      rule.coolDownMs,
    ],
    helpers: () => `
-- ms that taking \`take\` of \`stored\` permits costs.
CREATE OR REPLACE FUNCTION ${waitFor}(p1 float8, p4 float8, p6 float8, stored float8, take float8)
RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
  above float8 := stored - p4;
  w float8 := 0;
  t float8;
BEGIN
  IF above > 0 THEN
    t := least(above, take);
    w := (t * ((p1 + above * p6) + (p1 + (above - t) * p6))) / 2;
    take := take - t;
  END IF;
  RETURN w + p1 * take;
END
$f$;
-- Units of cost 1 that could still be admitted at the stable rate, the next slot \`ahead\` ms away.
CREATE OR REPLACE FUNCTION ${remaining}(p1 float8, p2 float8, p3 float8, ahead float8)
RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS $f$
DECLARE
  n float8;
BEGIN
  IF ahead <= 0 THEN RETURN p3; END IF;
  n := floor((p2 - ahead) / p1) + 1;
  IF n < 0 THEN n := 0; END IF;
  FOR i IN 1..2 LOOP EXIT WHEN NOT (n > 0 AND ahead + (n - 1) * p1 > p2); n := n - 1; END LOOP;
  FOR i IN 1..2 LOOP EXIT WHEN NOT (n < p3 AND ahead + n * p1 <= p2); n := n + 1; END LOOP;
  RETURN least(n, p3);
END
$f$;`,
    decide: `
    ${live}
    ${idle}
    IF cc = 0 THEN
      rem := ${remaining}(p1, p2, p3, x - now); rst := ${reset('x - now')};
    ELSIF x - now > p2 THEN
      ok := false;
      rem := ${remaining}(p1, p2, p3, x - now); rst := ${reset('x - now')}; rty := ceil(x - p2 - now);
    ELSE
      w := least(cc, y);
      z := x + ${waitFor}(p1, p4, p6, y, w) + (cc - w) * p1;
      rem := ${remaining}(p1, p2, p3, z - now); rst := ${reset('z - now')}; wt := ceil(x - now);
    END IF;`,
    admit: `
    ${live}
    ${idle}
    w := least(cc, y);
    st.a := x + ${waitFor}(p1, p4, p6, y, w) + (cc - w) * p1;
    st.b := y - w;
    ${cold}`,
    refund,
    // The call's next slot (its ms plus its reset): while it is ahead, every later call chained behind it.
    refundCall: `IF mk::float8 > now THEN ${refund} END IF;`,
    penalize: `
    ${live}
    ${idle}
    -- The next slot moves on by \`cost\` stable intervals, spending no stored permit, at most \`cost\`
    -- intervals past a full queue.
    st.a := greatest(x, least(x + cc * p1, now + p2 + cc * p1));
    st.b := y;
    ${cold}`,
  }
}
