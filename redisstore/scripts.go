package redisstore

import "github.com/redis/go-redis/v9"

// Every Lua script of the store is in this file. Each one runs atomically
// on the server: it is what a transaction is to the SQL stores.
//
// Slots. Every script touches the keys of one queue only, which share a
// hash tag (the queue's name in braces), so on Redis Cluster each script
// runs on the node that holds that queue's slot; KEYS[1] of every queue
// script is the queue's prefix P (below), which routes it there and from
// which the script reads the queue's name (Q). A batch that spans queues
// is split by the store into one script per queue on a cluster; on one
// server, where every slot is local, an enqueue, a claim and a finish
// batch across queues stay one script (these scripts read each task's
// queue from their arguments, not from KEYS[1]). The namespace's own
// keys are each in a slot of their own and are written by the store
// outside the scripts, in an order that is safe without atomicity across
// slots (see each).
//
// Keys. ARGV[1] of every script is the store's namespace N. A queue Q's
// keys share the prefix N:{Q} (P below), whose hash tag is the queue:
//
//	P:t:ID     hash     a task (fields below)
//	P:a:ID     list     its attempts, oldest first (record below)
//	P:ph:H     zset     PENDING tasks of handler H, by due time (µs)
//	P:hp:H     hash     the pause of handler H (see scriptPauseHandler)
//	P:hps      set      the queue's paused handlers
//	P:inflight zset     IN_FLIGHT tasks, by lease expiry (µs)
//	P:done     zset     SUCCEEDED tasks, by finish time (µs)
//	P:ik:K     string   idempotency key K: the task's ID, or
//	                    "purged:ID:CREATED:PURGED" once it was purged
//	P:ikp      zset     purged keys K, by purge time (µs), for pruning
//	P:paused   string   present while the queue is paused
//	P:handlers set      handlers whose tasks have waited in the queue
//	P:audit    zset     the queue's audit entries (record below), by ID
//	P:dead, P:dh:H, P:de:E, P:df:F, P:dfs, P:dfk:F, P:dm  dead-letter
//	                    indexes (see bury)
//	P:sm:M     hash     series counts of minute M (minutes since the
//	                    epoch), fields kind and handler (see tally)
//	P:sh:H     hash     the same of hour H (hours since the epoch)
//
// and the namespace's own keys, each in a slot of its own:
//
//	N:queues   set      every queue that ever had a task, or was paused:
//	                    added before the queue's first script
//	N:id:ID    string   the queue of task ID: set (NX) before the script
//	                    that inserts the task, deleted after the script
//	                    that deletes it; an entry whose task does not
//	                    exist in its queue reads as "not found"
//	N:auditseq string   the last audit entry ID reserved: an audited
//	                    script gets its entry's ID (INCR) as its last
//	                    argument, so a failed reservation changes nothing
//	N:{~}:workers set   registered worker IDs
//	N:{~}:w:ID hash     a worker's entry (see scriptRegister)
//	N:notify   channel  queue names published when tasks are enqueued
//
// A task's hash fields: id, q queue, h handler, p payload, ct content
// type, hd headers (netstrings), ik idempotency key, st status, at
// attempts, lf life, nx next attempt (µs), tk lease token, le lease expiry
// (µs, 0 when not in flight), lo lease owner, ca claimed at (µs), cr
// created, up updated, fi finished (µs, 0 when not finished), et, em, ef
// last error type, message, fingerprint, ma max attempts, to timeout (µs),
// sn snoozes, mn the highest attempt number recorded.
// A field whose value is its default (0 for a number, empty for a text:
// hd, ik, at, lf, tk, le, lo, ca, fi, et, em, ef, sn, mn) may be left out:
// an enqueue writes none of them but those of a first failure, and every
// script and the store read a missing one as its default. Each field of
// a hash costs every command that writes or reads it.
//
// A task's row is how the scripts that hand tasks to a worker (scriptClaim,
// scriptRetryInPlace) return one: the values, without their names, of the
// fields id, q, h, p, ct, hd, ik, st, at, lf, nx, tk, le, lo, cr, up, fi,
// et, em, ef, ma, to, sn, in this order (decodeRow reads it); less than
// half of an HGETALL, and each script reads only the fields it neither
// knows nor writes.
//
// Records (attempts, audit entries) are sequences of netstrings
// ("LEN:BYTES"), so any bytes survive. An attempt: number, life, token,
// started, finished, outcome, error type, message, stack, worker. An
// audit entry: id, at, actor, action, filter, ids (comma-separated),
// count, reason, details (netstrings of keys and values), queues touched
// (sorted, comma-separated; entries written before it have 9 fields).
//
// Times are microseconds since the Unix epoch, integers well below 2^53,
// so Lua's doubles hold them exactly; every number a script writes goes
// through fmt, since Lua's own number formatting rounds them. The clock
// is the server's TIME unless the caller passes a "now" (tests travel in
// time with it).
//
// Every script here names the keys it touches in its comment; P is always
// the prefix of the queue KEYS[1] names.

