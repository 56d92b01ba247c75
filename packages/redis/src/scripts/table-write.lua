-- sluice limit table: one change (set or delete one entry), atomically.
-- KEYS: the table's hash (entry -> spec JSON), its version, its audit stream, its stamp.
-- ARGV: entry, after (spec JSON, or '' to delete), actor, the writer's version, the writer's stamp, audit
-- length (MAXLEN ~), pub/sub channel, most entries, most characters of one entry's JSON, the new stamp.
-- Replies { version, changed, the stamp before }: changed 0 for a delete of an entry the table does not
-- hold; version -1 when the table is full, -2 when the entry is too large, -3 when Redis is behind the
-- writer (it holds another table at a lower version: the writer writes its own table back first), -4 when
-- the version would pass 2^53 - 1 (nothing written in any of these).
-- The stamp is a random id of the table as it stands after a change: two tables at one version are one
-- table only when their stamps are equal. The audit record keeps the stamp and the one before ('from').
local entry, after = ARGV[1], ARGV[2]
local stored = redis.call('GET', KEYS[2])
local version = tonumber(stored or '0')
local stamp = redis.call('GET', KEYS[4]) or ''
if stamp == '' and version ~= 0 then stamp = 'v' .. stored end
if #after > tonumber(ARGV[9]) then return { -2, 0, stamp } end
if version == nil or version >= 9007199254740991 or version < 0 then return { -4, 0, stamp } end
if stamp ~= ARGV[5] and version < tonumber(ARGV[4]) then return { -3, 0, stamp } end
local before = redis.call('HGET', KEYS[1], entry)
-- Removing an entry Redis does not hold changes nothing, unless Redis holds no table at all (never written,
-- or lost): processes may still hold the entry, so the delete is recorded, and they drop it.
if after == '' and not before and stored then return { version, 0, stamp } end
if after ~= '' and not before and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[8]) then return { -1, 0, stamp } end
version = version + 1
redis.call('SET', KEYS[2], version)
redis.call('SET', KEYS[4], ARGV[10])
local change = 'set'
if after == '' then
  redis.call('HDEL', KEYS[1], entry)
  change = 'delete'
else
  redis.call('HSET', KEYS[1], entry, after)
end
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], '*',
  'v', version, 't', ms, 'change', change, 'entry', entry, 'before', before or '', 'after', after,
  'actor', ARGV[3], 'stamp', ARGV[10], 'from', stamp)
-- A hint only: a process that hears it reads the table from Redis, never from the message.
redis.call('PUBLISH', ARGV[7], tostring(version))
return { version, 1, stamp }
