"""Lua for several writes in one script: ``commit`` and ``begin_attempt``.

Conventions (common keys, ``ARGV[1]`` = team, status-first replies) are those of
``scripts.PRELUDE``, which is prepended here too. ``commit`` also carries the single
writes of the register, the ledger and the queues (``transition``, ``effect_finish``,
``ack``): each is a commit of one write, so every write is written by one piece of
Lua, whether it comes alone or with others.
"""

from __future__ import annotations

from tenure.store.redis.scripts_messages import GROUP

# KEYS[6..] the keys the writes name (indexes into KEYS in each write)
# ARGV[2]: JSON, one object per write, in order:
#   move:   k (task hash), epoch, expect [states], to, version (-1: any), sets [field,
#           value, ...], drop [fields], event (json without "from")
#   expect: k (task hash), version (no write: the task must still be at it)
#   note:   kind, epoch (-1: none), data (json)
#   record: k (effect hash), holder, result (json), event (json)
#   ack:    k (stream; the visibility zset and holders hash follow it), id
#   send:   k (stream), payload (json text), epoch (-1: none), event (json without "id")
# Every check first (fence and compare-and-set of each move against what the moves
# before it leave; each expect against the same); a refusal answers {'stale', i, current}, {'missing', i} or
# {'conflict', i, state, version} with nothing written. Else {'ok', answer per write}.
COMMIT = f"""
local ops = cjson.decode(ARGV[2])
local epoch_now = tonumber(redis.call('HGET', TEAM, 'epoch') or '0')
local seen = {{}}
for i, op in ipairs(ops) do
  if op.op == 'move' then
    if op.epoch < epoch_now then return {{'stale', i, epoch_now}} end
    local key = KEYS[op.k]
    local cur = seen[key]
    if not cur then
      if redis.call('EXISTS', key) == 0 then return {{'missing', i}} end
      local found = redis.call('HMGET', key, 'state', 'version')
      cur = {{found[1], tonumber(found[2])}}
    end
    local expected = false
    for _, state in ipairs(op.expect) do
      if state == cur[1] then expected = true end
    end
    if not expected or (op.version >= 0 and op.version ~= cur[2])
        or not (ALLOWED[cur[1]] or {{}})[op.to] then
      return {{'conflict', i, cur[1], cur[2]}}
    end
    op.from = cur[1]
    seen[key] = {{op.to, cur[2] + 1}}
  elseif op.op == 'expect' then
    local key = KEYS[op.k]
    local cur = seen[key]
    if not cur then
      if redis.call('EXISTS', key) == 0 then return {{'missing', i}} end
      local found = redis.call('HMGET', key, 'state', 'version')
      cur = {{found[1], tonumber(found[2])}}
      seen[key] = cur
    end
    if op.version ~= cur[2] then return {{'conflict', i, cur[1], cur[2]}} end
  end
end
local out = {{'ok'}}
for _, op in ipairs(ops) do
  if op.op == 'move' then
    local key = KEYS[op.k]
    local version = tonumber(redis.call('HGET', key, 'version'))
    local sets = {{'state', op.to, 'version', int(version + 1), 'epoch', int(op.epoch),
      'updated', int(NOW)}}
    for _, value in ipairs(op.sets) do sets[#sets + 1] = value end
    redis.call('HSET', key, unpack(sets))
    for _, name in ipairs(op.drop) do redis.call('HDEL', key, name) end
    emit('task.transition', op.epoch, '{{"from":' .. cjson.encode(op.from) .. ',"version":'
      .. int(version + 1) .. ',' .. string.sub(op.event, 2))
    out[#out + 1] = redis.call('HGETALL', key)
  elseif op.op == 'expect' then
    out[#out + 1] = 0
  elseif op.op == 'note' then
    local epoch = nil
    if op.epoch >= 0 then epoch = op.epoch end
    out[#out + 1] = emit(op.kind, epoch, op.data)
  elseif op.op == 'record' then
    local key = KEYS[op.k]
    local cur = redis.call('HMGET', key, 'status', 'epoch', 'result')
    if cur[1] == 'done' then
      out[#out + 1] = cur[3]
    else
      local epoch = tonumber(cur[2] or '0')
      redis.call('HSET', key, 'status', 'done', 'holder', op.holder, 'epoch', int(epoch),
        'result', op.result, 'updated', int(NOW))
      redis.call('HDEL', key, 'claim', 'tie')
      emit('effect.done', epoch, op.event)
      out[#out + 1] = op.result
    end
  elseif op.op == 'ack' then
    local gone = redis.pcall('XDEL', KEYS[op.k], op.id)
    if type(gone) ~= 'number' or gone == 0 then
      out[#out + 1] = 0
    else
      redis.pcall('XACK', KEYS[op.k], '{GROUP}', op.id)
      redis.call('ZREM', KEYS[op.k + 1], op.id)
      redis.call('HDEL', KEYS[op.k + 2], op.id)
      out[#out + 1] = 1
    end
  elseif op.op == 'send' then
    local stream = KEYS[op.k]
    if redis.call('EXISTS', stream) == 0 then
      redis.call('XGROUP', 'CREATE', stream, '{GROUP}', '0', 'MKSTREAM')
    end
    local seq = redis.call('INCR', SEQ)
    local id = int(seq) .. '-0'
    redis.call('XADD', stream, id, 'p', op.payload, 's', int(NOW))
    local epoch = nil
    if op.epoch >= 0 then epoch = op.epoch end
    emit('message.sent', epoch, '{{"id":"' .. id .. '",' .. string.sub(op.event, 2), seq)
    out[#out + 1] = id
  end
end
return out
"""

