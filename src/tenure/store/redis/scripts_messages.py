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
# ARGV: team, count n, then for each message: payload json, epoch ('' = none),
# event json without "id". One INCRBY numbers them all: the store-wide seq of each
# one's event is also its id in the queue stream.
SEND_MANY = f"""
if redis.call('EXISTS', KEYS[6]) == 0 then
  redis.call('XGROUP', 'CREATE', KEYS[6], '{GROUP}', '0', 'MKSTREAM')
end
local n = tonumber(ARGV[2])
local seq = redis.call('INCRBY', SEQ, n) - n
local out = {{'ok'}}
for i = 1, n do
  seq = seq + 1
  local id = int(seq) .. '-0'
  redis.call('XADD', KEYS[6], id, 'p', ARGV[3 * i], 's', int(NOW))
  local epoch = nil
  if ARGV[3 * i + 1] ~= '' then epoch = tonumber(ARGV[3 * i + 1]) end
  emit('message.sent', epoch, '{{"id":"' .. id .. '",' .. string.sub(ARGV[3 * i + 2], 2), seq)
  out[#out + 1] = id
end
return out
"""

RECEIVE_SCAN = 1000
"""At most this many expired deliveries are handled per receive (FIFO among them)."""

# KEYS[6] queue stream, KEYS[7] visibility zset (id -> visible again at), KEYS[8] dead stream,
# KEYS[9] holders hash (id -> consumer "\n" incarnation, for deliveries to a live member),
# KEYS[10] member expiry zset, KEYS[11] member incarnation hash
# ARGV: team, queue, consumer, visibility_us, max_messages, max_deliveries, waits ('1':
# the caller will wait when nothing is delivered, so an empty reply says what to wait on)
# Reply: 'ok' and four values per delivery; or, empty and waited for, 'wait', the server
# time, the stream's last id ('0-0': none) and the next visibility deadline ('' none).
RECEIVE = f"""
local SCAN = {RECEIVE_SCAN}
local Q, VIS, DEAD, HOLD = KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local tie = tie_of(KEYS[10], KEYS[11], ARGV[3])
local queue, consumer = ARGV[2], ARGV[3]
local vt, want, max_deliveries = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local out = {{'ok'}}
local got = 0
if want <= 0 then return out end
if redis.call('EXISTS', Q) == 0 then
  if ARGV[7] == '1' then return {{'wait', NOW, '0-0', ''}} end
  return out
end
local function fields_of(flat)
  local f = {{}}
  for i = 1, #flat, 2 do f[flat[i]] = flat[i + 1] end
  return f
end
local function deliver(id, f, count)
  redis.call('ZADD', VIS, int(NOW + vt), id)
  if tie then redis.call('HSET', HOLD, id, consumer .. '\\n' .. tie) else redis.call('HDEL', HOLD, id) end
  out[#out + 1] = id
  out[#out + 1] = f['p'] or ''  -- an entry written around SEND: never a hole in the reply
  out[#out + 1] = count
  out[#out + 1] = tonumber(f['s']) or 0
  got = got + 1
end
local function give_up(id, f, count)
  redis.call('XACK', Q, '{GROUP}', id)
  redis.call('XDEL', Q, id)
  redis.call('ZREM', VIS, id)
  redis.call('HDEL', HOLD, id)
  local seq = redis.call('INCR', SEQ)
  redis.call('XADD', DEAD, int(seq) .. '-0', 'id', id, 'q', queue, 'p', f['p'] or 'null',
    's', f['s'] or '0', 'n', int(count))
  local data = cjson.encode({{id = id, queue = queue, deliveries = count, consumer = consumer}})
  emit('message.dead_lettered', nil, data, seq)
end
-- 1. unacked deliveries whose visibility passed, oldest first: redeliver or give up.
-- Every one of them is older than any never-delivered message (the group's cursor
-- only moves forward), so handling them first keeps the whole batch FIFO.
-- So are those held by a consumer whose incarnation is gone (died, left, replaced).
local due = redis.call('ZRANGEBYSCORE', VIS, '-inf', int(NOW), 'LIMIT', 0, SCAN)
local order = {{}}
for _, id in ipairs(due) do
  local ms, n = string.match(id, '^(%d+)-(%d+)$')
  order[id] = {{tonumber(ms), tonumber(n)}}
end
local held = redis.call('HGETALL', HOLD)
for i = 1, #held, 2 do
  local id = held[i]
  local who, was = string.match(held[i + 1], '^(.-)\\n(.*)$')
  if not order[id] and #due < SCAN and tie_of(KEYS[10], KEYS[11], who) ~= was then
    local ms, n = string.match(id, '^(%d+)-(%d+)$')
    order[id] = {{tonumber(ms), tonumber(n)}}
    due[#due + 1] = id
  end
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
    redis.call('HDEL', HOLD, id)
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
if got == 0 and ARGV[7] == '1' then
  local last = redis.call('XREVRANGE', Q, '+', '-', 'COUNT', 1)[1]
  local next_due = redis.call('ZRANGE', VIS, 0, 0, 'WITHSCORES')[2]
  return {{'wait', NOW, last and last[1] or '0-0', next_due or ''}}
end
return out
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
