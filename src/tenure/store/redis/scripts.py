"""The Lua scripts that make every Redis operation atomic (one EVALSHA each).

Every script receives the same five leading keys (see ``keys.common``) and the
team path as ``ARGV[1]``; the shared prelude reads the *server* clock once
(``TIME``, microseconds) and defines ``emit``, which appends an event to the
global and the team stream under one store-wide ``INCR`` seq, and ``fence``.

Scripts answer with an array whose first element is a status word (``ok`` or a
refusal such as ``stale``); the Python side turns refusals into ``tenure``
errors. All checks run before the first write, so a refused call changes
nothing (Redis does not roll a script back).

Numbers that reach Redis are formatted with ``int()`` below, never
``tostring`` (which would print microsecond timestamps in exponent form).
"""

from __future__ import annotations

from tenure.store.records import ALLOWED_TRANSITIONS
from tenure.store.redis.scripts_messages import ACK, APPEND_EVENT, EVENTS, RECEIVE, SEND


def _allowed_table() -> str:
    rows = []
    for state, followers in sorted(ALLOWED_TRANSITIONS.items()):
        inner = ", ".join(f'["{to}"] = true' for to in sorted(followers))
        rows.append(f'["{state}"] = {{{inner}}}')
    return "local ALLOWED = {" + ", ".join(rows) + "}\n"


PRELUDE = """
local SEQ, EVENTS, TEAMS, TEAM_EVENTS, TEAM = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local team = ARGV[1]
local clock = redis.call('TIME')
local NOW = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local function int(n) return string.format('%d', n) end
local function emit(kind, epoch, data, seq)
  seq = seq or redis.call('INCR', SEQ)
  local id = int(seq) .. '-0'
  local fields = {'team', team, 'kind', kind, 'at', int(NOW), 'data', data}
  if epoch then
    fields[9] = 'epoch'
    fields[10] = int(epoch)
  end
  redis.call('XADD', EVENTS, id, unpack(fields))
  redis.call('XADD', TEAM_EVENTS, id, unpack(fields))
  redis.call('SADD', TEAMS, team)
  return seq
end
local function fence(epoch)
  local current = tonumber(redis.call('HGET', TEAM, 'epoch') or '0')
  if epoch < current then return current end
  return nil
end
"""

# --- lease ---------------------------------------------------------------------------

# KEYS[6] member expiry zset, KEYS[7] member highest-epoch hash
# ARGV: team, holder, ttl_us, ttl (as given), at_least, event json, max jump, max epoch
# A member's reported epoch lifts the claim only up to max jump above counter and
# at_least (as ``store.base.next_epoch`` does); past max epoch the space is used up.
CLAIM_LEASE = """
local holder, ttl, at_least = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[5])
local jump, limit = tonumber(ARGV[7]), tonumber(ARGV[8])
local cur = redis.call('HMGET', TEAM, 'epoch', 'holder', 'lease_epoch', 'expires')
if cur[2] and tonumber(cur[4]) > NOW then return {'held', cur[2], cur[3]} end
local base = math.max(tonumber(cur[1] or '0'), at_least)
local top = base
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '(' .. int(NOW), '+inf')) do
  local reported = tonumber(redis.call('HGET', KEYS[7], id) or '0')
  if reported <= base + jump then top = math.max(top, reported) end
end
local epoch = top + 1
if epoch > limit then return {'exhausted'} end
local expires = NOW + ttl
redis.call('HSET', TEAM, 'epoch', int(epoch), 'holder', holder, 'lease_epoch', int(epoch),
  'expires', int(expires), 'ttl', ARGV[4])
emit('lease.claimed', epoch, ARGV[6])
return {'ok', epoch, expires}
"""

# ARGV: team, holder, epoch, ttl_us, ttl (as given)
RENEW_LEASE = """
local cur = redis.call('HMGET', TEAM, 'holder', 'lease_epoch', 'expires')
if cur[1] ~= ARGV[2] or tonumber(cur[2]) ~= tonumber(ARGV[3])
    or not (tonumber(cur[3]) > NOW) then
  return {'lost'}
end
local expires = NOW + tonumber(ARGV[4])
redis.call('HSET', TEAM, 'expires', int(expires), 'ttl', ARGV[5])
return {'ok', expires}
"""

# ARGV: team, holder, epoch, event json
RELEASE_LEASE = """
local cur = redis.call('HMGET', TEAM, 'holder', 'lease_epoch')
if cur[1] ~= ARGV[2] or tonumber(cur[2]) ~= tonumber(ARGV[3]) then return {'no'} end
redis.call('HDEL', TEAM, 'holder', 'lease_epoch', 'expires')
emit('lease.released', tonumber(ARGV[3]), ARGV[4])
return {'ok'}
"""

