/**
 * @module concurrency in PL/pgSQL (core's rules/concurrency.ts): `ids` are the leases held, oldest first,
 * `xs` when each ends, `ys` its units; `a` the end of the newest lease ever admitted (when the state can be
 * forgotten). Leases that have ended are dropped from the front, as the memory store drops them. Params:
 * limit, leaseMs.
 */
import type { ConcurrencyRule } from '@sluice/core'
import type { KindSql } from './kind.ts'

/** `f`: the first lease not ended at now (leases end from the front); `nn` the last; `tot` the units held. */
const live = `
    nn := coalesce(cardinality(st.ids), 0); f := 1;
    WHILE f <= nn AND st.xs[f] <= now LOOP f := f + 1; END LOOP;
    tot := 0;
    FOR j IN f..nn LOOP tot := tot + st.ys[j]; END LOOP;`

export const concurrencySql: KindSql<ConcurrencyRule> = {
  code: 6,
  params: (rule) => [rule.limit, rule.leaseMs],
  decide: `${live}
    -- The end of the newest lease held, or now when none is.
    v := CASE WHEN f <= nn THEN st.xs[nn] ELSE now END;
    IF tot + cc <= p1 THEN
      rem := p1 - tot - cc;
      rst := CASE WHEN cc = 0 THEN v - now ELSE p2 END;
    ELSE
      -- The call fits once enough of the oldest leases have ended (a release can come sooner).
      ok := false; w := 0; z := now;
      FOR j IN f..nn LOOP
        w := w + st.ys[j]; z := st.xs[j];
        EXIT WHEN tot - w + cc <= p1;
      END LOOP;
      rem := greatest(p1 - tot, 0); rst := v - now; rty := z - now;
    END IF;`,
  admit: `${live}
    st.ids := coalesce(st.ids[f:nn], '{}') || mk;
    st.xs := coalesce(st.xs[f:nn], '{}') || (now + p2);
    st.ys := coalesce(st.ys[f:nn], '{}') || cc;
    st.a := greatest(coalesce(st.a, '-Infinity'), now + p2);
    st.expires := greatest(st.expires, st.a);
    changed := true;`,
  // Held units come back by release, not by refund; a penalty holds nothing.
  refund: '',
  refundCall: '',
  penalize: '',
  // Idempotent: an unknown or released lease changes nothing.
  release: `
    j := array_position(st.ids, mk);
    IF j IS NOT NULL THEN
      st.ids := st.ids[:j - 1] || st.ids[j + 1:];
      st.xs := st.xs[:j - 1] || st.xs[j + 1:];
      st.ys := st.ys[:j - 1] || st.ys[j + 1:];
      changed := true;
    END IF;`,
}
