-- sluice limit table: a process writes back the table it holds into a Redis that is behind it (restarted
-- without persistence, or flushed). KEYS: hash, version, audit stream. ARGV: the version the process
-- holds, audit length, pub/sub channel, actor, then entry / spec JSON pairs (at most the table's bound).
-- Entries written since Redis lost the table are newer than the snapshot and win over it; the table
-- then moves one version past the snapshot, so every process reads the merge. Replies { version, done }.
local stored = tonumber(redis.call('GET', KEYS[2]) or '0')
local held = tonumber(ARGV[1])
if stored >= held then return { stored, 0 } end
local written = redis.call('HLEN', KEYS[1])
for i = 5, #ARGV, 2 do
  redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1])
end
local version = held
if written > 0 then version = held + 1 end
redis.call('SET', KEYS[2], version)
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[2], '*',
  'v', version, 't', ms, 'change', 'restore', 'entry', '', 'before', '', 'after', '', 'actor', ARGV[4])
-- An empty entry asks every process to read the whole table again.
if version > held then redis.call('PUBLISH', ARGV[3], version .. '\n\n') end
return { version, 1 }