CURRENT_LEASE = """
local cur = redis.call('HMGET', TEAM, 'holder', 'lease_epoch', 'expires', 'ttl')
if cur[1] and tonumber(cur[3]) > NOW then
  return {'ok', cur[1], tonumber(cur[2]), tonumber(cur[3]), cur[4]}
end
return {'none'}
"""

# --- membership ------------------------------------------------------------------------

# KEYS[6] expiry zset, KEYS[7] highest-epoch hash, KEYS[8] info hash (json)
# ARGV: team, member, ttl_us, highest_epoch, info json, event json
JOIN = """
local member = ARGV[2]
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', int(NOW), 'LIMIT', 0, 100)) do
  redis.call('ZREM', KEYS[6], gone)
  redis.call('HDEL', KEYS[7], gone)
  redis.call('HDEL', KEYS[8], gone)
end
local info = '{"joined":' .. int(NOW) .. ',' .. string.sub(ARGV[5], 2)
redis.call('HSET', KEYS[8], member, info)
local high = math.max(tonumber(redis.call('HGET', KEYS[7], member) or '0'), tonumber(ARGV[4]))
redis.call('HSET', KEYS[7], member, high)
redis.call('ZADD', KEYS[6], int(NOW + tonumber(ARGV[3])), member)
emit('member.joined', nil, ARGV[6])
return {'ok', NOW, high}
"""

# ARGV: team, member, ttl_us, highest_epoch
HEARTBEAT = """
local member = ARGV[2]
local expires = redis.call('ZSCORE', KEYS[6], member)
if not expires or tonumber(expires) <= NOW then return {'missing'} end
local seen = math.max(tonumber(redis.call('HGET', KEYS[7], member) or '0'), tonumber(ARGV[4]))
expires = NOW + tonumber(ARGV[3])
redis.call('HSET', KEYS[7], member, int(seen))
redis.call('ZADD', KEYS[6], int(expires), member)
return {'ok', redis.call('HGET', KEYS[8], member) or '{}', seen, expires}
"""

# ARGV: team, member, event json
LEAVE = """
local member = ARGV[2]
if redis.call('ZREM', KEYS[6], member) == 0 then return {'no'} end
redis.call('HDEL', KEYS[7], member)
redis.call('HDEL', KEYS[8], member)
emit('member.left', nil, ARGV[3])
return {'ok'}
"""

MEMBERS = """
local out = {'ok'}
local live = redis.call('ZRANGEBYSCORE', KEYS[6], '(' .. int(NOW), '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local member = live[i]
  out[#out + 1] = member
  out[#out + 1] = redis.call('HGET', KEYS[8], member) or '{}'
  out[#out + 1] = tonumber(redis.call('HGET', KEYS[7], member) or '0')
  out[#out + 1] = tonumber(live[i + 1])
end
return out
"""

# --- task register -----------------------------------------------------------------------

# KEYS[6] task hash, KEYS[7] order list
# ARGV: team, task_id, epoch, state, spec json, event json
CREATE_TASK = """
local epoch = tonumber(ARGV[3])
local current = fence(epoch)
if current then return {'stale', current} end
if redis.call('EXISTS', KEYS[6]) == 1 then return {'exists'} end
redis.call('HSET', KEYS[6], 'state', ARGV[4], 'version', '1', 'epoch', int(epoch),
  'attempt', '0', 'spec', ARGV[5], 'reason', '', 'data', '{}',
  'created', int(NOW), 'updated', int(NOW))
redis.call('RPUSH', KEYS[7], ARGV[2])
emit('task.created', epoch, ARGV[6])
return {'ok', NOW}
"""

