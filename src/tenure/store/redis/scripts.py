"""The Lua scripts that make every Redis operation atomic (one EVALSHA each).

Every script receives the same five leading keys (see ``keys.common``) and the
team path as ``ARGV[1]``; the shared prelude defines ``emit``, which appends an
event to the team's stream under the store-wide seq (one ``INCR``, or one
``INCRBY`` for a script that emits many), and ``fence``. A script that judges or
records a time reads the *server* clock once (``TIME``, microseconds) first.

Why the server's clock and not a member's cached offset: leases, member liveness,
visibility timeouts and effect claims are all compared against it, and they are
only exclusive if every member judges them by the same clock. A member's estimate
(its own clock plus an offset sampled a while ago) drifts and is off by up to half
a round trip even when fresh, so a leader could renew a lease the server already
let lapse and another had claimed. Reading ``TIME`` inside a script costs no round
trip (about a microsecond); what cost round trips was ``now()`` called apart from
the scripts, which is the callers' business.

Scripts answer with an array whose first element is a status word (``ok`` or a
refusal such as ``stale``); the Python side turns refusals into ``tenure``
errors. All checks run before the first write, so a refused call changes
nothing (Redis does not roll a script back).

Numbers that reach Redis are formatted with ``int()`` below, never
``tostring`` (which would print microsecond timestamps in exponent form).
"""

from __future__ import annotations

from tenure.store.records import ALLOWED_TRANSITIONS
from tenure.store.redis.scripts_lease import (
    CLAIM_LEASE,
    CURRENT_LEASE,
    PROVE_LEASE,
    RELEASE_LEASE,
    RENEW_LEASE,
    SEIZE_LEASE,
)
from tenure.store.redis.scripts_messages import APPEND_EVENT, EVENTS, RECEIVE, SEND_MANY
from tenure.store.redis.scripts_writes import BEGIN_ATTEMPT, COMMIT


def _allowed_table() -> str:
    rows = []
    for state, followers in sorted(ALLOWED_TRANSITIONS.items()):
        inner = ", ".join(f'["{to}"] = true' for to in sorted(followers))
        rows.append(f'["{state}"] = {{{inner}}}')
    return "local ALLOWED = {" + ", ".join(rows) + "}\n"


PRELUDE = """
local SEQ, TEAMS, TEAM_EVENTS, TEAM = KEYS[1], KEYS[3], KEYS[4], KEYS[5]
local team = ARGV[1]
local NOW = nil
local function int(n) return string.format('%d', n) end
-- one stream entry per event, in the team's stream; the store-wide seq is its id.
-- NOMKSTREAM answers nil only on the team's first event: the team is listed then.
local function emit(kind, epoch, data, seq)
  seq = seq or redis.call('INCR', SEQ)
  local id = int(seq) .. '-0'
  local fields = {'team', team, 'kind', kind, 'at', int(NOW), 'data', data}
  if epoch then
    fields[9] = 'epoch'
    fields[10] = int(epoch)
  end
  if not redis.call('XADD', TEAM_EVENTS, 'NOMKSTREAM', id, unpack(fields)) then
    redis.call('SADD', TEAMS, team)
    redis.call('XADD', TEAM_EVENTS, id, unpack(fields))
  end
  return seq
end
-- the incarnation a hold by `who` is tied to (false: `who` is no live member)
local function tie_of(exp, inc, who)
  local expires = redis.call('ZSCORE', exp, who)
  if not expires or tonumber(expires) <= NOW then return false end
  return redis.call('HGET', inc, who) or ''
end
local function fence(epoch)
  local current = tonumber(redis.call('HGET', TEAM, 'epoch') or '0')
  if epoch < current then return current end
  return nil
end
"""

CLOCK = """
local clock = redis.call('TIME')
NOW = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
"""
"""Read by a script that needs the time (``NOW``: to judge, or to record): one that
only reads the register or the log, or acks, leaves the clock alone."""


def script_body(body: str) -> str:
    """``body`` with the prelude, and the server clock read first if it uses it."""
    timed = any(word in body for word in ("NOW", "emit(", "tie_of("))
    return PRELUDE + (CLOCK if timed else "") + body


# --- membership ------------------------------------------------------------------------

# KEYS[6] expiry zset, KEYS[7] highest-epoch hash, KEYS[8] info hash (json),
# KEYS[9] incarnation hash, KEYS[10] last-beat hash, KEYS[11] free-slots hash
# ARGV: team, member, ttl_us, highest_epoch, info json, event json, incarnation, free slots
JOIN = """
local member = ARGV[2]
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', int(NOW), 'LIMIT', 0, 100)) do
  redis.call('ZREM', KEYS[6], gone)
  for k = 7, 11 do redis.call('HDEL', KEYS[k], gone) end
end
local live = tie_of(KEYS[6], KEYS[9], member)
if live and live ~= ARGV[7] then
  return {'taken', redis.call('HGET', KEYS[10], member) or '0', redis.call('ZSCORE', KEYS[6], member)}
end
local info = '{"joined":' .. int(NOW) .. ',' .. string.sub(ARGV[5], 2)
redis.call('HSET', KEYS[8], member, info)
local high = math.max(tonumber(redis.call('HGET', KEYS[7], member) or '0'), tonumber(ARGV[4]))
redis.call('HSET', KEYS[7], member, high)
redis.call('HSET', KEYS[9], member, ARGV[7])
redis.call('HSET', KEYS[10], member, int(NOW))
redis.call('HSET', KEYS[11], member, ARGV[8])
redis.call('ZADD', KEYS[6], int(NOW + tonumber(ARGV[3])), member)
emit('member.joined', nil, ARGV[6])
return {'ok', NOW, high}
"""

