"""Lua for the message log (Redis Streams, one consumer group per queue) and events.

Conventions (common keys, ``ARGV[1]`` = team, status-first replies) are those of
``scripts.PRELUDE``, which is prepended to each body here too.

A delivered, unacked message sits in the group's pending list (which counts its
deliveries) and in a sorted set scored by the instant it becomes visible again:
the *delivering* call's visibility timeout, so a caller with a short timeout can
never take a message another consumer holds with a long one.
"""

from __future__ import annotations

GROUP = "tenure"
"""The consumer group every queue stream carries."""

# KEYS[6] queue stream
# ARGV: team, payload json, epoch ('' = none), event json without "id"
SEND = f"""
if redis.call('EXISTS', KEYS[6]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[6], '{GROUP}', '0', 'MKSTREAM')
end
local seq = redis.call('INCR', SEQ)
local id = int(seq) .. '-0'
redis.call('XADD', KEYS[6], id, 'p', ARGV[2], 's', int(NOW))
local epoch = nil
if ARGV[3] ~= '' then epoch = tonumber(ARGV[3]) end
emit('message.sent', epoch, '{{"id":"' .. id .. '",' .. string.sub(ARGV[4], 2), seq)
return {{'ok', id}}
"""

RECEIVE_SCAN = 1000
"""At most this many expired deliveries are handled per receive (FIFO among them)."""

# KEYS[6] queue stream, KEYS[7] visibility zset (id -> visible again at), KEYS[8] dead stream
# ARGV: team, queue, consumer, visibility_us, max_messages, max_deliveries
RECEIVE = f"""
local SCAN = {RECEIVE_SCAN}
local Q, VIS, DEAD = KEYS[6], KEYS[7], KEYS[8]
local queue, consumer = ARGV[2], ARGV[3]
local vt, want, max_deliveries = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local out = {{'ok'}}
local got = 0
if want <= 0 or redis.call('EXISTS', Q) == 0 then return out end
local function fields_of(flat)
  local f = {{}}
  for i = 1, #flat, 2 do f[flat[i]] = flat[i + 1] end
  return f
end
local function deliver(id, f, count)
  redis.call('ZADD', VIS, int(NOW + vt), id)
  out[#out + 1] = id
  out[#out + 1] = f['p']
  out[#out + 1] = count
  out[#out + 1] = tonumber(f['s'])
  got = got + 1
end
local function give_up(id, f, count)
  redis.call('XACK', Q, '{GROUP}', id)
  redis.call('XDEL', Q, id)
  redis.call('ZREM', VIS, id)
  local seq = redis.call('INCR', SEQ)
  redis.call('XADD', DEAD, int(seq) .. '-0', 'id', id, 'q', queue, 'p', f['p'] or 'null',
    's', f['s'] or '0', 'n', int(count))
  local data = cjson.encode({{id = id, queue = queue, deliveries = count, consumer = consumer}})
  emit('message.dead_lettered', nil, data, seq)
end
-- 1. unacked deliveries whose visibility passed, oldest first: redeliver or give up.
-- Every one of them is older than any never-delivered message (the group's cursor
-- only moves forward), so handling them first keeps the whole batch FIFO.
local due = redis.call('ZRANGEBYSCORE', VIS, '-inf', int(NOW), 'LIMIT', 0, SCAN)
local order = {{}}
for _, id in ipairs(due) do
  local ms, n = string.match(id, '^(%d+)-(%d+)$')
  order[id] = {{tonumber(ms), tonumber(n)}}
end
table.sort(due, function(a, b)
  local x, y = order[a], order[b]
  return x[1] < y[1] or (x[1] == y[1] and x[2] < y[2])
end)
for _, id in ipairs(due) do
  if got >= want then break end
  local pending = redis.call('XPENDING', Q, '{GROUP}', id, id, 1)[1]
  local entry = redis.call('XRANGE', Q, id, id)[1]
  if not pending or not entry then
    redis.call('ZREM', VIS, id)
    if pending then redis.call('XACK', Q, '{GROUP}', id) end
  elseif tonumber(pending[4]) >= max_deliveries then
    give_up(id, fields_of(entry[2]), tonumber(pending[4]))
  else
    redis.call('XCLAIM', Q, '{GROUP}', consumer, 0, id)
    deliver(id, fields_of(entry[2]), tonumber(pending[4]) + 1)
  end
end
-- 2. messages never delivered, oldest first
while got < want do
  local read = redis.call('XREADGROUP', 'GROUP', '{GROUP}', consumer, 'COUNT', want - got,
    'STREAMS', Q, '>')
  if not read or #read[1][2] == 0 then break end
  for _, entry in ipairs(read[1][2]) do
    local f = fields_of(entry[2])
    if max_deliveries <= 0 then give_up(entry[1], f, 0) else deliver(entry[1], f, 1) end
  end
end
return out
"""

# KEYS[6] queue stream, KEYS[7] visibility zset; ARGV: team, message id
ACK = f"""
local gone = redis.pcall('XDEL', KEYS[6], ARGV[2])
if type(gone) ~= 'number' or gone == 0 then return {{'no'}} end
redis.pcall('XACK', KEYS[6], '{GROUP}', ARGV[2])
redis.call('ZREM', KEYS[7], ARGV[2])
return {{'ok'}}
"""

# ARGV: team, kind, epoch ('' = none), data json
APPEND_EVENT = """
local epoch = nil
if ARGV[3] ~= '' then epoch = tonumber(ARGV[3]) end
return {'ok', emit(ARGV[2], epoch, ARGV[4])}
"""

# KEYS[6] an event stream (global or one team's); ARGV: team (unused), first id, count.
# One JSON document ([[id, field, value, ...], ...]) so the client decodes it in C.
EVENTS = """
local rows = {}
for i, entry in ipairs(redis.call('XRANGE', KEYS[6], ARGV[2], '+', 'COUNT', ARGV[3])) do
  local row = {entry[1]}
  for j, value in ipairs(entry[2]) do row[j + 1] = value end
  rows[i] = row
end
if #rows == 0 then return {'ok', '[]'} end
return {'ok', cjson.encode(rows)}
"""
