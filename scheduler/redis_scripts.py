"""The Redis frontier's Lua: every change to a host's queue, politeness clock or leases is one atomic script.

Keys live under one prefix per run (KEYS[1], `hostcrawl:RUN:`); a host's queue is `PREFIX q:HOST`. Times are
the Redis server's clock (TIME, milliseconds), so workers on machines with skewed clocks still agree on
when a host may be fetched again. A host is in exactly one of: `eligible` or `eligible_new` (idle, ready,
URLs queued; score = policy priority; `_new`: hosts the policy has not judged yet, which compete with the
judged ones at their score plus the run's aspiration boost, meta `boost`), `waiting` (idle, URLs queued,
politeness delay not over; score = ready time), `busy` (a request of it is in flight somewhere), `dormant`
or `dormant_waiting` (dropped by the policy, kept to come back to: `revivable`), `gwait:GROUP` (passed over
while a politeness group of it was busy: scheduler/redis_groups.py), or none (nothing queued). `ready`
remembers each host's politeness clock even while its queue is empty, so a URL found later cannot skip the
delay. `live` counts the hosts in flight that were not dormant when leased (a lease's `l`), so a claim asks
"is anything else on its way?" in O(1). What is decided about a host (block, drop, rank) is in
scheduler/redis_host_scripts.py.
"""

from __future__ import annotations

from scheduler.redis_groups import GROUP_HELPERS

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""

# Put an idle host with queued URLs where it belongs: waiting for its delay, or eligible now. A host the
# policy dropped but may come back to (`revivable`) has its own two sets, `dormant_waiting` and `dormant`.
_PARK = """
local function unscore(P, h)  -- a fetched page's lease is done (recorded) or lost: no longer in flight
  if redis.call('HINCRBY', P..'unscored', h, -1) <= 0 then redis.call('HDEL', P..'unscored', h) end
end
local function dormant(P, h)
  return redis.call('SISMEMBER', P..'revivable', h) == 1
end
local function eligible(P, h)
  if dormant(P, h) then return P..'dormant' end
  if redis.call('SISMEMBER', P..'known', h) == 1 then return P..'eligible' end
  return P..'eligible_new'
end
local function waiting(P, h)
  if dormant(P, h) then return P..'dormant_waiting' end
  return P..'waiting'
end
local function unbusy(P, h, id, lease)  -- the lease's host is no longer in flight (if it still was)
  if redis.call('HGET', P..'busy', h) ~= id then return false end
  redis.call('HDEL', P..'busy', h)
  if lease.l and redis.call('DECR', P..'live') <= 0 then redis.call('DEL', P..'live') end
  return true
end
local function park(P, h, now, default_prio)
  if redis.call('HEXISTS', P..'busy', h) == 1 or redis.call('LLEN', P..'q:'..h) == 0 then return end
  if redis.call('SISMEMBER', P..'blocked', h) == 1 then return end
  local ready = tonumber(redis.call('HGET', P..'ready', h) or '0')
  if ready > now then
    redis.call('ZREM', eligible(P, h), h)
    redis.call('ZADD', waiting(P, h), ready, h)
  else
    redis.call('ZREM', waiting(P, h), h)
    local prio = redis.call('HGET', P..'prio', h) or default_prio
    redis.call('ZADD', eligible(P, h), prio, h)
  end
end
"""