// prelude is the shared head of every script. Its first line is a
// shebang (Redis 7.0 and later): a script with one may touch keys of one
// slot only, which Redis Cluster enforces, so a script that strays from
// its queue's slot fails there instead of working by chance when two
// slots share a node.
const prelude = `#!lua
local N = ARGV[1]
local P = KEYS[1]
-- Q is the queue of P (N:{Q}); a namespace holds no brace.
local Q = string.sub(P, #N + 3, -2)
local function fmt(n) return string.format('%d', n) end
local function clock(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function nstr(s) return #s .. ':' .. s end
local function qp(q) return N .. ':{' .. q .. '}' end
local function tkey(q, id) return qp(q) .. ':t:' .. id end
local function akey(q, id) return qp(q) .. ':a:' .. id end
local function num(v) if v then return tonumber(v) or 0 end return 0 end

-- tallies holds the series counts of this script's attempts and
-- dead-letterings, written once per key and field by flush; tm and th are
-- the minute's and the hour's of the last (queue, time) tallied, which a
-- batch shares.
local tallies, tq, tat, tm, th = {}, nil, nil, nil, nil

-- tally adds one to the series count of kind (S success, R retryable
-- failure or lost lease, P permanent failure, D dead-lettering) of handler
-- h of queue q in the minute and the hour holding at (µs): fields kind..h
-- of P:sm:MINUTE and P:sh:HOUR (minutes and hours since the epoch).
local function tally(q, h, at, kind)
  if q ~= tq or at ~= tat then
    local p = qp(q)
    local mk, hk = p .. ':sm:' .. fmt(math.floor(at / 60000000)), p .. ':sh:' .. fmt(math.floor(at / 3600000000))
    tm = tallies[mk]
    if not tm then tm = {}; tallies[mk] = tm end
    th = tallies[hk]
    if not th then th = {}; tallies[hk] = th end
    tq, tat = q, at
  end
  local f = kind .. h
  tm[f] = (tm[f] or 0) + 1
  th[f] = (th[f] or 0) + 1
end

-- tallyout tallies an attempt's outcome (a cancellation is none).
local outkinds = {SUCCESS = 'S', RETRYABLE_FAILURE = 'R', LEASE_EXPIRED = 'R', PERMANENT_FAILURE = 'P'}
local function tallyout(q, h, at, outcome)
  local kind = outkinds[outcome]
  if kind then tally(q, h, at, kind) end
end

-- flush writes the tallies: a HINCRBY per key and field; a key whose
-- field this created is given the series retention (ARGV of no script:
-- the constant below, 8 days and an hour) from now.
local seriesttl = 8 * 24 * 3600 + 3600
local function flush()
  for k, t in pairs(tallies) do
    local fresh = false
    for f, n in pairs(t) do
      if redis.call('HINCRBY', k, f, n) == n then fresh = true end
    end
    if fresh then redis.call('EXPIRE', k, seriesttl) end
  end
  tallies, tq, tat = {}, nil, nil
end

-- append appends attempt number n to task id's history, numbered after
-- its highest recorded number, and tallies its outcome; the caller keeps
-- the task's highest number (mn) and flushes the tallies.
local function append(q, id, h, n, life, token, started, finished, outcome, etype, msg, stack, worker)
  redis.call('RPUSH', akey(q, id), nstr(fmt(n)) .. nstr(fmt(life)) .. nstr(fmt(token)) ..
    nstr(fmt(started)) .. nstr(fmt(finished)) .. nstr(outcome) .. nstr(etype) .. nstr(msg) ..
    nstr(stack) .. nstr(worker))
  tallyout(q, h, finished, outcome)
end

-- record appends an attempt to task id's history, numbered after its
-- highest recorded number (mn), and returns the number.
local function record(q, id, h, life, token, started, finished, outcome, etype, msg, stack, worker)
  local n = redis.call('HINCRBY', tkey(q, id), 'mn', 1)
  append(q, id, h, n, life, token, started, finished, outcome, etype, msg, stack, worker)
  return n
end

-- variadic runs cmd on key with the arguments args, in calls of at most
-- 1,000 arguments each (Lua's unpack has a stack limit). The arguments of
-- ZADD are pairs, so the chunk size is even.
local function variadic(cmd, key, args)
  for i = 1, #args, 1000 do
    redis.call(cmd, key, unpack(args, i, math.min(i + 999, #args)))
  end
end

-- held reports whether handler h of queue q is paused (P:hp:H exists):
-- claims pass over its waiting tasks.
local function held(q, h) return redis.call('EXISTS', qp(q) .. ':hp:' .. h) == 1 end

-- known caches, per script, the (queue, handler) pairs already recorded in
-- P:handlers.
local known = {}

-- wait makes task id of queue q and handler h PENDING, due at due: in
-- P:ph:H; and records h among the queue's handlers
-- (P:handlers). A task coming from IN_FLIGHT is taken out of P:inflight
-- by its caller.
local function wait(q, id, h, due)
  local p = qp(q)
  if not known[p .. h] then
    redis.call('SADD', p .. ':handlers', h)
    known[p .. h] = true
  end
  redis.call('ZADD', p .. ':ph:' .. h, fmt(due), id)
end

-- unwait removes task id from the pending indexes of its queue.
local function unwait(q, id, h)
  local p = qp(q)
  redis.call('ZREM', p .. ':ph:' .. h, id)
end

-- bury adds DEAD task id of queue q to the queue's dead-letter indexes,
-- each a zset by finish time: P:dead, P:dh:H (handler), P:de:E (error
-- type), P:df:F (fingerprint); counts it in the group summaries P:dfs
-- (fingerprint -> count) and P:dfk:F (handler -> count); and tallies it.
-- P:dm (id -> "LIFE:message in lower case") holds what a count by message
-- or life checks (scriptCountDeadQueue).
local function bury(q, id)
  local v = redis.call('HMGET', tkey(q, id), 'h', 'et', 'ef', 'fi', 'lf', 'em')
  local p, fi = qp(q), v[4]
  v[2], v[3] = v[2] or '', v[3] or ''
  redis.call('HSET', p .. ':dm', id, (v[5] or '0') .. ':' .. string.lower(v[6] or ''))
  redis.call('ZADD', p .. ':dead', fi, id)
  redis.call('ZADD', p .. ':dh:' .. v[1], fi, id)
  redis.call('ZADD', p .. ':de:' .. v[2], fi, id)
  redis.call('ZADD', p .. ':df:' .. v[3], fi, id)
  redis.call('ZINCRBY', p .. ':dfs', 1, v[3])
  redis.call('HINCRBY', p .. ':dfk:' .. v[3], v[1], 1)
  tally(q, v[1], tonumber(fi), 'D')
end

-- unbury removes DEAD task id of queue q from the dead-letter indexes.
local function unbury(q, id)
  local v = redis.call('HMGET', tkey(q, id), 'h', 'et', 'ef')
  local p = qp(q)
  v[2], v[3] = v[2] or '', v[3] or ''
  redis.call('ZREM', p .. ':dead', id)
  redis.call('HDEL', p .. ':dm', id)
  redis.call('ZREM', p .. ':dh:' .. v[1], id)
  redis.call('ZREM', p .. ':de:' .. v[2], id)
  redis.call('ZREM', p .. ':df:' .. v[3], id)
  if tonumber(redis.call('ZINCRBY', p .. ':dfs', -1, v[3])) <= 0 then redis.call('ZREM', p .. ':dfs', v[3]) end
  local gk = p .. ':dfk:' .. v[3]
  if redis.call('HINCRBY', gk, v[1], -1) <= 0 then redis.call('HDEL', gk, v[1]) end
end

-- readfilter reads a dead-task filter from ARGV at b+1: queue, handler,
-- error type, fingerprint, dead after (µs or ''), dead before (µs or
-- ''), message (lower case), life min, life below, id count, ids...
-- It returns the filter and the index of its last argument.
local function readfilter(b)
  local f = {q = ARGV[b+1], h = ARGV[b+2], et = ARGV[b+3], ef = ARGV[b+4],
    after = ARGV[b+5], before = ARGV[b+6], msg = ARGV[b+7],
    lmin = tonumber(ARGV[b+8]), lbelow = tonumber(ARGV[b+9]), ids = {}}
  local n = tonumber(ARGV[b+10])
  for i = 1, n do f.ids[i] = ARGV[b+10+i] end
  return f, b + 10 + n
end

-- matches reports whether the task whose HMGET of st, q, h, et, ef, fi,
-- em, lf is v is DEAD and matches filter f (ids aside). Message matching
-- folds ASCII letters only.
local function matches(f, v)
  if v[1] ~= 'DEAD' then return false end
  if f.q ~= '' and v[2] ~= f.q then return false end
  if f.h ~= '' and v[3] ~= f.h then return false end
  if f.et ~= '' and v[4] ~= f.et then return false end
  if f.ef ~= '' and v[5] ~= f.ef then return false end
  local fi = tonumber(v[6])
  if f.after ~= '' and fi < tonumber(f.after) then return false end
  if f.before ~= '' and fi >= tonumber(f.before) then return false end
  if f.msg ~= '' and not string.find(string.lower(v[7] or ''), f.msg, 1, true) then return false end
  local lf = tonumber(v[8])
  if f.lmin > 0 and lf < f.lmin then return false end
  if f.lbelow > 0 and lf >= f.lbelow then return false end
  return true
end

-- look reads what matches needs of task id of this script's queue, or nil
-- when there is no such task; a field the hash leaves out reads as its
-- default.
local function look(id)
  local v = redis.call('HMGET', tkey(Q, id), 'st', 'q', 'h', 'et', 'ef', 'fi', 'em', 'lf')
  if not v[1] then return nil end
  v[4], v[5], v[6], v[7], v[8] = v[4] or '', v[5] or '', v[6] or '0', v[7] or '', v[8] or '0'
  return v
end

-- audit writes an audit entry of this script's queue, with the ID the
-- store reserved (the script's last argument), and returns the ID. The
-- entries of one mutation across queues share their ID (see ListAudit).
local function audit(at, actor, action, filter, ids, count, reason, details)
  local id = tonumber(ARGV[#ARGV])
  redis.call('ZADD', P .. ':audit', fmt(id), nstr(fmt(id)) .. nstr(fmt(at)) .. nstr(actor) .. nstr(action) ..
    nstr(filter) .. nstr(ids) .. nstr(fmt(count)) .. nstr(reason) .. nstr(details) .. nstr(Q))
  return id
end
`

