-- sluice: forgets one key's state under the given rules (KEYS: the rule keys, all in one hash slot).
return redis.call('DEL', unpack(KEYS))