# ARGV: queue cap, worker id, then per URL 7 values: host, dedup bucket, dedup member, payload, flags
# (1 front, 2 force: no dedup, 4 urgent: a dead worker's URL again, at the front and counted in `urgent`),
# priority for a host with none yet, and a forced URL's number in its worker's sequence (0: none; one at or
# below the highest queued, `opseq` WORKER>enqueue, was queued before a lost reply and is skipped as
# 'resent'). Returns per URL '' (queued) or the reason.
ENQUEUE = (
    _NOW
    + _PARK
    + """
local P = KEYS[1]
local cap = tonumber(ARGV[1])
local ops = ARGV[2]..'>enqueue'
local done_op = tonumber(redis.call('HGET', P..'opseq', ops) or '0')
local out = {}
local queued = 0
local i = 3
while i <= #ARGV do
  local h, bucket, member, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local flags, prio, op = tonumber(ARGV[i + 4]), ARGV[i + 5], tonumber(ARGV[i + 6])
  local force = flags % 4 >= 2
  local urgent = flags >= 4  -- a dead worker's URL again (a retry or hand-back): it leads, and stays urgent
  local reason = ''
  if op > 0 and op <= done_op then
    reason = 'resent'
  elseif redis.call('SISMEMBER', P..'blocked', h) == 1 then
    reason = 'host_blocked'
  elseif not force and redis.call('SISMEMBER', P..'dropped', h) == 1 then
    reason = 'host_dropped'
  elseif not force and redis.call('SISMEMBER', P..'seen:'..bucket, member) == 1 then
    reason = 'duplicate'
  elseif redis.call('LLEN', P..'q:'..h) >= cap then
    reason = 'host_queue_full'
  else
    if not force then redis.call('SADD', P..'seen:'..bucket, member) end
    if urgent or flags % 2 == 1 then
      redis.call('LPUSH', P..'q:'..h, payload)
    else
      redis.call('RPUSH', P..'q:'..h, payload)
    end
    if urgent then redis.call('HINCRBY', P..'urgent', h, 1) end
    redis.call('HSETNX', P..'prio', h, prio)
    park(P, h, now, prio)
    queued = queued + 1
  end
  if op > done_op then
    done_op = op
    redis.call('HSET', P..'opseq', ops, op)
  end
  if reason ~= '' then redis.call('HINCRBY', P..'counters', 'dropped/'..reason, 1) end
  out[#out + 1] = reason
  i = i + 7
end
redis.call('HINCRBY', P..'counters', 'enqueued', queued)
return out
"""
)

