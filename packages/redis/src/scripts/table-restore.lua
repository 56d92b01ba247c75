-- sluice limit table: a process writes a whole table into Redis, replacing what Redis holds, when Redis
-- is behind it (restarted from an older dump, or flushed) or holds a table it never saw (re-provisioned
-- after a loss: the process sends its table merged with Redis's changes). KEYS: hash, version, audit
-- stream, stamp. ARGV: the stamp Redis must still hold (else nothing is written), the version and stamp to
-- write, the process's own stamp, audit length, pub/sub channel, actor, then entry / spec JSON pairs (at
-- most the table's bound). Replies { version, written }.
local stored = redis.call('GET', KEYS[2])
local stamp = redis.call('GET', KEYS[4]) or ''
if stamp == '' and stored and stored ~= '0' then stamp = 'v' .. stored end
if stamp ~= ARGV[1] then return { tonumber(stored or '0') or -1, 0 } end
redis.call('DEL', KEYS[1])
for i = 8, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('SET', KEYS[4], ARGV[3])
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[5], '*',
  'v', ARGV[2], 't', ms, 'change', 'restore', 'entry', '', 'before', '', 'after', '', 'actor', ARGV[7],
  'stamp', ARGV[3], 'from', ARGV[4], 'over', stamp)
redis.call('PUBLISH', ARGV[6], ARGV[2])
return { tonumber(ARGV[2]), 1 }
