-- sluice limit table: one change (set or delete one entry), atomically.
-- KEYS: the table's hash (entry -> spec JSON), its version, its audit stream.
-- ARGV: entry, after (spec JSON, or '' to delete), actor, the highest version the writer has seen, audit
-- length (MAXLEN ~), pub/sub channel, most entries, most characters of one entry's JSON.
-- Replies { version, changed }: changed 0 for a delete of an entry the table does not hold; version -1
-- when the table is full, -2 when the entry is too large (nothing written either way).
-- The version carries on from the highest the writer has seen: a Redis that lost the table (restarted
-- without persistence) never hands out a version a process already holds for another table.
local entry, after = ARGV[1], ARGV[2]
if #after > tonumber(ARGV[8]) then return { -2, 0 } end
local before = redis.call('HGET', KEYS[1], entry)
local version = tonumber(redis.call('GET', KEYS[2]) or '0')
if after == '' and not before then return { version, 0 } end
if after ~= '' and not before and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[7]) then return { -1, 0 } end
local seen = tonumber(ARGV[4])
if version < seen then version = seen end
version = version + 1
redis.call('SET', KEYS[2], version)
local change = 'set'
if after == '' then
  redis.call('HDEL', KEYS[1], entry)
  change = 'delete'
else
  redis.call('HSET', KEYS[1], entry, after)
end
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*',
  'v', version, 't', ms, 'change', change, 'entry', entry, 'before', before or '', 'after', after, 'actor', ARGV[3])
-- Entry names hold no line breaks and spec JSON none either: version, entry and value, one per line.
redis.call('PUBLISH', ARGV[6], version .. '\n' .. entry .. '\n' .. after)
return { version, 1 }
