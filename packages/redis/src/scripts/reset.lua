-- sluice: forgets one key's state under the given rules. KEYS: the rule keys and the key's block, then the
-- key's reset count (last), all in one hash slot. The count tells a process holding prefetched units for the
-- key, at its next round trip, that the state they were counted in is gone (src/compose.ts, `fetch`); it
-- outlives any batch (prefetch's `ms` is at most 60 s).
local n = #KEYS
redis.call('DEL', unpack(KEYS, 1, n - 1))
redis.call('INCR', KEYS[n])
redis.call('PEXPIRE', KEYS[n], 120000)
return 1
