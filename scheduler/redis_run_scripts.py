"""The Lua a sharded run keeps in its home slot (`hostcrawl:{RUN}:`): the run-wide budget and politeness
groups, which the shards' own scripts cannot see (scheduler/redis_shards.py).

- `reserved`: budget handed to the shards' claims. RESERVE takes up to n of what is left, a claim pays for
  its new leases with it, and what a claim did not use, a fetch that never reached the network, and an
  expired lease whose URL was never picked give it back (UNRESERVE). A worker that dies between the two
  loses at most one claim's share of the budget; the run never spends more than its budget.
- `rgroups` (host -> JSON list of its politeness groups), `rgmembers` (group -> hosts in it), `rgheld:GROUP`
  (lease -> expiry, ms): the leases in flight per group, over every shard. A lease is taken in the group
  after its shard's claim (GROUP_TAKE) and given back when its fetch ends (GROUP_GIVE); a lease whose
  worker died stops counting at its expiry, which GROUP_RENEW moves on as the worker renews it.
"""

from __future__ import annotations

from scheduler.redis_scripts import _NOW

# ARGV: the meta field, the shard count. Set unless the run has one already, or was seeded by a version
# that set none (a run is never split after its first URLs are queued).
SET_SHARDS = """
local P = KEYS[1]
if redis.call('HEXISTS', P..'meta', 'seeded_by') == 1 then return 0 end
return redis.call('HSETNX', P..'meta', ARGV[1], ARGV[2])
"""

# ARGV: budget, n. Returns how many of n the run may still pay for (reserved now).
RESERVE = """
local P = KEYS[1]
local budget, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local left = budget - tonumber(redis.call('GET', P..'reserved') or '0')
local take = math.max(0, math.min(n, left))
if take > 0 then redis.call('INCRBY', P..'reserved', take) end
return take
"""

# ARGV: n. Budget given back (never below 0).
UNRESERVE = """
local P = KEYS[1]
local left = redis.call('DECRBY', P..'reserved', tonumber(ARGV[1]))
if left < 0 then redis.call('SET', P..'reserved', 0) end
return left
"""

# ARGV: host, group. As JOIN (scheduler/redis_groups.py), run-wide. Returns 1 if it is new.
RUN_JOIN = """
local P = KEYS[1]
local h, group = ARGV[1], ARGV[2]
local raw = redis.call('HGET', P..'rgroups', h)
local groups = raw and cjson.decode(raw) or {}
for _, g in ipairs(groups) do
  if g == group then return 0 end
end
groups[#groups + 1] = group
redis.call('HSET', P..'rgroups', h, cjson.encode(groups))
redis.call('HINCRBY', P..'rgmembers', group, 1)
return 1
"""

# ARGV: lease, host, group limit, lease ms. The lease counts in each shared group of its host, unless one of
# them already has `limit` leases in flight (then nothing is taken: returns 0). Returns 1 if taken.
GROUP_TAKE = (
    _NOW
    + """
local P = KEYS[1]
local lease, h, limit, lease_ms = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local raw = redis.call('HGET', P..'rgroups', h)
if limit <= 0 or not raw then return 1 end
local shared = {}
for _, g in ipairs(cjson.decode(raw)) do
  if tonumber(redis.call('HGET', P..'rgmembers', g) or '0') > 1 then
    redis.call('ZREMRANGEBYSCORE', P..'rgheld:'..g, '-inf', now)  -- leases of dead workers
    if redis.call('ZCARD', P..'rgheld:'..g) >= limit then return 0 end
    shared[#shared + 1] = g
  end
end
if #shared == 0 then return 1 end
for _, g in ipairs(shared) do redis.call('ZADD', P..'rgheld:'..g, now + lease_ms, lease) end
redis.call('HSET', P..'rglease', lease, cjson.encode(shared))
return 1
"""
)

# ARGV: leases. Their requests are no longer in flight.
GROUP_GIVE = """
local P = KEYS[1]
for _, lease in ipairs(ARGV) do
  local raw = redis.call('HGET', P..'rglease', lease)
  if raw then
    for _, g in ipairs(cjson.decode(raw)) do redis.call('ZREM', P..'rgheld:'..g, lease) end
    redis.call('HDEL', P..'rglease', lease)
  end
end
return 1
"""

# ARGV: lease ms, then leases a live worker holds: they keep counting in their groups.
GROUP_RENEW = (
    _NOW
    + """
local P = KEYS[1]
for i = 2, #ARGV do
  local raw = redis.call('HGET', P..'rglease', ARGV[i])
  if raw then
    for _, g in ipairs(cjson.decode(raw)) do
      redis.call('ZADD', P..'rgheld:'..g, 'XX', now + tonumber(ARGV[1]), ARGV[i])
    end
  end
end
return 1
"""
)