# KEYS[6] task hash
# ARGV: team, task_id, epoch, expect (comma list), to, version ('' = any),
#       event json without "from", fields to delete (comma list), field, value, ...
TRANSITION = (
    _allowed_table()
    + """
local epoch, to = tonumber(ARGV[3]), ARGV[5]
local current = fence(epoch)
if current then return {'stale', current} end
if redis.call('EXISTS', KEYS[6]) == 0 then return {'missing'} end
local cur = redis.call('HMGET', KEYS[6], 'state', 'version')
local expect = {}
for s in string.gmatch(ARGV[4], '[^,]+') do expect[s] = true end
local allowed = ALLOWED[cur[1]] or {}
if not expect[cur[1]] or (ARGV[6] ~= '' and tonumber(ARGV[6]) ~= tonumber(cur[2]))
    or not allowed[to] then
  return {'conflict', redis.call('HGETALL', KEYS[6])}
end
local sets = {'state', to, 'version', int(tonumber(cur[2]) + 1), 'epoch', int(epoch),
  'updated', int(NOW)}
for i = 9, #ARGV do sets[#sets + 1] = ARGV[i] end
redis.call('HSET', KEYS[6], unpack(sets))
for field in string.gmatch(ARGV[8], '[^,]+') do redis.call('HDEL', KEYS[6], field) end
emit('task.transition', epoch, '{"from":' .. cjson.encode(cur[1]) .. ',' .. string.sub(ARGV[7], 2))
return {'ok', redis.call('HGETALL', KEYS[6])}
"""
)

# ARGV: team, task key prefix
TASK_FIELDS = (
    "state", "version", "epoch", "attempt", "assignee", "spec", "result", "reason", "data",
    "created", "updated",
)  # fmt: skip
"""The fields of a task hash, in the order ``TASKS`` lists them."""

# One JSON document for the whole register ([[id, *TASK_FIELDS], ...], false for a
# missing field): decoded in C instead of parsing thousands of RESP strings.
TASKS = f"""
local fields = {{{", ".join(f"'{name}'" for name in TASK_FIELDS)}}}
local rows = {{}}
for i, id in ipairs(redis.call('LRANGE', KEYS[6], 0, -1)) do
  local row = redis.call('HMGET', ARGV[2] .. id, unpack(fields))
  table.insert(row, 1, id)
  rows[i] = row
end
if #rows == 0 then return {{'ok', '[]'}} end
return {{'ok', cjson.encode(rows)}}
"""

# --- idempotency ledger ------------------------------------------------------------------

# KEYS[6] effect hash
# ARGV: team, key, epoch, holder, claim_us, event json
EFFECT_BEGIN = """
local epoch = tonumber(ARGV[3])
local current = fence(epoch)
if current then return {'stale', current} end
local cur = redis.call('HMGET', KEYS[6], 'status', 'holder', 'claim', 'result')
if cur[1] == 'done' then return {'done', cur[4]} end
if cur[1] == 'running' and cur[2] ~= ARGV[4] and tonumber(cur[3]) > NOW then
  return {'busy', cur[2]}
end
redis.call('HSET', KEYS[6], 'status', 'running', 'holder', ARGV[4],
  'claim', int(NOW + tonumber(ARGV[5])), 'epoch', int(epoch), 'updated', int(NOW))
redis.call('HDEL', KEYS[6], 'result')
emit('effect.claimed', epoch, ARGV[6])
return {'run'}
"""

# ARGV: team, key, holder, result json, event json
EFFECT_FINISH = """
local cur = redis.call('HMGET', KEYS[6], 'status', 'epoch', 'result')
if cur[1] == 'done' then return {'done', cur[3]} end
local epoch = tonumber(cur[2] or '0')
redis.call('HSET', KEYS[6], 'status', 'done', 'holder', ARGV[3], 'epoch', int(epoch),
  'result', ARGV[4], 'updated', int(NOW))
redis.call('HDEL', KEYS[6], 'claim')
emit('effect.done', epoch, ARGV[5])
return {'done', ARGV[4]}
"""

# ARGV: team, key, holder, event json
EFFECT_ABORT = """
local cur = redis.call('HMGET', KEYS[6], 'status', 'holder')
if cur[1] ~= 'running' or cur[2] ~= ARGV[3] then return {'no'} end
redis.call('DEL', KEYS[6])
emit('effect.aborted', nil, ARGV[4])
return {'ok'}
"""

SCRIPTS: dict[str, str] = {
    "claim_lease": CLAIM_LEASE,
    "renew_lease": RENEW_LEASE,
    "release_lease": RELEASE_LEASE,
    "current_lease": CURRENT_LEASE,
    "join": JOIN,
    "heartbeat": HEARTBEAT,
    "leave": LEAVE,
    "members": MEMBERS,
    "create_task": CREATE_TASK,
    "transition": TRANSITION,
    "tasks": TASKS,
    "effect_begin": EFFECT_BEGIN,
    "effect_finish": EFFECT_FINISH,
    "effect_abort": EFFECT_ABORT,
    "send": SEND,
    "receive": RECEIVE,
    "ack": ACK,
    "append_event": APPEND_EVENT,
    "events": EVENTS,
}
"""Name -> Lua body; each is registered once as ``PRELUDE + body``."""