# KEYS[6] effect hash, KEYS[7] task hash, KEYS[8] member expiry zset,
# KEYS[9] member incarnation hash
# ARGV: team, key, epoch, holder, claim_us, attempt, take ('1' or ''), data json ('' keeps
# it), the effect event json, the transition event json (without "from")
# The steps and checks of effect_lookup, get_task, effect_begin and transition, in order.
BEGIN_ATTEMPT = """
local holder, epoch = ARGV[4], tonumber(ARGV[3])
local fx = redis.call('HMGET', KEYS[6], 'status', 'holder', 'claim', 'result', 'tie')
if fx[1] == 'done' then return {'replayed', NOW, fx[4]} end
if redis.call('EXISTS', KEYS[7]) == 0 then return {'outdated', NOW} end
local cur = redis.call('HMGET', KEYS[7], 'state', 'version', 'attempt', 'assignee')
if (cur[1] ~= 'queued' and cur[1] ~= 'running') or tonumber(cur[3]) ~= tonumber(ARGV[6])
    or (ARGV[7] ~= '1' and cur[4] ~= holder) then
  return {'outdated', NOW, redis.call('HGETALL', KEYS[7])}
end
local current = fence(epoch)
if current then return {'fenced', NOW, current} end
if fx[1] == 'running' and fx[2] ~= holder and tonumber(fx[3]) > NOW
    and not (fx[5] and tie_of(KEYS[8], KEYS[9], fx[2]) ~= fx[5]) then
  return {'in_progress', NOW, fx[2]}
end
redis.call('HSET', KEYS[6], 'status', 'running', 'holder', holder,
  'claim', int(NOW + tonumber(ARGV[5])), 'epoch', int(epoch), 'updated', int(NOW))
redis.call('HDEL', KEYS[6], 'result', 'tie')
local tie = tie_of(KEYS[8], KEYS[9], holder)
if tie then redis.call('HSET', KEYS[6], 'tie', tie) end
emit('effect.claimed', epoch, ARGV[9])
local sets = {'state', 'running', 'version', int(tonumber(cur[2]) + 1), 'epoch', int(epoch),
  'updated', int(NOW)}
if ARGV[7] == '1' then
  sets[#sets + 1] = 'assignee'
  sets[#sets + 1] = holder
end
if ARGV[8] ~= '' then
  sets[#sets + 1] = 'data'
  sets[#sets + 1] = ARGV[8]
end
redis.call('HSET', KEYS[7], unpack(sets))
emit('task.transition', epoch, '{"from":' .. cjson.encode(cur[1]) .. ',"version":'
  .. int(tonumber(cur[2]) + 1) .. ',' .. string.sub(ARGV[10], 2))
return {'run', NOW, redis.call('HGETALL', KEYS[7])}
"""
