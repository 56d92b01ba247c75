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
