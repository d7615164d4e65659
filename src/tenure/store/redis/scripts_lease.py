"""Lua for the leadership lease: claim, seize, prove, renew, release, read.

Conventions (common keys, ``ARGV[1]`` = team, status-first replies) are those of
``scripts.PRELUDE``, which is prepended to each body here too. The lease lives in
the team hash: ``holder``, ``lease_epoch``, ``expires`` and ``claimed`` (server
microseconds), ``ttl`` (as given), ``proof`` (absent until proved) and ``token``:
the SHA-1 (``redis.sha1hex``, as ``store.base.token_hash``) of the holder's token.
The token itself comes in as an argument and is compared here, on the server, so
reading the stored hash gives nobody a way to use the lease. A lease without a
``token`` field (claimed before leases had tokens) matches no token at all: nobody
can renew, prove or release it, and it lapses by its TTL.
"""

from __future__ import annotations

# KEYS[6] member expiry zset, KEYS[7] member highest-epoch hash
# grant's arguments: holder, ttl_us, ttl (as given), at_least, event json, max jump,
# max epoch, token. ``at_least`` more than max jump above the counter is refused
# before anything is written; a member's reported epoch lifts the claim only up to
# max jump above the counter and at_least (as ``store.base.next_epoch`` does); past
# max epoch the space is used up. The new lease carries no proof.
_GRANT = """
local function grant(holder, ttl, ttl_text, at_least, event, jump, limit, token)
  local counter = tonumber(redis.call('HGET', TEAM, 'epoch') or '0')
  if at_least > counter + jump then return {'jump', counter} end
  local base = math.max(counter, at_least)
  local top = base
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '(' .. int(NOW), '+inf')) do
    local reported = tonumber(redis.call('HGET', KEYS[7], id) or '0')
    if reported <= base + jump then top = math.max(top, reported) end
  end
  local epoch = top + 1
  if epoch > limit then return {'exhausted'} end
  local expires = NOW + ttl
  redis.call('HSET', TEAM, 'epoch', int(epoch), 'holder', holder, 'lease_epoch', int(epoch),
    'expires', int(expires), 'ttl', ttl_text, 'claimed', int(NOW),
    'token', redis.sha1hex(token))
  redis.call('HDEL', TEAM, 'proof')
  emit('lease.claimed', epoch, event)
  return {'ok', epoch, expires, NOW}
end
"""

# the stored token hash matches the token presented (never when none is stored)
_MATCHES = """
local function matches(stored, token)
  return stored and token ~= '' and stored == redis.sha1hex(token)
end
"""

# ARGV: team, holder, ttl_us, ttl (as given), at_least, event json, max jump, max epoch,
# token
CLAIM_LEASE = (
    _GRANT
    + """
local cur = redis.call('HMGET', TEAM, 'holder', 'lease_epoch', 'expires')
if cur[1] and tonumber(cur[3]) > NOW then return {'held', cur[1], cur[2]} end
return grant(ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]), ARGV[6],
  tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9])
"""
)

# ARGV: as CLAIM_LEASE, then the refused lease's holder, epoch and proof ('' = none)
SEIZE_LEASE = (
    _GRANT
    + """
local cur = redis.call('HMGET', TEAM, 'holder', 'lease_epoch', 'proof')
if not cur[1] or cur[1] ~= ARGV[10] or tonumber(cur[2]) ~= tonumber(ARGV[11])
    or (cur[3] or '') ~= ARGV[12] then
  return {'changed'}
end
return grant(ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]), ARGV[6],
  tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9])
"""
)

# ARGV: team, holder, epoch, proof, event json, token
PROVE_LEASE = (
    _MATCHES
    + """
local cur = redis.call('HMGET', TEAM, 'holder', 'lease_epoch', 'expires', 'ttl', 'claimed',
  'token')
if cur[1] ~= ARGV[2] or tonumber(cur[2]) ~= tonumber(ARGV[3])
    or not (tonumber(cur[3]) > NOW) or not matches(cur[6], ARGV[6]) then
  return {'lost'}
end
redis.call('HSET', TEAM, 'proof', ARGV[4])
emit('lease.proved', tonumber(ARGV[3]), ARGV[5])
return {'ok', tonumber(cur[3]), cur[4], tonumber(cur[5] or '0')}
"""
)

# ARGV: team, holder, epoch, ttl_us, ttl (as given), token
RENEW_LEASE = (
    _MATCHES
    + """
local cur = redis.call('HMGET', TEAM, 'holder', 'lease_epoch', 'expires', 'claimed', 'proof',
  'token')
if cur[1] ~= ARGV[2] or tonumber(cur[2]) ~= tonumber(ARGV[3])
    or not (tonumber(cur[3]) > NOW) or not matches(cur[6], ARGV[6]) then
  return {'lost'}
end
local expires = NOW + tonumber(ARGV[4])
redis.call('HSET', TEAM, 'expires', int(expires), 'ttl', ARGV[5])
return {'ok', expires, tonumber(cur[4] or '0'), cur[5] or ''}
"""
)

# ARGV: team, holder, epoch, event json, token
RELEASE_LEASE = (
    _MATCHES
    + """
local cur = redis.call('HMGET', TEAM, 'holder', 'lease_epoch', 'token')
if cur[1] ~= ARGV[2] or tonumber(cur[2]) ~= tonumber(ARGV[3])
    or not matches(cur[3], ARGV[5]) then
  return {'no'}
end
redis.call('HDEL', TEAM, 'holder', 'lease_epoch', 'expires', 'proof', 'token')
emit('lease.released', tonumber(ARGV[3]), ARGV[4])
return {'ok'}
"""
)

CURRENT_LEASE = """
local cur = redis.call('HMGET', TEAM, 'holder', 'lease_epoch', 'expires', 'ttl', 'claimed',
  'proof')
if cur[1] and tonumber(cur[3]) > NOW then
  return {'ok', cur[1], tonumber(cur[2]), tonumber(cur[3]), cur[4], tonumber(cur[5] or '0'),
    cur[6] or ''}
end
return {'none'}
"""
