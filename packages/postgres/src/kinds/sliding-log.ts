/**
 * @module slidingLog in PL/pgSQL (core's rules/sliding-log.ts): one entry per admitted call, `xs` its ms
 * (ascending), `ys` the running sum of units up to it (from the first entry kept). Entries that no longer
 * count go when the state is next written. Params: limit, windowMs.
 */
import type { SlidingLogRule } from '@sluice/core'
import type { KindSql } from './kind.ts'

/** `f`: the first live entry (a binary search); `nn` the last; `base` the units before `f`; `tot` the live units. */
const live = `
    nn := coalesce(cardinality(st.xs), 0); lo := 1; hi := nn + 1; x := now - p2;
    WHILE lo < hi LOOP
      mid := (lo + hi) / 2;
      IF st.xs[mid] <= x THEN lo := mid + 1; ELSE hi := mid; END IF;
    END LOOP;
    f := lo;
    base := CASE WHEN f > 1 THEN st.ys[f - 1] ELSE 0 END;
    tot := CASE WHEN nn >= f THEN st.ys[nn] - base ELSE 0 END;`
/** Drops the entries before `f`, rebasing the sums. */
const expire = `
    IF f > 1 THEN
      st.xs := st.xs[f:nn];
      st.ys := ARRAY(SELECT e - base FROM unnest(st.ys[f:nn]) AS e);
      nn := nn - f + 1; f := 1; base := 0;
    END IF;`
/** Logs `u` units at now. */
const log = `
    IF nn >= 1 AND st.xs[nn] = now THEN st.ys[nn] := st.ys[nn] + u;
    ELSE
      st.xs := coalesce(st.xs, '{}') || now;
      st.ys := coalesce(st.ys, '{}') || (CASE WHEN nn >= 1 THEN st.ys[nn] ELSE 0 END + u);
    END IF;
    st.expires := greatest(st.expires, now + p2);
    changed := true;`
/** Gives back up to `u` units, newest first: the entry whose sum passes what stays is cut down to it. */
const giveBack = `
    IF tot > 0 THEN
      z := st.ys[nn] - least(u, tot); lo := 1; hi := nn;
      WHILE lo < hi LOOP
        mid := (lo + hi) / 2;
        IF st.ys[mid] > z THEN hi := mid; ELSE lo := mid + 1; END IF;
      END LOOP;
      j := CASE WHEN z > (CASE WHEN lo > 1 THEN st.ys[lo - 1] ELSE 0 END) THEN lo ELSE lo - 1 END;
      IF j >= lo THEN st.ys[lo] := z; END IF;
      st.xs := coalesce(st.xs[1:j], '{}');
      st.ys := coalesce(st.ys[1:j], '{}');
      changed := true;
    END IF;`

export const slidingLogSql: KindSql<SlidingLogRule> = {
  code: 2,
  params: (rule) => [rule.limit, rule.windowMs],
  decide: `${live}
    ok := tot + cc <= p1;
    IF ok THEN
      -- The newest entry is this call's, or with cost 0 the newest already logged.
      rst := CASE WHEN cc > 0 THEN p2 WHEN tot > 0 THEN st.xs[nn] + p2 - now ELSE 0 END;
      rem := p1 - tot - cc;
    ELSE
      -- The call fits once the first entry whose running sum reaches the excess has expired.
      z := tot + cc - p1; lo := f; hi := nn;
      WHILE lo < hi LOOP
        mid := (lo + hi) / 2;
        IF st.ys[mid] - base >= z THEN hi := mid; ELSE lo := mid + 1; END IF;
      END LOOP;
      rem := greatest(p1 - tot, 0);
      rst := st.xs[nn] + p2 - now;
      rty := st.xs[lo] + p2 - now;
    END IF;`,
  admit: `${live} ${expire} u := cc; ${log}`,
  refund: `${live} ${expire} u := cc; ${giveBack}`,
  // The call's entry is given back only while it is the newest live entry (see core's refundCall).
  refundCall: `${live} ${expire}
    IF nn >= f AND st.xs[nn] = mk::float8 THEN
      u := least(cc, st.ys[nn] - CASE WHEN nn > 1 THEN st.ys[nn - 1] ELSE 0 END);
      ${giveBack}
    END IF;`,
  penalize: `${live} ${expire}
    u := least(cc, p1 + cc - tot);
    IF u > 0 THEN ${log} END IF;`,
}