# ARGV: team, member, ttl_us, highest_epoch, incarnation, free slots ('' keeps them)
HEARTBEAT = """
local member = ARGV[2]
local live = tie_of(KEYS[6], KEYS[9], member)
if not live then return {'missing'} end
if live ~= ARGV[5] then
  return {'taken', redis.call('HGET', KEYS[10], member) or '0', redis.call('ZSCORE', KEYS[6], member)}
end
local seen = math.max(tonumber(redis.call('HGET', KEYS[7], member) or '0'), tonumber(ARGV[4]))
local expires = NOW + tonumber(ARGV[3])
redis.call('HSET', KEYS[7], member, int(seen))
redis.call('HSET', KEYS[10], member, int(NOW))
if ARGV[6] ~= '' then redis.call('HSET', KEYS[11], member, ARGV[6]) end
redis.call('ZADD', KEYS[6], int(expires), member)
local info = redis.call('HGET', KEYS[8], member) or '{}'
return {'ok', info, seen, expires, live, NOW, redis.call('HGET', KEYS[11], member) or ''}
"""

# ARGV: team, member, event json
LEAVE = """
local member = ARGV[2]
if redis.call('ZREM', KEYS[6], member) == 0 then return {'no'} end
for k = 7, 11 do redis.call('HDEL', KEYS[k], member) end
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
  out[#out + 1] = redis.call('HGET', KEYS[9], member) or ''
  out[#out + 1] = redis.call('HGET', KEYS[10], member) or '0'
  out[#out + 1] = redis.call('HGET', KEYS[11], member) or ''
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

# KEYS[6] task list, KEYS[7..] one task hash each
# ARGV: team, epoch, then task_id and spec json for each task, in the order of KEYS[7..]
# One script is one atomic step: every free id is registered, or (refused) none.
CREATE_TASKS = """
local epoch = tonumber(ARGV[2])
local current = fence(epoch)
if current then return {'stale', current} end
local out = {'ok', NOW}
local free = {}
for i = 7, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 0 then free[#free + 1] = i end
end
if #free == 0 then return out end
local seq = redis.call('INCRBY', SEQ, #free) - #free  -- one counter step for all events
for _, i in ipairs(free) do
  local id, spec = ARGV[2 * (i - 7) + 3], ARGV[2 * (i - 7) + 4]
  redis.call('HSET', KEYS[i], 'state', 'queued', 'version', '1', 'epoch', int(epoch),
    'attempt', '0', 'spec', spec, 'reason', '', 'data', '{}',
    'created', int(NOW), 'updated', int(NOW))
  redis.call('RPUSH', KEYS[6], id)
  seq = seq + 1
  emit('task.created', epoch, cjson.encode({task_id = id, state = 'queued'}), seq)
  out[#out + 1] = id
end
return out
"""

# KEYS[6] the team's task list
# ARGV: team, epoch, task key prefix
CLEAR_TASKS = """
local epoch = tonumber(ARGV[2])
local current = fence(epoch)
if current then return {'stale', current} end
local ids = redis.call('LRANGE', KEYS[6], 0, -1)
for _, id in ipairs(ids) do redis.call('DEL', ARGV[3] .. id) end
redis.call('DEL', KEYS[6])
emit('register.cleared', epoch, '{"count": ' .. int(#ids) .. '}')
return {'ok', #ids}
"""

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

# KEYS[6] effect hash, KEYS[7] member expiry zset, KEYS[8] member incarnation hash
# ARGV: team, key, epoch, holder, claim_us, event json
EFFECT_BEGIN = """
local epoch = tonumber(ARGV[3])
local current = fence(epoch)
if current then return {'stale', current} end
local cur = redis.call('HMGET', KEYS[6], 'status', 'holder', 'claim', 'result', 'tie')
if cur[1] == 'done' then return {'done', cur[4]} end
if cur[1] == 'running' and cur[2] ~= ARGV[4] and tonumber(cur[3]) > NOW
    and not (cur[5] and tie_of(KEYS[7], KEYS[8], cur[2]) ~= cur[5]) then
  return {'busy', cur[2]}
end
redis.call('HSET', KEYS[6], 'status', 'running', 'holder', ARGV[4],
  'claim', int(NOW + tonumber(ARGV[5])), 'epoch', int(epoch), 'updated', int(NOW))
redis.call('HDEL', KEYS[6], 'result', 'tie')
local tie = tie_of(KEYS[7], KEYS[8], ARGV[4])
if tie then redis.call('HSET', KEYS[6], 'tie', tie) end
emit('effect.claimed', epoch, ARGV[6])
return {'run'}
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
    "seize_lease": SEIZE_LEASE,
    "prove_lease": PROVE_LEASE,
    "renew_lease": RENEW_LEASE,
    "release_lease": RELEASE_LEASE,
    "current_lease": CURRENT_LEASE,
    "join": JOIN,
    "heartbeat": HEARTBEAT,
    "leave": LEAVE,
    "members": MEMBERS,
    "create_task": CREATE_TASK,
    "create_tasks": CREATE_TASKS,
    "clear_tasks": CLEAR_TASKS,
    "tasks": TASKS,
    "effect_begin": EFFECT_BEGIN,
    "effect_abort": EFFECT_ABORT,
    "send_many": SEND_MANY,
    "receive": RECEIVE,
    "commit": _allowed_table() + COMMIT,
    "begin_attempt": BEGIN_ATTEMPT,
    "append_event": APPEND_EVENT,
    "events": EVENTS,
}
"""Name -> Lua body; each is registered once as ``script_body(body)``."""
