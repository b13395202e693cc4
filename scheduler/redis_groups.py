"""Politeness groups across workers, in Redis: hosts on one IP address (shared hosting) or of one registered
domain share a group, and a group has one request in flight in the whole run (as scheduler/groups.py does in
one process). A group limits only once it has more than one host.

Keys under the run's prefix: `groups` (host -> JSON list of its groups), `gmembers` (group -> hosts in it),
`gbusy` (group -> requests in flight), `gwait:GROUP` (hosts passed over while the group was busy, by rank),
`gwaiting` (groups with hosts waiting). A lease remembers the groups it counts in (`g`), so each is released
once: when its fetch ends, or when the lease expires or is done before that.

A group that frees lets its best RELEASE_BATCH waiting hosts back in line, not all of them: a shared-hosting
address with a thousand hosts cost a thousand re-parks per fetch, and as many moves back on the next claim.
Hosts let in that leave without being taken (blocked, dropped) would leave the rest waiting on a free group,
so each claim also looks at GROUP_PROBES random groups with hosts waiting and lets in those with room.
"""

from __future__ import annotations

RELEASE_BATCH = 4  # waiting hosts a freed group lets back in line (the best ranked; some may be in a delay)
GROUP_PROBES = 2  # groups with hosts waiting that each claim looks at for room (see the module's docstring)

# Lua helpers for the scripts that hand out and release hosts (CLAIM, FETCH_ENDED, RECLAIM; after _PARK). A
# host passed over for a busy group leaves its eligible set for `gwait:GROUP` and is parked again when the
# group frees, so hosts of one busy group never crowd the ranked ones out of a claim's view.
GROUP_HELPERS = f"""
local RELEASE_BATCH, GROUP_PROBES = {RELEASE_BATCH}, {GROUP_PROBES}
"""
GROUP_HELPERS += """
local function groups_of(P, h)
  local raw = redis.call('HGET', P..'groups', h)
  if not raw then return {} end
  return cjson.decode(raw)
end
local function busy_group(P, h, limit)  -- a shared group of the host at its limit, or nil
  if limit <= 0 then return nil end
  for _, g in ipairs(groups_of(P, h)) do
    local members = tonumber(redis.call('HGET', P..'gmembers', g) or '0')
    if members > 1 and tonumber(redis.call('HGET', P..'gbusy', g) or '0') >= limit then return g end
  end
  return nil
end
local function take_groups(P, h, lease)
  lease.g = groups_of(P, h)
  for _, g in ipairs(lease.g) do redis.call('HINCRBY', P..'gbusy', g, 1) end
end
local function wait_for_group(P, g, h, rank)  -- passed over while the group is at its limit
  redis.call('ZADD', P..'gwait:'..g, rank, h)
  redis.call('SADD', P..'gwaiting', g)
end
local function let_in(P, g, now)  -- the group has room: its best waiting hosts back in line
  local back = redis.call('ZPOPMAX', P..'gwait:'..g, RELEASE_BATCH)
  for i = 1, #back, 2 do park(P, back[i], now, 0) end
  if redis.call('EXISTS', P..'gwait:'..g) == 0 then redis.call('SREM', P..'gwaiting', g) end
end
local function let_in_stranded(P, limit, now)  -- groups with room whose let-in hosts left untaken
  if limit <= 0 then return end
  for _, g in ipairs(redis.call('SRANDMEMBER', P..'gwaiting', GROUP_PROBES)) do
    if tonumber(redis.call('HGET', P..'gbusy', g) or '0') < limit then let_in(P, g, now) end
  end
end
local function release_groups(P, lease, now)  -- its request is no longer in flight
  for _, g in ipairs(lease.g or {}) do
    if redis.call('HINCRBY', P..'gbusy', g, -1) <= 0 then redis.call('HDEL', P..'gbusy', g) end
    let_in(P, g, now)
  end
  lease.g = nil
end
"""

# A worker learnt that a host belongs to a group (its domain when first queued, its address when resolved).
# A request of the host in flight now counts there too. ARGV: host, group. Returns 1 if it is new.
JOIN = """
local P = KEYS[1]
local h, group = ARGV[1], ARGV[2]
local raw = redis.call('HGET', P..'groups', h)
local groups = raw and cjson.decode(raw) or {}
for _, g in ipairs(groups) do
  if g == group then return 0 end
end
groups[#groups + 1] = group
redis.call('HSET', P..'groups', h, cjson.encode(groups))
redis.call('HINCRBY', P..'gmembers', group, 1)
local id = redis.call('HGET', P..'busy', h)
local lease_raw = id and redis.call('HGET', P..'lease', id)
if lease_raw then
  local lease = cjson.decode(lease_raw)
  if not lease.e then
    lease.g = lease.g or {}
    lease.g[#lease.g + 1] = group
    redis.call('HINCRBY', P..'gbusy', group, 1)
    redis.call('HSET', P..'lease', id, cjson.encode(lease))
  end
end
return 1
"""