# ARGV: how many, lease ms, worker id, budget (0 = none), window, fill hosts, fill floor, exploring ('1' or
# '0'), group limit (requests in flight per politeness group, 0 for none: scheduler/redis_groups.py), max
# unscored (nothing but a dead worker's URLs is leased while the run holds this many leases; 0: no bound),
# spend cap (new leases this claim may pay for, '' none: a sharded run's budget is reserved run-wide,
# scheduler/redis_shards.py), '1' if hosts of the run's other shards are in their delay or in flight.
# Leases hosts (not yet URLs): per lease id, host, the host's shared record (JSON or ''), '1' if what leads
# its queue is a dead worker's (fetched first), the first `window` payloads of its queue (the worker picks one
# with PICK) and how many of its fetched pages are not recorded yet. A host one of whose groups is at its
# limit is passed over. Hosts the policy has not judged compete at their rank plus the aspiration boost while
# the run is exploring; past its explore share they, and then dormant hosts ranked at or above the fill floor
# (dropped on thin evidence), fill idle capacity: while fewer than `fill hosts` hosts are busy in the run.
# Once no other host is in its delay or in flight (`live`), any of them is taken (new hosts first, then
# dormant ones, best first), as one process widens its rules.
CLAIM = (
    _NOW
    + _PARK
    + GROUP_HELPERS
    + """
local P = KEYS[1]
local n, lease_ms, worker = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local budget, window = tonumber(ARGV[4]), tonumber(ARGV[5])
local fill_hosts, fill_floor, exploring = tonumber(ARGV[6]), ARGV[7], ARGV[8] ~= '0'
local group_limit, max_unscored = tonumber(ARGV[9] or '0'), tonumber(ARGV[10] or '0')
local spend_cap, elsewhere = tonumber(ARGV[11] or ''), ARGV[12] == '1'
local SCAN = 64  -- ranked hosts looked at for one whose politeness groups are free
local DORMANT_LAST = 1000  -- a dormant host waits for its group behind every other (revive ranks < 12)
local function first(name, floor)  -- the best host of a set (at or above floor) free to go, and its score
  while true do
    local found = redis.call('ZREVRANGEBYSCORE', P..name, '+inf', floor, 'WITHSCORES', 'LIMIT', 0, SCAN)
    if #found == 0 then return nil end
    for i = 1, #found, 2 do
      local g = busy_group(P, found[i], group_limit)
      if not g then return found[i], tonumber(found[i + 1]) end
      redis.call('ZREM', P..name, found[i])  -- back when its group frees (release_groups)
      local rank = tonumber(found[i + 1]) - (name == 'dormant' and DORMANT_LAST or 0)
      wait_for_group(P, g, found[i], rank)
    end
  end
end
if redis.call('HGET', P..'meta', 'state') == 'draining' then return {} end
for _, name in ipairs({'waiting', 'dormant_waiting'}) do
  local due = redis.call('ZRANGEBYSCORE', P..name, '-inf', now, 'LIMIT', 0, 1000)
  for _, h in ipairs(due) do
    redis.call('ZREM', P..name, h)
    redis.call('ZADD', eligible(P, h), redis.call('HGET', P..'prio', h) or 0, h)
  end
end
let_in_stranded(P, group_limit, now)
local boost = tonumber(redis.call('HGET', P..'meta', 'boost') or '0')
local function best()  -- the better of the best judged host and the best new one (boosted)
  local known, known_score = first('eligible', '-inf')
  local new, new_score = nil, nil
  if exploring then new, new_score = first('eligible_new', '-inf') end
  if not known and not new then return nil end
  if not new or (known and known_score >= new_score + boost) then
    redis.call('ZREM', P..'eligible', known)
    return known
  end
  redis.call('ZREM', P..'eligible_new', new)
  return new
end
local function others()  -- hosts not dormant in their delay, or in flight (`live`: counted by take)
  if elsewhere or redis.call('ZCARD', P..'waiting') > 0 then return true end
  return tonumber(redis.call('GET', P..'live') or '0') > 0
end
local others_left = nil  -- (asked once per claim)
local function top(name, floor)
  local h = first(name, floor)
  if h then redis.call('ZREM', P..name, h) end
  return h
end
local function filler()  -- when best() found none: a new host past the explore share, or a dormant one
  if others_left == nil then others_left = others() end
  if others_left then  -- idle capacity only (as HostFrontier.next in one process)
    if redis.call('HLEN', P..'busy') >= fill_hosts then return nil end
  end
  local how = others_left and 'filled_idle_capacity' or 'nothing_else_left'
  local h = not exploring and top('eligible_new', '-inf')
  if h then
    redis.call('HINCRBY', P..'counters', 'new_host/'..how, 1)
    return h
  end
  h = top('dormant', others_left and fill_floor or '-inf')
  if h then redis.call('HINCRBY', P..'counters', 'dormant/'..how, 1) end
  return h
end
local out = {}
local function take(h, urgent)
  local queued = redis.call('LRANGE', P..'q:'..h, 0, window - 1)
  if #queued == 0 then return end
  local id = tostring(redis.call('INCR', P..'lease_seq'))
  redis.call('ZADD', P..'leases', now + lease_ms, id)
  local lease = {h = h, w = worker}
  if urgent then
    lease.u = 1  -- paid for by the lease that expired
  else
    redis.call('HINCRBY', P..'counters', 'spent', 1)
    if spend_cap then spend_cap = spend_cap - 1 end
  end
  if not dormant(P, h) then  -- a host in flight that may have more to fetch: others() (O(1) per claim)
    lease.l = 1
    redis.call('INCR', P..'live')
  end
  take_groups(P, h, lease)
  redis.call('HSET', P..'lease', id, cjson.encode(lease))
  redis.call('HSET', P..'busy', h, id)
  redis.call('HINCRBY', P..'counters', 'handed_out', 1)
  local unscored = redis.call('HGET', P..'unscored', h) or '0'  -- fetched, score not recorded yet
  out[#out + 1] = {id, h, redis.call('GET', P..'host:'..h) or '', urgent and '1' or '0', queued, unscored}
end
-- first what dead workers held (fetched again before anything new, whatever the budget)
for _, h in ipairs(redis.call('HKEYS', P..'urgent')) do
  if #out >= n then break end
  if not busy_group(P, h, group_limit) and redis.call('ZREM', eligible(P, h), h) == 1 then take(h, true) end
end
while #out < n do
  if budget > 0 and tonumber(redis.call('HGET', P..'counters', 'spent') or '0') >= budget then break end
  if spend_cap and spend_cap <= 0 and redis.call('HLEN', P..'urgent') == 0 then break end
  if max_unscored > 0 and redis.call('ZCARD', P..'leases') >= max_unscored then
    redis.call('HINCRBY', P..'counters', 'claim/waited_for_scores', 1)
    break
  end
  local h = best() or filler()
  if not h then break end
  local urgent = redis.call('HEXISTS', P..'urgent', h) == 1
  if spend_cap and spend_cap <= 0 and not urgent then  -- nothing left to pay with: back where it was
    park(P, h, now, 0)
    break
  end
  take(h, urgent)
end
return out
"""
)

# The worker's choice among the leased host's queued URLs: it leaves the queue and is the lease's URL.
# ARGV: lease id, payload. Returns 0 if the lease expired or the URL is gone (its host was blocked).
PICK = """
local P = KEYS[1]
local id, payload = ARGV[1], ARGV[2]
local raw = redis.call('HGET', P..'lease', id)
if not raw then return 0 end
local lease = cjson.decode(raw)
if redis.call('LREM', P..'q:'..lease.h, 1, payload) == 0 then return 0 end
if lease.u and redis.call('HINCRBY', P..'urgent', lease.h, -1) <= 0 then
  redis.call('HDEL', P..'urgent', lease.h)
end
lease.p = payload
redis.call('HSET', P..'lease', id, cjson.encode(lease))
return 1
"""

