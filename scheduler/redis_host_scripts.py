"""The Redis frontier's Lua for what is decided about a host: robots.txt or its health blocks it, the policy
drops it (for good, or dormant until better hosts are lacking) or re-ranks it. See scheduler/redis_scripts.py
for the sets a host moves between.
"""

from __future__ import annotations

from scheduler.redis_scripts import _NOW, _PARK

# No more requests to a host: its queue is dropped (counted). ARGV: host, reason.
BLOCK = """
local P = KEYS[1]
local h, reason = ARGV[1], ARGV[2]
if redis.call('SADD', P..'blocked', h) == 0 then return 0 end
local n = redis.call('LLEN', P..'q:'..h)
redis.call('DEL', P..'q:'..h)
redis.call('ZREM', P..'eligible', h)
redis.call('ZREM', P..'eligible_new', h)
redis.call('ZREM', P..'waiting', h)
redis.call('ZREM', P..'dormant', h)
redis.call('ZREM', P..'dormant_waiting', h)
redis.call('HDEL', P..'urgent', h)
redis.call('HINCRBY', P..'counters', 'dropped/host_blocked', n)
redis.call('HINCRBY', P..'counters', 'host/blocked/'..reason, 1)
return n
"""

# The policy gave up on a host. ARGV: host, reason, rank ('' for none). With a rank it is dormant: its queue
# is kept (new URLs too), and CLAIM takes it only when better hosts are lacking (re-ranked by each DROP).
# Without one its queued URLs are dropped (counted) and no new ones are queued; a lease that expires later
# still returns (what a dead worker fetched and never recorded is fetched again). Returns URLs dropped.
DROP = (
    _NOW
    + _PARK
    + """
local P = KEYS[1]
local h, reason, rank = ARGV[1], ARGV[2], ARGV[3] or ''
if redis.call('SISMEMBER', P..'dropped', h) == 1 then return 0 end
if redis.call('SISMEMBER', P..'revivable', h) == 0 then
  redis.call('HINCRBY', P..'counters', 'host/dropped/'..reason, 1)
end
for _, name in ipairs({'eligible', 'eligible_new', 'waiting', 'dormant', 'dormant_waiting'}) do
  redis.call('ZREM', P..name, h)
end
if rank ~= '' then
  redis.call('SADD', P..'revivable', h)
  redis.call('HSET', P..'prio', h, rank)
  park(P, h, now, rank)
  return 0
end
redis.call('SREM', P..'revivable', h)
redis.call('SADD', P..'dropped', h)
local keep = tonumber(redis.call('HGET', P..'urgent', h) or '0')  -- a dead worker's, at the front
local n = redis.call('LLEN', P..'q:'..h) - keep
if keep > 0 then
  redis.call('LTRIM', P..'q:'..h, 0, keep - 1)
  park(P, h, now, 0)
else
  redis.call('DEL', P..'q:'..h)
end
redis.call('HINCRBY', P..'counters', 'dropped/host_dropped', n)
return n
"""
)

# A worker's new estimate of a host's worth: re-ranks it if it is eligible now. ARGV: host, priority,
# '1' if the policy has judged the host (else it competes with the new ones, see CLAIM's boost), '1' if
# the host was dormant and its new page lifted it back over the drop level (it leaves the dormant sets).
PRIORITISE = """
local P = KEYS[1]
local h, prio = ARGV[1], ARGV[2]
redis.call('HSET', P..'prio', h, prio)
local was = redis.call('ZREM', P..'eligible', h) + redis.call('ZREM', P..'eligible_new', h)
if ARGV[4] == '1' and redis.call('SREM', P..'revivable', h) == 1 then
  redis.call('HINCRBY', P..'counters', 'host/rejudged', 1)
  was = was + redis.call('ZREM', P..'dormant', h)
  local rest = redis.call('ZSCORE', P..'dormant_waiting', h)
  if rest then
    redis.call('ZREM', P..'dormant_waiting', h)
    redis.call('ZADD', P..'waiting', rest, h)
  end
end
if ARGV[3] == '1' then redis.call('SADD', P..'known', h) else redis.call('SREM', P..'known', h) end
if was > 0 then
  if ARGV[3] == '1' then
    redis.call('ZADD', P..'eligible', prio, h)
  else
    redis.call('ZADD', P..'eligible_new', prio, h)
  end
end
return 1
"""

# A run counter added to once per operation: a pipeline resent after a lost reply does not count twice.
# Each worker numbers its count operations in the order it sends them (a pipeline is resent whole and in
# order), so the highest number done per worker is all that is kept. ARGV: field, n, worker, op number.
COUNT_ONCE = """
local P = KEYS[1]
local seq = tonumber(ARGV[4])
if seq <= tonumber(redis.call('HGET', P .. 'opseq', ARGV[3]) or '0') then return false end
redis.call('HSET', P .. 'opseq', ARGV[3], seq)
return redis.call('HINCRBY', P .. 'counters', ARGV[1], tonumber(ARGV[2]))
"""

# One scored page's share of the run-wide policy state: its URL shape's count, its host's posterior mean
# (ARGV: host, shape, '1' if the page was good, mean or ''), each noted in `shared_changed` under the next
# number of `shared_seq`, so a worker reads only what changed since its last read (SHARED_SINCE), never the
# whole run's hosts. Runs inside the worker's observation transaction (applied once).
SHARE = """
local P = KEYS[1]
local h, shape, mean = ARGV[1], ARGV[2], ARGV[4]
redis.call('HINCRBY', P..(ARGV[3] == '1' and 'shape_high' or 'shape_low'), shape, 1)
local seq = redis.call('INCR', P..'shared_seq')
redis.call('ZADD', P..'shared_changed', seq, 's:'..shape)
if mean ~= '' then
  redis.call('HSET', P..'means', h, mean)
  redis.call('ZADD', P..'shared_changed', seq, 'm:'..h)
end
return seq
"""

# What changed in the run-wide policy state after change number ARGV[1], at most ARGV[2] entries: the last
# change number read, then per entry 'm', host, mean or 's', shape, good pages, other pages (the whole
# count of a shape, not its change). O(entries read): a host or shape changed twice is read once.
SHARED_SINCE = """
local P = KEYS[1]
local changed = redis.call('ZRANGEBYSCORE', P..'shared_changed', '('..ARGV[1], '+inf', 'WITHSCORES',
                           'LIMIT', 0, tonumber(ARGV[2]))
local out = {ARGV[1]}
for i = 1, #changed, 2 do
  local kind, name = string.sub(changed[i], 1, 1), string.sub(changed[i], 3)
  out[1] = changed[i + 1]
  if kind == 'm' then
    out[#out + 1] = {'m', name, redis.call('HGET', P..'means', name) or ''}
  else
    out[#out + 1] = {'s', name, redis.call('HGET', P..'shape_high', name) or '0',
                     redis.call('HGET', P..'shape_low', name) or '0'}
  end
end
return out
"""