// scriptEnqueue inserts a batch of tasks of one queue. The store has set
// each task's N:id:ID (NX) before; a task whose ID the queue holds already
// is a duplicate.
// ARGV: N, now, key retention (µs), count, then per task 18 fields: id,
// queue, handler, payload, content type, headers, idempotency key, delay
// (µs), max attempts, timeout (µs), has first failure ("1"/"0"), its
// outcome, error type, message, stack, fingerprint, worker, duration (µs).
// Keys: P:t:ID, P:a:ID, P:handlers, P:ph:H, P:ik:K, P:ikp, and the
// dead-letter indexes (bury) for a task created dead; N:notify.
// Returns per task {"new", created (µs)}, {"dup", HGETALL...} or
// {"purged", id, queue, key, created}.
var scriptEnqueue = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local nows = fmt(now)
local retention = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local out = {}
local queues = {}
-- (due, id) pairs for each handler's waiting set, written once per key
-- at the end (wait does the same one task at a time).
local waits = {}
local function later(q, id, h, due)
  local p = qp(q)
  if not known[p .. h] then
    redis.call('SADD', p .. ':handlers', h)
    known[p .. h] = true
  end
  local k = p .. ':ph:' .. h
  local l = waits[k]
  if not l then l = {}; waits[k] = l end
  l[#l+1], l[#l+2] = fmt(due), id
end
for i = 0, n - 1 do
  local b = 4 + i * 18
  local id, q, h = ARGV[b+1], ARGV[b+2], ARGV[b+3]
  local ik = ARGV[b+7]
  local res = nil
  local fields = redis.call('HGETALL', tkey(q, id))
  if #fields > 0 then
    res = {'dup'}
    for _, v in ipairs(fields) do res[#res+1] = v end
  end
  local ikk = qp(q) .. ':ik:' .. ik
  if not res and ik ~= '' then
    local v = redis.call('GET', ikk)
    if v then
      local pid, pcreated, pat = string.match(v, '^purged:([^:]+):(%d+):(%d+)$')
      if pid then
        if now - tonumber(pat) <= retention then
          res = {'purged', pid, q, ik, pcreated}
        end
      else
        local fields = redis.call('HGETALL', tkey(q, v))
        if #fields > 0 then
          res = {'dup'}
          for _, f in ipairs(fields) do res[#res+1] = f end
        end
      end
    end
  end
  if not res then
    local k = tkey(q, id)
    local due = now + tonumber(ARGV[b+8])
    -- Only the fields without a default (see the layout).
    local set = {'id', id, 'q', q, 'h', h, 'p', ARGV[b+4], 'ct', ARGV[b+5], 'st', 'PENDING',
      'nx', fmt(due), 'cr', nows, 'up', nows, 'ma', ARGV[b+9], 'to', ARGV[b+10]}
    if ARGV[b+6] ~= '' then set[#set+1], set[#set+2] = 'hd', ARGV[b+6] end
    if ik ~= '' then set[#set+1], set[#set+2] = 'ik', ik end
    redis.call('HSET', k, unpack(set))
    if ARGV[b+11] == '1' then
      local outcome = ARGV[b+12]
      local dur = tonumber(ARGV[b+18])
      record(q, id, h, 0, 0, now - dur, now, outcome, ARGV[b+13], ARGV[b+14], ARGV[b+15], ARGV[b+17])
      redis.call('HSET', k, 'at', '1', 'et', ARGV[b+13], 'em', ARGV[b+14], 'ef', ARGV[b+16])
      if outcome == 'PERMANENT_FAILURE' then
        redis.call('HSET', k, 'st', 'DEAD', 'fi', fmt(now))
        bury(q, id)
      else
        later(q, id, h, due)
      end
    else
      later(q, id, h, due)
    end
    if ik ~= '' then
      redis.call('SET', ikk, id)
      redis.call('ZREM', qp(q) .. ':ikp', ik)
    end
    queues[q] = true
    res = {'new', fmt(now)}
  end
  out[#out+1] = res
end
for k, l in pairs(waits) do variadic('ZADD', k, l) end
for q in pairs(queues) do redis.call('PUBLISH', N .. ':notify', q) end
flush()
return out
`)

// scriptClaim leases up to limit due PENDING tasks of the queues (and
// handlers), oldest due first; or, with dry "1", changes nothing and
// returns the due times and IDs of the tasks it would lease (the store
// merges the queues of a claim that spans several with them).
// On Redis Cluster it is given one queue; on one server, several.
// ARGV: N, now, lease (µs), worker, limit, queue count, queues...,
// handler count, handlers..., dry ("1"/"0").
// Keys: P:paused, P:handlers (no handlers given), P:hp:H and P:ph:H of
// each handler, P:inflight, P:t:ID of each claimed task. A paused queue
// and a paused handler are passed over.
// Returns per claimed task its row (see the layout) as the claim left it;
// dry, {due, ID} per task.
var scriptClaim = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local lease = tonumber(ARGV[3])
local worker = ARGV[4]
local limit = tonumber(ARGV[5])
local nq = tonumber(ARGV[6])
local nh = tonumber(ARGV[7 + nq])
local cands, sources = {}, 0
for i = 1, nq do
  local q = ARGV[6 + i]
  local keys = {}
  if redis.call('EXISTS', qp(q) .. ':paused') == 0 then
    local hs = {}
    if nh == 0 then hs = redis.call('SMEMBERS', qp(q) .. ':handlers') else
      for j = 1, nh do hs[j] = ARGV[7 + nq + j] end
    end
    for _, h in ipairs(hs) do
      if not held(q, h) then
        local r = redis.call('ZRANGEBYSCORE', qp(q) .. ':ph:' .. h, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, limit)
        if #r > 0 then sources = sources + 1 end
        for j = 1, #r, 2 do cands[#cands+1] = {tonumber(r[j+1]), r[j], q, h} end
      end
    end
  end
end
-- Each source (a handler's waiting set) is in claim order already; the
-- merge needs a sort only when there are several.
if sources > 1 then
  table.sort(cands, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
end
local out = {}
if ARGV[#ARGV] == '1' then
  for i = 1, math.min(limit, #cands) do out[i] = {fmt(cands[i][1]), cands[i][2]} end
  return out
end
local exp = fmt(now + lease)
local nows = fmt(now)
local taken, inflight = {}, {}
-- The fields of a row a claim reads (all but the ID, the queue and the
-- handler, which it knows, and those it writes), in order.
local claimfields = {'p', 'ct', 'hd', 'ik', 'at', 'lf', 'nx', 'tk', 'cr', 'fi', 'et', 'em', 'ef', 'ma', 'to', 'sn'}
for i = 1, math.min(limit, #cands) do
  local c = cands[i]
  local id, q, h = c[2], c[3], c[4]
  local k = tkey(q, id)
  local src = qp(q) .. ':ph:' .. h
  if not taken[src] then taken[src] = {} end
  local tl = taken[src]
  tl[#tl+1] = id
  if not inflight[q] then inflight[q] = {} end
  local fl = inflight[q]
  fl[#fl+1], fl[#fl+2] = exp, id
  -- The reply is the task's row: what the claim does not know, read,
  -- and what it writes.
  local v = redis.call('HMGET', k, unpack(claimfields))
  local tk = fmt(num(v[8]) + 1)
  redis.call('HSET', k, 'tk', tk, 'st', 'IN_FLIGHT', 'le', exp, 'lo', worker, 'ca', nows, 'up', nows)
  out[#out+1] = {id, q, h, v[1], v[2], v[3], v[4], 'IN_FLIGHT', v[5], v[6], v[7], tk, exp, worker,
    v[9], nows, v[10], v[11], v[12], v[13], v[14], v[15], v[16]}
end
for src, ids in pairs(taken) do variadic('ZREM', src, ids) end
for q, pairs_ in pairs(inflight) do variadic('ZADD', qp(q) .. ':inflight', pairs_) end
return out
`)

// scriptHeartbeat extends live leases.
// ARGV: N, now, extend (µs), count, then per lease: id, token.
// Keys: P:t:ID, P:inflight.
// Returns per lease 1 (extended) or 0 (lost).
var scriptHeartbeat = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local exp = now + tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local out = {}
for i = 0, n - 1 do
  local id, token = ARGV[5 + i*2], tonumber(ARGV[6 + i*2])
  local q = Q
  local ok = 0
  if redis.call('EXISTS', tkey(q, id)) == 1 then
    local k = tkey(q, id)
    local v = redis.call('HMGET', k, 'st', 'tk')
    if v[1] == 'IN_FLIGHT' and tonumber(v[2]) == token then
      redis.call('HSET', k, 'le', fmt(exp), 'up', fmt(now))
      redis.call('ZADD', qp(q) .. ':inflight', fmt(exp), id)
      ok = 1
    end
  end
  out[#out+1] = ok
end
return out
`)

// scriptFinish ends executions.
// ARGV: N, now, count, then per completion 13 fields: id, its queue (if
// the caller knows it, else empty), token, status, retry in (µs), has attempt
// ("1"/"0"), outcome, error type, message, stack, fingerprint, worker,
// duration (µs). On Redis Cluster every task is of the script's queue;
// on one server, a batch may span queues.
// Keys: P:t:ID, P:a:ID, P:inflight, P:handlers, P:ph:H, P:done, and the
// dead-letter indexes (bury).
// Returns per completion 1 (applied) or 0 (lost).
var scriptFinish = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local nows = fmt(now)
local n = tonumber(ARGV[3])
local out = {}
-- the batch's index writes, one command per key: ids leaving each
-- queue's P:inflight, (finish time, id) pairs for each P:done, and (due,
-- id) pairs for each handler's waiting set.
local gone, done, waits = {}, {}, {}
local function add(t, k, a, b)
  local l = t[k]
  if not l then l = {}; t[k] = l end
  l[#l+1] = a
  if b then l[#l+1] = b end
end
local fields = {'st', 'tk', 'lf', 'h', 'mn', 'at'}
for i = 0, n - 1 do
  local b = 4 + i * 13
  local id, q, token, status = ARGV[b], ARGV[b+1], tonumber(ARGV[b+2]), ARGV[b+3]
  local ok = 0
  local v = redis.call('HMGET', tkey(q, id), unpack(fields))
  if v[1] then
    local k = tkey(q, id)
    if v[1] == 'IN_FLIGHT' and tonumber(v[2]) == token then
      ok = 1
      local set = {'le', '0', 'up', nows, 'st', status}
      if ARGV[b+5] == '1' then
        local outcome = ARGV[b+6]
        local n = num(v[5]) + 1
        append(q, id, v[4], n, num(v[3]), token, now - tonumber(ARGV[b+12]), now, outcome,
          ARGV[b+7], ARGV[b+8], ARGV[b+9], ARGV[b+11])
        set[#set+1], set[#set+2], set[#set+3], set[#set+4] = 'mn', fmt(n), 'at', fmt(num(v[6]) + 1)
        if outcome ~= 'SUCCESS' then
          set[#set+1], set[#set+2], set[#set+3] = 'et', ARGV[b+7], 'em'
          set[#set+1], set[#set+2], set[#set+3] = ARGV[b+8], 'ef', ARGV[b+10]
        end
      end
      local p = qp(q)
      add(gone, p .. ':inflight', id)
      local due = fmt(now + tonumber(ARGV[b+4]))
      if status == 'PENDING' then
        set[#set+1], set[#set+2] = 'nx', due
      else
        set[#set+1], set[#set+2] = 'fi', nows
      end
      redis.call('HSET', k, unpack(set))
      if status == 'PENDING' then
        if not known[p .. v[4]] then
          redis.call('SADD', p .. ':handlers', v[4])
          known[p .. v[4]] = true
        end
        add(waits, p .. ':ph:' .. v[4], due, id)
      elseif status == 'SUCCEEDED' then
        add(done, p .. ':done', nows, id)
      else
        bury(q, id)
      end
    end
  end
  out[#out+1] = ok
end
for k, ids in pairs(gone) do variadic('ZREM', k, ids) end
for k, l in pairs(done) do variadic('ZADD', k, l) end
for k, l in pairs(waits) do variadic('ZADD', k, l) end
flush()
return out
`)

// scriptRelease returns leased tasks to PENDING, due now.
// ARGV: N, now, count, then per lease: id, token.
// Keys: P:t:ID, P:inflight, P:handlers, P:ph:H.
// Returns per lease 1 (released) or 0 (lost).
var scriptRelease = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local n = tonumber(ARGV[3])
local out = {}
for i = 0, n - 1 do
  local id, token = ARGV[4 + i*2], tonumber(ARGV[5 + i*2])
  local q = Q
  local ok = 0
  if redis.call('EXISTS', tkey(q, id)) == 1 then
    local k = tkey(q, id)
    local v = redis.call('HMGET', k, 'st', 'tk', 'h')
    if v[1] == 'IN_FLIGHT' and tonumber(v[2]) == token then
      redis.call('HSET', k, 'st', 'PENDING', 'nx', fmt(now), 'le', '0', 'up', fmt(now))
      redis.call('ZREM', qp(q) .. ':inflight', id)
      wait(q, id, v[3], now)
      ok = 1
    end
  end
  out[#out+1] = ok
end
return out
`)

// scriptReclaim takes over IN_FLIGHT tasks whose lease expired, oldest
// expiry first, recording a LEASE_EXPIRED attempt for each.
// Or, with dry "1", it changes nothing and returns the expiries and IDs of
// the tasks it would take over (the store merges the queues of a reclaim
// that spans several with them).
// ARGV: N, now, lease (µs), worker, limit, error type, message,
// fingerprint of the lease-expired failure, dry ("1"/"0").
// Keys: P:inflight, P:t:ID, P:a:ID.
// Returns {HGETALL...} per reclaimed task; dry, {expiry, ID} per task.
var scriptReclaim = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local lease = tonumber(ARGV[3])
local worker = ARGV[4]
local limit = tonumber(ARGV[5])
local etype, emsg, efp = ARGV[6], ARGV[7], ARGV[8]
local cands = {}
local r = redis.call('ZRANGEBYSCORE', P .. ':inflight', '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, limit)
for j = 1, #r, 2 do cands[#cands+1] = {tonumber(r[j+1]), r[j], Q} end
local out = {}
if ARGV[9] == '1' then
  for i = 1, #cands do out[i] = {fmt(cands[i][1]), cands[i][2]} end
  return out
end
for i = 1, math.min(limit, #cands) do
  local c = cands[i]
  local id, q = c[2], c[3]
  local k = tkey(q, id)
  local v = redis.call('HMGET', k, 'lf', 'tk', 'ca', 'lo', 'h')
  record(q, id, v[5], num(v[1]), num(v[2]), num(v[3]), now, 'LEASE_EXPIRED', etype, emsg, '', v[4] or '')
  local exp = now + lease
  redis.call('HINCRBY', k, 'at', 1)
  redis.call('HINCRBY', k, 'tk', 1)
  redis.call('HSET', k, 'le', fmt(exp), 'lo', worker, 'ca', fmt(now), 'up', fmt(now),
    'et', etype, 'em', emsg, 'ef', efp)
  redis.call('ZADD', qp(q) .. ':inflight', fmt(exp), id)
  out[#out+1] = redis.call('HGETALL', k)
end
flush()
return out
`)

// scriptGet reads a task and its attempts.
// ARGV: N, id. Keys: P:t:ID, P:a:ID.
// Returns {} when there is no such task, else {{HGETALL...}, {attempts...}}.
var scriptGet = redis.NewScript(prelude + `
local id = ARGV[2]
local q = Q
local t = redis.call('HGETALL', tkey(q, id))
if #t == 0 then return {} end
return {t, redis.call('LRANGE', akey(q, id), 0, -1)}
`)

// scriptPurgeSucceeded deletes the queue's SUCCEEDED tasks that finished
// before a cut-off, keeping their idempotency keys for the key retention,
// and prunes the keys purged longer ago than it; it writes a "retention"
// audit entry, before anything else, when it deletes anything. The store
// deletes the tasks' N:id:ID afterwards.
// ARGV: N, now, older than (µs), limit, actor, key retention (µs), audit
// filter (JSON), audit ID.
// Keys: P:done, P:t:ID, P:a:ID, P:ik:K, P:ikp, P:audit.
// Returns the IDs of the tasks deleted.
var scriptPurgeSucceeded = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local cut = now - tonumber(ARGV[3])
local left = tonumber(ARGV[4])
local actor = ARGV[5]
local retention = tonumber(ARGV[6])
local q, p = Q, P
local gone = {}
if left > 0 then
  gone = redis.call('ZRANGEBYSCORE', p .. ':done', '-inf', '(' .. fmt(cut), 'LIMIT', 0, left)
end
if #gone > 0 then audit(now, actor, 'retention', ARGV[7], '', #gone, '', '') end
for _, id in ipairs(gone) do
  local k = tkey(q, id)
  local v = redis.call('HMGET', k, 'ik', 'cr')
  if v[1] and v[1] ~= '' then
    local ikk = p .. ':ik:' .. v[1]
    if redis.call('GET', ikk) == id then
      redis.call('SET', ikk, 'purged:' .. id .. ':' .. v[2] .. ':' .. fmt(now))
      redis.call('ZADD', p .. ':ikp', fmt(now), v[1])
    end
  end
  redis.call('DEL', k, akey(q, id))
  redis.call('ZREM', p .. ':done', id)
end
local old = redis.call('ZRANGEBYSCORE', p .. ':ikp', '-inf', '(' .. fmt(now - retention), 'LIMIT', 0, 1000)
for _, ik in ipairs(old) do
  local ikk = p .. ':ik:' .. ik
  local v = redis.call('GET', ikk)
  if v and string.sub(v, 1, 7) == 'purged:' then redis.call('DEL', ikk) end
  redis.call('ZREM', p .. ':ikp', ik)
end
return gone
`)

// scriptScanDead walks one of the queue's dead-letter indexes newest
// first from a cursor, examining at most a budget of entries, and returns
// the tasks matching a filter (or their count, or their IDs). The index
// is the narrowest the filter allows: P:df:F for a fingerprint, P:dh:H for
// a handler, P:de:E for an error type, else P:dead; the filter's time
// bounds narrow its score range. A count that the index answers alone is
// one ZCOUNT.
// ARGV: N, mode ("list", "ids" or "count"), limit, budget, cursor finish
// time (µs, or empty), cursor ID, filter (readfilter; without ids).
// Keys: the index, P:t:ID of each entry.
// Returns {done (1/0), last examined finish time, last examined ID, count,
// results...}: HGETALL replies ("list") or {ID, finish time} ("ids").
var scriptScanDead = redis.NewScript(prelude + `
local mode = ARGV[2]
local limit = tonumber(ARGV[3])
local budget = tonumber(ARGV[4])
local cfi, cid = ARGV[5], ARGV[6]
local f = readfilter(6)
local key
if f.ef ~= '' then key = P .. ':df:' .. f.ef
elseif f.h ~= '' then key = P .. ':dh:' .. f.h
elseif f.et ~= '' then key = P .. ':de:' .. f.et
else key = P .. ':dead' end
local hi = '+inf'
if f.before ~= '' then hi = '(' .. f.before end
local lo0 = '-inf'
if f.after ~= '' then lo0 = f.after end
-- A count the index answers alone (no condition beyond its own field and
-- the time bounds) is one ZCOUNT.
local rest = f.msg == '' and f.lmin <= 0 and f.lbelow <= 0
if f.ef ~= '' then rest = rest and f.h == '' and f.et == ''
elseif f.h ~= '' then rest = rest and f.et == '' end
if mode == 'count' and cfi == '' and rest then
  return {1, '', '', redis.call('ZCOUNT', key, lo0, hi)}
end
if cfi ~= '' and (f.before == '' or tonumber(cfi) < tonumber(f.before)) then hi = cfi end
local lo = '-inf'
if f.after ~= '' then lo = f.after end
local out = {0, '', '', 0}
local found, seen, off = 0, 0, 0
local lastfi, lastid = cfi, cid
while seen < budget and (mode == 'count' or found < limit) do
  local r = redis.call('ZREVRANGEBYSCORE', key, hi, lo, 'WITHSCORES', 'LIMIT', off, 256)
  if #r == 0 then out[1] = 1 break end
  off = off + #r / 2
  for j = 1, #r, 2 do
    local id, fi = r[j], r[j+1]
    if not (cfi ~= '' and tonumber(fi) == tonumber(cfi) and id >= cid) then
      seen = seen + 1
      lastfi, lastid = fi, id
      local v = look(id)
      if v and matches(f, v) then
        found = found + 1
        if mode == 'list' then out[#out+1] = redis.call('HGETALL', tkey(Q, id))
        elseif mode == 'ids' then out[#out+1] = {id, v[6]} end
        if mode ~= 'count' and found >= limit then break end
      end
      if seen >= budget then break end
    end
  end
end
out[2], out[3], out[4] = lastfi, lastid, found
return out
`)

// scriptDeadByID reads the tasks of a list of IDs that are DEAD and match
// a filter, newest dead first, after a cursor.
// ARGV: N, limit, cursor finish time (µs, or empty), cursor ID, filter
// (readfilter, with ids: the store passes those of the script's queue).
// Keys: P:t:ID of each ID.
// Returns HGETALL replies.
var scriptDeadByID = redis.NewScript(prelude + `
local limit = tonumber(ARGV[2])
local cfi, cid = ARGV[3], ARGV[4]
local f = readfilter(4)
local rows, seen = {}, {}
for _, id in ipairs(f.ids) do
  if not seen[id] then
    seen[id] = true
    local q, v = Q, look(id)
    if v and matches(f, v) then
      local fi = tonumber(v[6])
      if cfi == '' or fi < tonumber(cfi) or (fi == tonumber(cfi) and id < cid) then
        rows[#rows+1] = {fi, id, q}
      end
    end
  end
end
table.sort(rows, function(a, b)
  if a[1] ~= b[1] then return a[1] > b[1] end
  return a[2] > b[2]
end)
local out = {}
for i = 1, math.min(limit, #rows) do out[i] = redis.call('HGETALL', tkey(rows[i][3], rows[i][2])) end
return out
`)

// scriptDeadGroups reads the queue's kept group summaries: per
// fingerprint, the count of dead tasks and the first and last of them by
// finish time.
// ARGV: N. Keys: P:dfs, P:df:F of each fingerprint, P:t:ID of each
// group's newest task.
// Returns per group {fingerprint, count, first seen, last seen, example
// ID, error type, message}, largest first.
var scriptDeadGroups = redis.NewScript(prelude + `
local sum, pre = P .. ':dfs', P .. ':df:'
local out = {}
local r = redis.call('ZREVRANGE', sum, 0, -1, 'WITHSCORES')
for j = 1, #r, 2 do
  local fp, n = r[j], r[j+1]
  local first = redis.call('ZRANGE', pre .. fp, 0, 0, 'WITHSCORES')
  local last = redis.call('ZREVRANGE', pre .. fp, 0, 0, 'WITHSCORES')
  if #last > 0 then
    local ex = last[1]
    local v = redis.call('HMGET', tkey(Q, ex), 'et', 'em')
    out[#out+1] = {fp, n, first[2], last[2], ex, v[1] or '', v[2] or ''}
  end
end
return out
`)

// scriptRedrive moves DEAD tasks back to PENDING in a new life, writing
// its audit entry first when it redrives anything.
// ARGV: N, now, actor, reason, action, audit filter (JSON, or empty), audit
// details (netstrings), max life, has payload ("1"/"0"), payload, SHA-1
// of the payload the caller read (guards an edit), delay (µs), filter
// (readfilter; without ids), count, then per task: id, extra delay (µs);
// audit ID.
// Keys: P:audit, P:t:ID, P:handlers, P:ph:H and the dead-letter indexes
// (unbury).
// Returns per task "ok", "notfound", "notdead", "limit", "nomatch", or
// "changed" (the payload was not the one read: nothing was done).
var scriptRedrive = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local actor, reason, action, afilter, details = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local maxlife = tonumber(ARGV[8])
local haspayload, payload, guard = ARGV[9] == '1', ARGV[10], ARGV[11]
local delay = tonumber(ARGV[12])
local f, b = readfilter(12)
local n = tonumber(ARGV[b+1])
local res, todo, ids, seen = {}, {}, {}, {}
for i = 0, n - 1 do
  local id, extra = ARGV[b+2+i*2], tonumber(ARGV[b+3+i*2])
  local q, v = Q, look(id)
  if not v then res[#res+1] = 'notfound'
  elseif v[1] ~= 'DEAD' or seen[id] then res[#res+1] = 'notdead'
  elseif not matches(f, v) then res[#res+1] = 'nomatch'
  elseif maxlife > 0 and tonumber(v[8]) >= maxlife then res[#res+1] = 'limit'
  else
    if haspayload and redis.sha1hex(redis.call('HGET', tkey(q, id), 'p') or '') ~= guard then return {'changed'} end
    seen[id] = true
    res[#res+1] = 'ok'
    todo[#todo+1] = {q, id, extra, v[3]}
    ids[#ids+1] = id
  end
end
if #todo == 0 then return res end
audit(now, actor, action, afilter, table.concat(ids, ','), #todo, reason, details)
for _, t in ipairs(todo) do
  local q, id, h = t[1], t[2], t[4]
  local k = tkey(q, id)
  unbury(q, id)
  local due = now + delay + t[3]
  redis.call('HINCRBY', k, 'lf', 1)
  redis.call('HSET', k, 'st', 'PENDING', 'at', '0', 'sn', '0', 'nx', fmt(due), 'fi', '0', 'le', '0', 'up', fmt(now))
  if haspayload then redis.call('HSET', k, 'p', payload) end
  wait(q, id, h, due)
end
return res
`)

// scriptPurgeDead deletes DEAD tasks that match a filter, with their
// attempts, writing its audit entry first when it deletes anything. A
// "purge" frees the tasks' idempotency keys; "retention" keeps them for
// the key retention, as PurgeSucceeded does.
// The store deletes the tasks' N:id:ID afterwards.
// ARGV: N, now, actor, reason, action, audit filter (JSON), filter
// (readfilter; without ids), count, ids..., audit ID.
// Keys: P:audit, P:t:ID, P:a:ID, P:ik:K, P:ikp and the dead-letter
// indexes (unbury).
// Returns the IDs of the tasks deleted.
var scriptPurgeDead = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local actor, reason, action, afilter = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local f, b = readfilter(6)
local n = tonumber(ARGV[b+1])
local todo, seen = {}, {}
for i = 1, n do
  local id = ARGV[b+1+i]
  local q, v = Q, look(id)
  if v and not seen[id] and matches(f, v) then
    seen[id] = true
    todo[#todo+1] = {q, id}
  end
end
if #todo == 0 then return {} end
audit(now, actor, action, afilter, '', #todo, reason, '')
local gone = {}
for _, t in ipairs(todo) do
  local q, id = t[1], t[2]
  local p, k = qp(q), tkey(q, id)
  unbury(q, id)
  local v = redis.call('HMGET', k, 'ik', 'cr')
  local ik = v[1]
  if ik and ik ~= '' and redis.call('GET', p .. ':ik:' .. ik) == id then
    if action == 'retention' then
      redis.call('SET', p .. ':ik:' .. ik, 'purged:' .. id .. ':' .. v[2] .. ':' .. fmt(now))
      redis.call('ZADD', p .. ':ikp', fmt(now), ik)
    else
      redis.call('DEL', p .. ':ik:' .. ik)
      redis.call('ZREM', p .. ':ikp', ik)
    end
  end
  redis.call('DEL', k, akey(q, id))
  gone[#gone+1] = id
end
return gone
`)

// scriptStats counts the queue's tasks by status.
// ARGV: N, now, succeeded window (µs; zero or less counts every
// succeeded task kept).
// Keys: P:handlers, P:ph:H, P:inflight, P:dead, P:done.
// Returns {pending, in flight, dead, succeeded in the window, oldest due
// age (µs)}, or {} when the queue has no task.
var scriptStats = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local since = '-inf'
if tonumber(ARGV[3]) > 0 then since = fmt(now - tonumber(ARGV[3])) end
local p = P
local pend, oldest = 0, nil
for _, h in ipairs(redis.call('SMEMBERS', p .. ':handlers')) do
  pend = pend + redis.call('ZCARD', p .. ':ph:' .. h)
  local first = redis.call('ZRANGE', p .. ':ph:' .. h, 0, 0, 'WITHSCORES')
  if #first > 0 and (not oldest or tonumber(first[2]) < oldest) then oldest = tonumber(first[2]) end
end
local fl = redis.call('ZCARD', p .. ':inflight')
local dead = redis.call('ZCARD', p .. ':dead')
local done = redis.call('ZCARD', p .. ':done')
if pend + fl + dead + done == 0 then return {} end
local succ = redis.call('ZCOUNT', p .. ':done', since, '+inf')
local age = 0
if oldest and oldest <= now then age = now - oldest end
return {pend, fl, dead, succ, fmt(age)}
`)

// scriptPause pauses or resumes a queue, writing its audit entry first
// when it changes anything.
// ARGV: N, now, queue, "pause" or "resume", actor, reason, audit filter,
// audit ID.
// Keys: P:paused, P:audit; N:notify.
// Returns 1 when the queue changed state, else 0.
var scriptPause = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local q, action = ARGV[3], ARGV[4]
local paused = redis.call('EXISTS', qp(q) .. ':paused') == 1
if (action == 'pause') == paused then return 0 end
audit(now, ARGV[5], action, ARGV[7], '', 0, ARGV[6], '')
if action == 'pause' then
  redis.call('SET', qp(q) .. ':paused', '1')
else
  redis.call('DEL', qp(q) .. ':paused')
  redis.call('PUBLISH', N .. ':notify', q)
end
return 1
`)

// scriptSnooze returns leased tasks to PENDING, due after their delay,
// without recording or counting an attempt, and counts the snooze.
// ARGV: N, now, count, then per item: id, token, delay (µs).
// Keys: P:t:ID, P:inflight, P:handlers, P:ph:H.
// Returns per item 1 (snoozed) or 0 (lost).
var scriptSnooze = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local n = tonumber(ARGV[3])
local out = {}
for i = 0, n - 1 do
  local id, token, delay = ARGV[4 + i*3], tonumber(ARGV[5 + i*3]), tonumber(ARGV[6 + i*3])
  local q = Q
  local ok = 0
  if redis.call('EXISTS', tkey(q, id)) == 1 then
    local k = tkey(q, id)
    local v = redis.call('HMGET', k, 'st', 'tk', 'h')
    if v[1] == 'IN_FLIGHT' and tonumber(v[2]) == token then
      local due = now + delay
      redis.call('HINCRBY', k, 'sn', 1)
      redis.call('HSET', k, 'st', 'PENDING', 'nx', fmt(due), 'le', '0', 'up', fmt(now))
      redis.call('ZREM', qp(q) .. ':inflight', id)
      wait(q, id, v[3], due)
      ok = 1
    end
  end
  out[#out+1] = ok
end
return out
`)

// scriptRetryInPlace records failed attempts and leases their tasks again
// to the attempt's worker, unless the task's queue is paused, where it is
// left PENDING as Finish leaves a retry, and so is a task of a paused
// handler (held). Per task it reads the hash once and writes it once;
// the leases kept go into P:inflight in one command.
// ARGV: N, now, lease (µs), count, then per item 10 fields: id, token,
// retry in (µs), outcome, error type, message, stack, fingerprint,
// worker, duration (µs).
// Keys: P:paused, P:t:ID, P:a:ID, P:inflight, P:hp:H, P:handlers, P:ph:H.
// Returns per item {0} (lost), {2} (left waiting) or {1, row} (see the
// layout).
var scriptRetryInPlace = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local nows = fmt(now)
local exp = fmt(now + tonumber(ARGV[3]))
local n = tonumber(ARGV[4])
local out = {}
-- The fields it reads: the lease's, the attempt's, and those of the row
-- it neither knows nor writes.
local fields = {'st', 'tk', 'lf', 'h', 'mn', 'at', 'p', 'ct', 'hd', 'ik', 'cr', 'fi', 'ma', 'to', 'sn'}
local paused = redis.call('EXISTS', P .. ':paused') == 1
local holds, inflight = {}, {}
for i = 0, n - 1 do
  local b = 4 + i * 10
  local id, token = ARGV[b+1], tonumber(ARGV[b+2])
  local q = Q
  local k = tkey(q, id)
  local res = {0}
  local v = redis.call('HMGET', k, unpack(fields))
  if v[1] == 'IN_FLIGHT' and tonumber(v[2]) == token then
    local h, worker = v[4], ARGV[b+9]
    local et, em, ef = ARGV[b+5], ARGV[b+6], ARGV[b+8]
    local mn = num(v[5]) + 1
    append(q, id, h, mn, num(v[3]), token, now - tonumber(ARGV[b+10]), now, ARGV[b+4],
      et, em, ARGV[b+7], worker)
    local at = fmt(num(v[6]) + 1)
    local due = now + tonumber(ARGV[b+3])
    local hold = holds[h]
    if hold == nil then hold = held(q, h); holds[h] = hold end
    if paused or hold then
      redis.call('HSET', k, 'mn', fmt(mn), 'at', at, 'et', et, 'em', em, 'ef', ef, 'nx', fmt(due), 'up', nows,
        'st', 'PENDING', 'le', '0')
      redis.call('ZREM', P .. ':inflight', id)
      wait(q, id, h, due)
      res = {2}
    else
      local tk = fmt(token + 1)
      redis.call('HSET', k, 'mn', fmt(mn), 'at', at, 'et', et, 'em', em, 'ef', ef, 'nx', fmt(due), 'up', nows,
        'tk', tk, 'le', exp, 'lo', worker, 'ca', nows)
      inflight[#inflight+1], inflight[#inflight+2] = exp, id
      res = {1, {id, q, h, v[7], v[8], v[9], v[10], 'IN_FLIGHT', at, v[3], fmt(due), tk, exp, worker,
        v[11], nows, v[12], et, em, ef, v[13], v[14], v[15]}}
    end
  end
  out[#out+1] = res
end
variadic('ZADD', P .. ':inflight', inflight)
flush()
return out
`)

// scriptNotDue counts the queue's PENDING tasks due after now.
// ARGV: N, now. Keys: P:handlers, P:ph:H.
// Returns the count.
var scriptNotDue = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local c = 0
for _, h in ipairs(redis.call('SMEMBERS', P .. ':handlers')) do
  c = c + redis.call('ZCOUNT', P .. ':ph:' .. h, '(' .. fmt(now), '+inf')
end
return c
`)

// scriptDeadHistogram counts dead tasks by finish time in consecutive
// buckets, over all of them or per fingerprint.
// Of one queue: the store sums the queues.
// ARGV: N, since (µs), width (µs), buckets, fingerprint count,
// fingerprints...
// Keys: P:dead, or P:df:F of each fingerprint.
// Returns one list of counts per fingerprint (one in all with none).
var scriptDeadHistogram = redis.NewScript(prelude + `
local since, width, nb = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local nf = tonumber(ARGV[5])
local keys = {}
if nf == 0 then keys[1] = P .. ':dead' else
  for i = 1, nf do keys[i] = P .. ':df:' .. ARGV[5 + i] end
end
local out = {}
for _, key in ipairs(keys) do
  local counts = {}
  for i = 0, nb - 1 do
    local lo = since + i * width
    counts[#counts+1] = redis.call('ZCOUNT', key, fmt(lo), '(' .. fmt(lo + width))
  end
  out[#out+1] = counts
end
return out
`)

// scriptDeadGroupKeys reads the handlers of each fingerprint's dead tasks
// in the queue from the summaries bury keeps.
// ARGV: N, fingerprints... Keys: P:dfk:F of each fingerprint.
// Returns per fingerprint the HGETALL of its summary (handler -> count).
var scriptDeadGroupKeys = redis.NewScript(prelude + `
local out = {}
for i = 2, #ARGV do out[#out+1] = redis.call('HGETALL', P .. ':dfk:' .. ARGV[i]) end
return out
`)

// scriptListTasks lists live tasks of one state matching a filter, in the
// state's order, after a cursor, in the script's queue (the store merges
// queues): PENDING tasks never tried in this life
// ("pending") or tried ("retrying") by due time, IN_FLIGHT ones by lease
// expiry, SUCCEEDED ones by finish time, newest first. It walks the
// state's sorted sets the filter allows (P:ph:H of each handler, or
// P:inflight, P:done) from the cursor and merges them.
// ARGV: N, state, limit, cursor time (µs, or empty), cursor ID, queue,
// handler, error type, fingerprint, message (lower case), id count,
// ids...
// Keys: P:handlers, the state's sets and P:t:ID.
// Returns HGETALL replies.
var scriptListTasks = redis.NewScript(prelude + `
local state, limit = ARGV[2], tonumber(ARGV[3])
local cat, cid = ARGV[4], ARGV[5]
local f = {q = ARGV[6], h = ARGV[7], et = ARGV[8], ef = ARGV[9], msg = ARGV[10]}
local nids = tonumber(ARGV[11])
local desc = state == 'succeeded'
local set, st = nil, 'PENDING'
if state == 'in_flight' then set, st = ':inflight', 'IN_FLIGHT'
elseif state == 'succeeded' then set, st = ':done', 'SUCCEEDED' end
local function fits(q, id)
  local v = redis.call('HMGET', tkey(q, id), 'st', 'h', 'et', 'ef', 'em', 'at')
  if v[1] ~= st then return false end
  if state == 'pending' and num(v[6]) ~= 0 then return false end
  if state == 'retrying' and num(v[6]) == 0 then return false end
  if f.h ~= '' and v[2] ~= f.h then return false end
  if f.et ~= '' and v[3] ~= f.et then return false end
  if f.ef ~= '' and v[4] ~= f.ef then return false end
  if f.msg ~= '' and not string.find(string.lower(v[5] or ''), f.msg, 1, true) then return false end
  return true
end
local function after(at, id)
  if cat == '' then return true end
  local c = tonumber(cat)
  if desc then return at < c or (at == c and id < cid) end
  return at > c or (at == c and id > cid)
end
local rows = {}
if nids > 0 then
  local seen = {}
  for i = 1, nids do
    local id = ARGV[11 + i]
    local q = Q
    if redis.call('EXISTS', tkey(q, id)) == 1 and not seen[id] then
      seen[id] = true
      local key
      if set then key = qp(q) .. set else key = qp(q) .. ':ph:' .. (redis.call('HGET', tkey(q, id), 'h') or '') end
      local at = redis.call('ZSCORE', key, id)
      if at and fits(q, id) and after(tonumber(at), id) then rows[#rows+1] = {tonumber(at), id, q} end
    end
  end
else
  local queues = {Q}
  local keys = {}
  for _, q in ipairs(queues) do
    if set then keys[#keys+1] = {qp(q) .. set, q}
    elseif f.h ~= '' then keys[#keys+1] = {qp(q) .. ':ph:' .. f.h, q}
    else
      for _, h in ipairs(redis.call('SMEMBERS', qp(q) .. ':handlers')) do keys[#keys+1] = {qp(q) .. ':ph:' .. h, q} end
    end
  end
  for _, kq in ipairs(keys) do
    local key, q, found, off = kq[1], kq[2], 0, 0
    while found < limit do
      local r
      if desc then
        local hi = '+inf'
        if cat ~= '' then hi = cat end
        r = redis.call('ZREVRANGEBYSCORE', key, hi, '-inf', 'WITHSCORES', 'LIMIT', off, 256)
      else
        local lo = '-inf'
        if cat ~= '' then lo = cat end
        r = redis.call('ZRANGEBYSCORE', key, lo, '+inf', 'WITHSCORES', 'LIMIT', off, 256)
      end
      if #r == 0 then break end
      off = off + #r / 2
      for j = 1, #r, 2 do
        local id, at = r[j], tonumber(r[j+1])
        if after(at, id) and fits(q, id) then
          rows[#rows+1] = {at, id, q}
          found = found + 1
          if found >= limit then break end
        end
      end
    end
  end
end
table.sort(rows, function(a, b)
  if a[1] ~= b[1] then if desc then return a[1] > b[1] end return a[1] < b[1] end
  if desc then return a[2] > b[2] end
  return a[2] < b[2]
end)
local out = {}
for i = 1, math.min(limit, #rows) do out[i] = redis.call('HGETALL', tkey(rows[i][3], rows[i][2])) end
return out
`)

// scriptRetryNow makes PENDING tasks due now, writing its audit entry
// first when it changes anything, and notifies their queues.
// ARGV: N, now, actor, reason, count, ids..., audit ID.
// Keys: P:audit, P:t:ID, P:handlers, P:ph:H; N:notify.
// Returns per task "ok", "notfound" or "notpending".
var scriptRetryNow = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local n = tonumber(ARGV[5])
local res, todo, ids, seen = {}, {}, {}, {}
for i = 1, n do
  local id = ARGV[5 + i]
  local q, v = Q, look(id)
  if not v then res[i] = 'notfound'
  elseif v[1] ~= 'PENDING' or seen[id] then
    if seen[id] then res[i] = 'ok' else res[i] = 'notpending' end
  else
    seen[id] = true
    res[i] = 'ok'
    todo[#todo+1] = {q, id, v[3]}
    ids[#ids+1] = id
  end
end
if #todo == 0 then return res end
audit(now, ARGV[3], 'retry_now', '', table.concat(ids, ','), #todo, ARGV[4], '')
local queues = {}
for _, t in ipairs(todo) do
  redis.call('HSET', tkey(t[1], t[2]), 'nx', fmt(now), 'up', fmt(now))
  wait(t[1], t[2], t[3], now)
  queues[t[1]] = true
end
for q in pairs(queues) do redis.call('PUBLISH', N .. ':notify', q) end
return res
`)

// scriptCancel moves PENDING tasks to DEAD with a CANCELLED attempt,
// writing its audit entry first when it changes anything.
// ARGV: N, now, actor, reason, error type, message, fingerprint, count,
// ids..., audit ID.
// Keys: P:audit, P:t:ID, P:a:ID, P:handlers, P:ph:H and the dead-letter
// indexes (bury).
// Returns per task "ok", "notfound" or "notpending".
var scriptCancel = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local actor, reason, etype, emsg, efp = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local n = tonumber(ARGV[8])
local res, todo, ids, seen = {}, {}, {}, {}
for i = 1, n do
  local id = ARGV[8 + i]
  local q, v = Q, look(id)
  if not v then res[i] = 'notfound'
  elseif seen[id] then res[i] = 'ok'
  elseif v[1] ~= 'PENDING' then res[i] = 'notpending'
  else
    seen[id] = true
    res[i] = 'ok'
    todo[#todo+1] = {q, id, v[3], tonumber(v[8])}
    ids[#ids+1] = id
  end
end
if #todo == 0 then return res end
audit(now, actor, 'cancel', '', table.concat(ids, ','), #todo, reason, '')
for _, t in ipairs(todo) do
  local q, id = t[1], t[2]
  local k = tkey(q, id)
  unwait(q, id, t[3])
  record(q, id, t[3], t[4], 0, now, now, 'CANCELLED', etype, emsg, '', actor)
  redis.call('HINCRBY', k, 'at', 1)
  redis.call('HSET', k, 'st', 'DEAD', 'fi', fmt(now), 'up', fmt(now), 'et', etype, 'em', emsg, 'ef', efp)
  bury(q, id)
end
flush()
return res
`)

// scriptRegister inserts or refreshes a worker's entry and removes the
// expired entries. KEYS[1] is the registry's prefix N:{~}.
// ARGV: N, now, id, host, pid, version, queues (",a,b,"), handlers
// (",h1,h2,"), slots, in flight, stale after (µs), expire after (µs).
// Keys: N:{~}:workers, N:{~}:w:ID of every worker.
// A worker's hash: host, pid, ver, qs, hs, slots, inflight, started,
// seen (µs), stale and expire (µs).
var scriptRegister = redis.NewScript(prelude + `
local now = clock(ARGV[2])
for _, id in ipairs(redis.call('SMEMBERS', P .. ':workers')) do
  local v = redis.call('HMGET', P .. ':w:' .. id, 'seen', 'expire')
  if not v[1] or now - tonumber(v[1]) >= tonumber(v[2]) then
    redis.call('DEL', P .. ':w:' .. id)
    redis.call('SREM', P .. ':workers', id)
  end
end
local k = P .. ':w:' .. ARGV[3]
local started = redis.call('HGET', k, 'started') or fmt(now)
redis.call('HSET', k, 'host', ARGV[4], 'pid', ARGV[5], 'ver', ARGV[6], 'qs', ARGV[7], 'hs', ARGV[8],
  'slots', ARGV[9], 'inflight', ARGV[10], 'started', started, 'seen', fmt(now), 'stale', ARGV[11], 'expire', ARGV[12])
redis.call('SADD', P .. ':workers', ARGV[3])
return 1
`)

// scriptDeregister removes a worker's entry. KEYS[1] is the registry's
// prefix N:{~}.
// ARGV: N, id. Keys: N:{~}:workers, N:{~}:w:ID.
var scriptDeregister = redis.NewScript(prelude + `
redis.call('DEL', P .. ':w:' .. ARGV[2])
redis.call('SREM', P .. ':workers', ARGV[2])
return 1
`)

// scriptWorkers reads every worker entry. KEYS[1] is the registry's
// prefix N:{~}.
// ARGV: N, now. Keys: N:{~}:workers, N:{~}:w:ID of every worker.
// Returns {now, {id, HGETALL...}...}.
var scriptWorkers = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local out = {fmt(now)}
for _, id in ipairs(redis.call('SMEMBERS', P .. ':workers')) do
  local row = {id}
  for _, f in ipairs(redis.call('HGETALL', P .. ':w:' .. id)) do row[#row+1] = f end
  out[#out+1] = row
end
return out
`)

// scriptUnserved counts the PENDING tasks of each handler of the queue
// (the store keeps the pairs no live worker serves).
// ARGV: N, now, due only ("1"/"0").
// Keys: P:handlers, P:hp:H and P:ph:H.
// Returns {handler, count, oldest due (µs)} per handler with tasks, and
// now first.
var scriptUnserved = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local dueonly = ARGV[3] == '1'
local out = {fmt(now)}
for _, h in ipairs(redis.call('SMEMBERS', P .. ':handlers')) do
  local key = P .. ':ph:' .. h
  local n
  if not dueonly then n = redis.call('ZCARD', key)
  elseif held(Q, h) then n = 0
  else n = redis.call('ZCOUNT', key, '-inf', fmt(now)) end
  if n > 0 then
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    out[#out+1] = {h, n, first[2]}
  end
end
return out
`)

// scriptDeadLetterUnserved moves to DEAD the PENDING tasks of (queue,
// handler) due for at least a grace, each with a PERMANENT_FAILURE
// attempt, writing its audit entry first; the store has checked that no
// live worker serves the pair just before.
// ARGV: N, now, queue, handler, grace (µs), limit, actor, error type,
// message, fingerprint, audit ID.
// Keys: P:audit, P:hp:H, P:ph:H, P:t:ID, P:a:ID and the dead-letter
// indexes (bury).
// Returns the number of tasks moved.
var scriptDeadLetterUnserved = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local q, h = Q, ARGV[4]
if held(q, h) then return 0 end
local ids = redis.call('ZRANGEBYSCORE', qp(q) .. ':ph:' .. h, '-inf', fmt(now - tonumber(ARGV[5])), 'LIMIT', 0, tonumber(ARGV[6]))
if #ids == 0 then return 0 end
local actor, etype, emsg, efp = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
audit(now, actor, 'dead_letter_unserved', '', table.concat(ids, ','), #ids, '', '')
for _, id in ipairs(ids) do
  local k = tkey(q, id)
  unwait(q, id, h)
  record(q, id, h, num(redis.call('HGET', k, 'lf')), 0, now, now, 'PERMANENT_FAILURE', etype, emsg, '', actor)
  redis.call('HINCRBY', k, 'at', 1)
  redis.call('HSET', k, 'st', 'DEAD', 'fi', fmt(now), 'up', fmt(now), 'et', etype, 'em', emsg, 'ef', efp)
  bury(q, id)
end
flush()
return #ids
`)

// scriptPauseHandler pauses a handler of a queue, or reopens it after a
// failed probe, writing its audit entry first when it changes anything.
// While the pause (P:hp:H) exists, claims pass over the handler's waiting
// tasks.
// ARGV: N, now, queue, handler, cool-off (µs; 0 until resumed), has probe
// ("1"/"0"), probe id, probe token, actor, reason, fingerprint, ratio (as
// kept), ratio (as audited, or empty), cool-off (as audited), audit
// filter.
// Keys: P:hp:H, P:hps, P:ph:H, P:audit. The audit ID is the last argument.
// A pause's hash: state, since, probeat (µs, 0 for none), trips, pid,
// ptoken (the probe's lease while half-open), actor, reason, fp, ratio.
// Returns 1 when it changed anything, else 0.
var scriptPauseHandler = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local q, h, cool = ARGV[3], ARGV[4], tonumber(ARGV[5])
local pk = qp(q) .. ':hp:' .. h
local probeat = 0
if cool > 0 then probeat = now + cool end
local trips = 1
if ARGV[6] == '1' then
  local v = redis.call('HMGET', pk, 'state', 'pid', 'ptoken', 'trips')
  if v[1] ~= 'half_open' or v[2] ~= ARGV[7] or tonumber(v[3]) ~= tonumber(ARGV[8]) then return 0 end
  trips = tonumber(v[4]) + 1
elseif redis.call('EXISTS', pk) == 1 then
  return 0
end
local details = nstr('handler') .. nstr(h) .. nstr('trips') .. nstr(fmt(trips)) .. nstr('cool_off') .. nstr(ARGV[14])
if ARGV[11] ~= '' then details = details .. nstr('fingerprint') .. nstr(ARGV[11]) end
if ARGV[13] ~= '' then details = details .. nstr('ratio') .. nstr(ARGV[13]) end
local waiting = redis.call('ZCARD', qp(q) .. ':ph:' .. h)
audit(now, ARGV[9], 'pause_handler', ARGV[15], '', waiting, ARGV[10], details)
if trips == 1 then
  redis.call('HSET', pk, 'since', fmt(now))
  redis.call('SADD', qp(q) .. ':hps', h)
end
redis.call('HSET', pk, 'state', 'open', 'probeat', fmt(probeat), 'trips', fmt(trips), 'pid', '', 'ptoken', '0',
  'actor', ARGV[9], 'reason', ARGV[10], 'fp', ARGV[11], 'ratio', ARGV[12])
return 1
`)

// scriptResumeHandler resumes a paused handler (with a probe's lease, only
// if that probe is the current one), writing its audit entry first: its
// waiting tasks are claimable again.
// ARGV: N, now, queue, handler, has probe ("1"/"0"), probe id, probe
// token, actor, reason, audit filter.
// Keys: P:hp:H, P:hps, P:ph:H, P:audit; N:notify. The audit ID is the
// last argument.
// Returns 1 when it resumed the handler, else 0.
var scriptResumeHandler = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local q, h = ARGV[3], ARGV[4]
local pk = qp(q) .. ':hp:' .. h
local v = redis.call('HMGET', pk, 'state', 'pid', 'ptoken', 'trips')
if not v[1] then return 0 end
if ARGV[5] == '1' and (v[1] ~= 'half_open' or v[2] ~= ARGV[6] or tonumber(v[3]) ~= tonumber(ARGV[7])) then return 0 end
local details = nstr('handler') .. nstr(h) .. nstr('trips') .. nstr(v[4])
if ARGV[5] == '1' then details = details .. nstr('probe') .. nstr(ARGV[6]) end
local waiting = redis.call('ZCARD', qp(q) .. ':ph:' .. h)
audit(now, ARGV[8], 'resume_handler', ARGV[10], '', waiting, ARGV[9], details)
redis.call('DEL', pk)
redis.call('SREM', qp(q) .. ':hps', h)
redis.call('PUBLISH', N .. ':notify', q)
return 1
`)

// scriptClaimProbe leases, for each paused handler of the queues whose
// cool-off has passed and that has no live probe, the due waiting task
// with the fewest attempts (the soonest due among those, of the first
// 1,000 due), and makes the handler half-open with it as its probe. A
// paused queue yields none.
// ARGV: N, now, lease (µs), worker, queue count, queues..., handler
// count, handlers...
// Keys: of each queue P:paused, P:hps, P:hp:H, P:ph:H,
// P:inflight, P:t:ID.
// Returns {HGETALL of the task, HGETALL of the pause, queue, handler}
// per probe.
var scriptClaimProbe = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local lease, worker = tonumber(ARGV[3]), ARGV[4]
local nq = tonumber(ARGV[5])
local nh = tonumber(ARGV[6 + nq])
local only = {}
for j = 1, nh do only[ARGV[6 + nq + j]] = true end
local out = {}
for i = 1, nq do
  local q = ARGV[5 + i]
  if redis.call('EXISTS', qp(q) .. ':paused') == 0 then
    local hs = redis.call('SMEMBERS', qp(q) .. ':hps')
    table.sort(hs)
    for _, h in ipairs(hs) do
      local pk = qp(q) .. ':hp:' .. h
      local v = redis.call('HMGET', pk, 'state', 'probeat', 'pid', 'ptoken')
      local pat = tonumber(v[2] or '0')
      if (nh == 0 or only[h]) and v[1] and pat > 0 and pat <= now then
        local free = v[1] == 'open'
        if not free then
          local pv = redis.call('HMGET', tkey(q, v[3]), 'st', 'tk', 'le')
          free = not (pv[1] == 'IN_FLIGHT' and num(pv[2]) == tonumber(v[4]) and num(pv[3]) > now)
        end
        if free then
          local best, bat, bdue
          local r = redis.call('ZRANGEBYSCORE', qp(q) .. ':ph:' .. h, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, 1000)
          for j = 1, #r, 2 do
            local id, due = r[j], tonumber(r[j+1])
            local at = num(redis.call('HGET', tkey(q, id), 'at'))
            if not best or at < bat or (at == bat and (due < bdue or (due == bdue and id < best))) then
              best, bat, bdue = id, at, due
            end
          end
          if best then
            local k = tkey(q, best)
            unwait(q, best, h)
            local exp = now + lease
            local tk = redis.call('HINCRBY', k, 'tk', 1)
            redis.call('HSET', k, 'st', 'IN_FLIGHT', 'le', fmt(exp), 'lo', worker, 'ca', fmt(now), 'up', fmt(now))
            redis.call('ZADD', qp(q) .. ':inflight', fmt(exp), best)
            redis.call('HSET', pk, 'state', 'half_open', 'pid', best, 'ptoken', fmt(tk))
            out[#out+1] = {redis.call('HGETALL', k), redis.call('HGETALL', pk), q, h}
          end
        end
      end
    end
  end
end
return out
`)

// scriptPausedHandlers reads the paused handlers of the queue.
// ARGV: N. Keys: P:hps, P:hp:H of each.
// Returns {queue, handler, HGETALL} per paused handler.
var scriptPausedHandlers = redis.NewScript(prelude + `
local out = {}
for _, h in ipairs(redis.call('SMEMBERS', P .. ':hps')) do
  out[#out+1] = {Q, h, redis.call('HGETALL', P .. ':hp:' .. h)}
end
return out
`)

// scriptUnindex removes a task's entry from the ID index if it still
// names the queue the store wrote it with (a task the enqueue script did
// not insert).
// KEYS: N:id:ID. ARGV: the queue.
var scriptUnindex = redis.NewScript(`#!lua
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
`)

// scriptWaiting counts handler H's waiting tasks of a queue: all of them
// when the handler is paused (held), else those due after now split by
// whether they were tried in their current life (at > 0: retrying) or
// not (scheduled), walking at most budget of them by due time from rank
// from (-1: the first one not due).
// ARGV: N, now, handler, from, budget.
// Keys: of the queue P:hp:H, P:ph:H, P:t:ID of each task walked.
// Returns {held, retrying, scheduled, next rank (-1: done)}.
var scriptWaiting = redis.NewScript(prelude + `
local now = clock(ARGV[2])
local q, h = Q, ARGV[3]
local from, budget = tonumber(ARGV[4]), tonumber(ARGV[5])
local key = qp(q) .. ':ph:' .. h
if held(q, h) then return {redis.call('ZCARD', key), 0, 0, -1} end
if from < 0 then from = redis.call('ZCOUNT', key, '-inf', fmt(now)) end
local ids = redis.call('ZRANGE', key, from, from + budget - 1)
local r, s = 0, 0
for _, id in ipairs(ids) do
  if num(redis.call('HGET', tkey(q, id), 'at')) > 0 then r = r + 1 else s = s + 1 end
end
local nxt = -1
if #ids == budget then nxt = from + budget end
return {0, r, s, nxt}
`)

// scriptCountDeadQueue counts a queue's dead tasks whose life and message
// match, oldest first from a cursor, examining at most a budget of
// entries: two commands per page of 1,000 (the page of P:dead by rank,
// the HMGET of their P:dm records), never a task's own hash unless it has
// no record (a task buried before P:dm was kept).
// ARGV: N, dead after (µs or empty), dead before (µs or empty), message
// (lower case), life min, life below, cursor finish time (µs or empty),
// cursor ID, budget.
// Keys: of the queue P:dead, P:dm, P:t:ID of a task without a record.
// Returns {count, last examined finish time, last examined ID} (empty when
// the walk is done).
var scriptCountDeadQueue = redis.NewScript(prelude + `
local q, p = Q, P
local key = p .. ':dead'
local msg, lmin, lbelow = ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local cfi, cid, budget = ARGV[7], ARGV[8], tonumber(ARGV[9])
local hi = tonumber(ARGV[3])
-- Pages by rank, which nothing changes while the script runs: each is
-- O(log n) plus its size, however far the walk went.
local rank = 0
if cfi ~= '' then rank = redis.call('ZCOUNT', key, '-inf', '(' .. cfi)
elseif ARGV[2] ~= '' then rank = redis.call('ZCOUNT', key, '-inf', '(' .. ARGV[2]) end
local cf = tonumber(cfi)
local found, seen = 0, 0
local lastfi, lastid = '', ''
while seen < budget do
  local r = redis.call('ZRANGE', key, rank, rank + 999, 'WITHSCORES')
  if #r == 0 then return {found, '', ''} end
  rank = rank + #r / 2
  local ids, ended = {}, false
  for j = 1, #r, 2 do
    local fi = tonumber(r[j+1])
    if hi and fi >= hi then ended = true break end
    if not (cf and fi == cf and r[j] <= cid) then
      ids[#ids+1] = r[j]
      lastfi, lastid = r[j+1], r[j]
    end
  end
  if #ids > 0 then
    local recs = redis.call('HMGET', p .. ':dm', unpack(ids))
    for j = 1, #ids do
      local rec, lf, m = recs[j], 0, ''
      if rec then
        local c = string.find(rec, ':', 1, true)
        lf, m = tonumber(string.sub(rec, 1, c - 1)), string.sub(rec, c + 1)
      else
        local v = redis.call('HMGET', tkey(q, ids[j]), 'lf', 'em')
        lf, m = num(v[1]), string.lower(v[2] or '')
      end
      if (msg == '' or string.find(m, msg, 1, true)) and (lmin <= 0 or lf >= lmin) and
        (lbelow <= 0 or lf < lbelow) then
        found = found + 1
      end
    end
    seen = seen + #ids
  end
  if ended then return {found, '', ''} end
end
return {found, lastfi, lastid}
`)