# The downloader is done with a lease: its host may be fetched again after `delay ms`, by any worker.
# ARGV: lease id, delay ms, fetched (1: reached the network, 0: never did, its budget is returned), hold
# (1: the policy wants the page's score before fetching more of the host: it stays busy until DONE).
# Returns 0 if the lease is gone, 2 if its budget was given back, else 1.
FETCH_ENDED = (
    _NOW
    + _PARK
    + GROUP_HELPERS
    + """
local P = KEYS[1]
local id, delay, fetched, hold = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1', ARGV[4] == '1'
local raw = redis.call('HGET', P..'lease', id)
if not raw then return 0 end
local lease = cjson.decode(raw)
if lease.e then return 1 end
lease.e = 1
release_groups(P, lease, now)
local h = lease.h
if fetched then  -- counted for its host until the lease is done: other workers see it as in flight
  lease.f = 1
  redis.call('HINCRBY', P..'unscored', h, 1)
end
redis.call('HSET', P..'lease', id, cjson.encode(lease))
local ready = math.max(tonumber(redis.call('HGET', P..'ready', h) or '0'), now + delay)
redis.call('HSET', P..'ready', h, ready)
if fetched then
  redis.call('HINCRBY', P..'counters', 'fetched', 1)
elseif not lease.u then
  redis.call('HINCRBY', P..'counters', 'spent', -1)
end
if not hold and unbusy(P, h, id, lease) then park(P, h, now, 0) end
return (fetched or lease.u) and 1 or 2
"""
)

# The page is recorded by its worker (or was a retry/redirect replaced by a new request): the lease ends.
# ARGV: lease id, worker, then pairs of (meta key, value) committed with it. Returns 0 if it had expired.
DONE = (
    _NOW
    + _PARK
    + GROUP_HELPERS
    + """
local P = KEYS[1]
local id, worker = ARGV[1], ARGV[2]
local i = 3
while i <= #ARGV do
  redis.call('HSET', P..'wmeta:'..worker, ARGV[i], ARGV[i + 1])
  i = i + 2
end
redis.call('ZREM', P..'leases', id)
local raw = redis.call('HGET', P..'lease', id)
if not raw then return 0 end
local lease = cjson.decode(raw)
local h = lease.h
release_groups(P, lease, now)  -- (FETCH_ENDED did, unless it never came)
if lease.f then unscore(P, h) end
if unbusy(P, h, id, lease) then park(P, h, now, 0) end  -- held for its score (FETCH_ENDED's hold)
return redis.call('HDEL', P..'lease', id)
"""
)

# Leases whose worker stopped renewing them go back to the front of their host's queue (counted). Returns
# how many expired, and how many of those gave their budget back (their URL was never picked).
RECLAIM = (
    _NOW
    + _PARK
    + GROUP_HELPERS
    + """
local P = KEYS[1]
local expired = redis.call('ZRANGEBYSCORE', P..'leases', '-inf', now, 'LIMIT', 0, 1000)
local refunded = 0
for _, id in ipairs(expired) do
  local raw = redis.call('HGET', P..'lease', id)
  redis.call('ZREM', P..'leases', id)
  redis.call('HDEL', P..'lease', id)
  if raw then
    local lease = cjson.decode(raw)
    local h = lease.h
    release_groups(P, lease, now)  -- (none left if its fetch had ended)
    if lease.f then unscore(P, h) end
    redis.call('HINCRBY', P..'counters', 'lease_expired', 1)
    if lease.e then redis.call('HINCRBY', P..'counters', 'lease_expired_after_fetch', 1) end
    if lease.p and redis.call('SISMEMBER', P..'blocked', h) == 0 then
      redis.call('LPUSH', P..'q:'..h, lease.p)  -- first in its host's line, and paid for: see CLAIM
      redis.call('HINCRBY', P..'urgent', h, 1)
    elseif not lease.u then
      redis.call('HINCRBY', P..'counters', 'spent', -1)
      refunded = refunded + 1
    end
    unbusy(P, h, id, lease)
    park(P, h, now, 0)
  end
end
return {#expired, refunded}
"""
)

# A live worker keeps its leases: ARGV lease ms, then lease ids. Returns how many were still held.
RENEW = (
    _NOW
    + """
local P = KEYS[1]
local held = 0
for i = 2, #ARGV do
  held = held + redis.call('ZADD', P..'leases', 'XX', 'CH', now + tonumber(ARGV[1]), ARGV[i])
end
return held
"""
)
