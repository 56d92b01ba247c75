/**
 * @module quota in PL/pgSQL: `a` is the period's start, `b` its count (core's rules/quota.ts). Params: limit,
 * the period's start, its end. The client computes the period with core's `quotaPeriod` from its estimate of
 * the database's clock and sends it (wire.ts `writePeriods`), so the periods are exactly core's (the zone's
 * rules as Node's `Intl` knows them, not PostgreSQL's own time zone data, which may be another version); the
 * apply function checks first that the call's `now` lies in it (`outside`), and answers its `now` when not,
 * for the client to send the call once more for the period holding it. A quota never waits: a decision's
 * `wt` is the period's count before the call, the decision's `used`.
 */
import type { QuotaRule } from '@sluice/core'
import type { KindSql } from './kind.ts'

export const quotaSql: KindSql<QuotaRule> = {
  code: 8,
  // The period is written per call (wire.ts `writePeriods`).
  params: (rule) => [rule.limit, 0, 0],
  outside: 'now < p2 OR now >= p3',
  decide: `
    y := CASE WHEN st.a = p2 THEN st.b ELSE 0 END;
    ok := y + cc <= p1;
    z := CASE WHEN ok THEN y + cc ELSE y END;
    -- Nothing counted (only with cost 0: another rule denied the call) means nothing to replenish.
    rst := CASE WHEN z = 0 THEN 0 ELSE p3 - now END;
    rem := greatest(p1 - z, 0);
    rty := CASE WHEN ok THEN 0 ELSE rst END;
    wt := y;`,
  admit: `
    IF st.a IS DISTINCT FROM p2 THEN st.a := p2; st.b := 0; END IF;
    st.b := st.b + cc;
    st.expires := greatest(st.expires, p3);
    changed := true;`,
  refund: `
    -- Only the current period's count: units of a period that is over no longer count anyway.
    IF st.a = p2 THEN st.b := greatest(st.b - cc, 0); changed := true; END IF;`,
  refundCall: `
    -- The call's units count only in the period they were counted in, and only while that period lasts.
    m := mk::float8;
    IF m >= p2 AND m < p3 AND st.a = p2 THEN st.b := greatest(st.b - cc, 0); changed := true; END IF;`,
  penalize: `
    IF st.a IS DISTINCT FROM p2 THEN st.a := p2; st.b := 0; END IF;
    st.b := greatest(st.b, least(st.b + cc, p1 + cc));
    st.expires := greatest(st.expires, p3);
    changed := true;`,
}
