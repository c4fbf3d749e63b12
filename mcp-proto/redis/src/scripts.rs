//! The Lua scripts of the store, and their names ([`ScriptId`]).
//!
//! Every script is prefixed with [`RENEW`]'s helpers. The key layout they work on is in the
//! crate docs; each constant says its `KEYS` and `ARGV` beyond the five keys and two
//! arguments every invocation starts with (`plan::Planner` builds those).

/// The server's clock in ms (Lua), and the renewal of a record, its log, its hash and its
/// unfinished request streams: KEYS\[1\] record, \[2\] sessions, \[3\] log, \[4\] meta, \[5\] the set
/// of its request streams (`<prefix>:rss:<id>`); ARGV\[1\] id, ARGV\[2\] ttl ms (0: none). The
/// streams' keys are named from KEYS\[5\] (one Redis, not Redis Cluster). A finished stream
/// keeps its retention expiry; the names of streams gone are dropped from the set.
const RENEW: &str = r"
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function stream_keys(name)
  local base = string.sub(KEYS[5], 1, #KEYS[5] - #ARGV[1] - 5)
  local tail = ':' .. ARGV[1] .. ':' .. name
  return base .. ':rs' .. tail, base .. ':rsm' .. tail
end
local function renew_streams(ttl)
  for _, name in ipairs(redis.call('SMEMBERS', KEYS[5])) do
    local l, m = stream_keys(name)
    if redis.call('EXISTS', m) == 0 then
      redis.call('SREM', KEYS[5], name)
    elseif redis.call('HEXISTS', m, 'finished') == 0 then
      if ttl > 0 then
        redis.call('PEXPIRE', l, ttl)
        redis.call('PEXPIRE', m, ttl)
      else
        redis.call('PERSIST', l)
        redis.call('PERSIST', m)
      end
    end
  end
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[5], ttl)
  else
    redis.call('PERSIST', KEYS[5])
  end
end
local function renew(ttl)
  renew_streams(ttl)
  if ttl > 0 then
    redis.call('PEXPIRE', KEYS[1], ttl)
    redis.call('PEXPIRE', KEYS[3], ttl)
    redis.call('PEXPIRE', KEYS[4], ttl)
    redis.call('ZADD', KEYS[2], now_ms() + ttl, ARGV[1])
  else
    redis.call('PERSIST', KEYS[1])
    redis.call('PERSIST', KEYS[3])
    redis.call('PERSIST', KEYS[4])
    redis.call('ZADD', KEYS[2], '+inf', ARGV[1])
  end
end
";

/// Create: KEYS\[1\] record, \[2\] sessions (no other: a new session has no log, hash nor
/// request streams yet); ARGV\[3\] record, ARGV\[4\] cap. 1 created, 0 at capacity, -1 the
/// id is taken. Only the record and its place in the sessions set get its expiry (what
/// `renew` would do, in a third of its commands). The set's expired members are dropped
/// when they would count against the cap (so they are never more than the cap).
const CREATE: &str = r"
local ttl = tonumber(ARGV[2])
local now = now_ms()
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
local cap = tonumber(ARGV[4])
if redis.call('ZCARD', KEYS[2]) >= cap then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= cap then return 0 end
end
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ttl)
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('ZADD', KEYS[2], '+inf', ARGV[1])
end
return 1
";

/// Save: ARGV\[3\] record, ARGV\[4\] bus channel, ARGV\[5\] the bus message (`SessionSaved`,
/// published only when saved). 1 saved, 0 missing.
const SAVE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[3])
renew(tonumber(ARGV[2]))
redis.call('PUBLISH', ARGV[4], ARGV[5])
return 1
";

/// Touch. 1 renewed, 0 missing.
const TOUCH: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
renew(tonumber(ARGV[2]))
return 1
";

/// Delete: ARGV\[3\] bus channel, ARGV\[4\] the bus message.
const DELETE: &str = r"
for _, name in ipairs(redis.call('SMEMBERS', KEYS[5])) do
  local l, m = stream_keys(name)
  redis.call('DEL', l, m)
end
redis.call('DEL', KEYS[1], KEYS[3], KEYS[4], KEYS[5])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
";

/// Publish: ARGV\[3\] payload, ARGV\[4\] capacity, ARGV\[5\] wake channel, ARGV\[6\] the
/// publisher (the link's owner name), ARGV\[7\] its ticket, ARGV\[8\] `1` when the entry
/// carries a gap (field `g`: a message before it was lost). The seq, 0 missing. Idempotent:
/// the meta hash keeps each publisher's last ticket (`o:<owner>`); a ticket not above it was
/// applied already (a link's tickets grow, and one session's publishes are applied in
/// submission order), so a repeat appends nothing and answers the log's last seq.
const PUBLISH: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local done = redis.call('HGET', KEYS[4], 'o:' .. ARGV[6])
if done and tonumber(ARGV[7]) <= tonumber(done) then
  return tonumber(redis.call('HGET', KEYS[4], 'last') or 0)
end
redis.call('HSET', KEYS[4], 'o:' .. ARGV[6], ARGV[7])
local seq = redis.call('HINCRBY', KEYS[4], 'last', 1)
if ARGV[8] == '1' then
  redis.call('XADD', KEYS[3], 'MAXLEN', '=', ARGV[4], seq .. '-0', 'p', ARGV[3], 'g', '1')
else
  redis.call('XADD', KEYS[3], 'MAXLEN', '=', ARGV[4], seq .. '-0', 'p', ARGV[3])
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[3], ttl)
  redis.call('PEXPIRE', KEYS[4], ttl)
end
redis.call('PUBLISH', ARGV[5], seq)
return seq
";

/// Delivered: ARGV\[3\] seq. 1 moved (or kept), 0 missing.
const DELIVERED: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local cur = tonumber(redis.call('HGET', KEYS[4], 'cursor') or '0') or 0
if tonumber(ARGV[3]) > cur then redis.call('HSET', KEYS[4], 'cursor', ARGV[3]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[4], ttl) end
return 1
";

/// CommitStreams: KEYS\[6\] the owner's liveness key, then two per stream: its log and its
/// hash; ARGV\[3\] owner, ARGV\[4\] liveness TTL ms, then per stream: its name, its requests
/// (JSON; empty: the stream is registered already), retention ms (0: not ended), wake
/// channel, the number of its events, then three per event: seq, payload, the answered
/// request's field (`a:<id JSON>`, empty: none). Each stream's writes are applied in that
/// order: the registration (replacing a stream of the name; none without the session), the
/// events (one at or below the log's last is there already, from a retry, and is not added
/// again), the end; a stream neither registered nor registering is passed over. The number
/// of streams committed.
const COMMIT_STREAMS: &str = r"
local function commit(log, hash, name, requests, retain, wake, first, n)
  if requests ~= '' then
    if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
    redis.call('DEL', log, hash)
    redis.call('HSET', hash, 'owner', ARGV[3], 'requests', requests)
    redis.call('SADD', KEYS[5], name)
    redis.call('SET', KEYS[6], '1', 'PX', ARGV[4])
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 0 then
      redis.call('PEXPIRE', hash, ttl)
      redis.call('PEXPIRE', KEYS[5], ttl)
    else
      redis.call('PERSIST', KEYS[5])
    end
  elseif redis.call('EXISTS', hash) == 0 then
    return 0
  end
  local last = nil
  for i = first, first + 3 * (n - 1), 3 do
    if ARGV[i + 2] ~= '' then redis.call('HSET', hash, ARGV[i + 2], '1') end
    if last == nil then
      local top = redis.call('XREVRANGE', log, '+', '-', 'COUNT', 1)
      last = 0
      if #top > 0 then last = tonumber(string.match(top[1][1], '^(%d+)')) or 0 end
    end
    local seq = tonumber(ARGV[i])
    if seq > last then
      redis.call('XADD', log, seq .. '-0', 'p', ARGV[i + 1])
      last = seq
    end
  end
  if retain > 0 then
    redis.call('HSET', hash, 'finished', '1')
    redis.call('PEXPIRE', hash, retain)
    redis.call('PEXPIRE', log, retain)
  elseif n > 0 then
    local ttl
    if redis.call('HEXISTS', hash, 'finished') == 0 then
      ttl = redis.call('PTTL', KEYS[1])
    else
      ttl = redis.call('PTTL', hash)
    end
    if ttl > 0 then redis.call('PEXPIRE', log, ttl) end
  end
  if n > 0 or retain > 0 then redis.call('PUBLISH', wake, 'c') end
  return 1
end
local committed = 0
local a = 5
local k = 7
while a <= #ARGV do
  local n = tonumber(ARGV[a + 4])
  committed = committed + commit(KEYS[k], KEYS[k + 1], ARGV[a], ARGV[a + 1],
    tonumber(ARGV[a + 2]), ARGV[a + 3], a + 5, n)
  a = a + 5 + 3 * n
  k = k + 2
end
return committed
";

/// A request stream's state: KEYS\[6\] log, \[7\] hash; ARGV\[3\] after, ARGV\[4\] count, ARGV\[5\]
/// the liveness keys' prefix. `{0}`: no such session or stream; else `{1, owner alive (0/1),
/// the hash (HGETALL), the events after (XRANGE)}`.
const STREAM_READ: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('EXISTS', KEYS[7]) == 0 then return {0} end
local h = redis.call('HGETALL', KEYS[7])
local owner = ''
for i = 1, #h, 2 do
  if h[i] == 'owner' then owner = h[i + 1] end
end
local alive = redis.call('EXISTS', ARGV[5] .. owner)
local events = redis.call('XRANGE', KEYS[6], '(' .. ARGV[3] .. '-0', '+', 'COUNT', ARGV[4])
return {1, alive, h, events}
";

/// What RecordLoad and a refused RecordSave answer: `{0}` (no record) or
/// `{1, version, bytes, alive}` (alive: 1, 0, or -1 for no owner); KEYS\[1\] the record's
/// hash (`v`, `d`, `o`), ARGV\[1\] the liveness keys' prefix.
const READ_RECORD: &str = r"
local function read_record()
  local r = redis.call('HMGET', KEYS[1], 'v', 'd', 'o')
  if not r[1] then return {0} end
  local alive = -1
  if r[3] and r[3] ~= '' then alive = redis.call('EXISTS', ARGV[1] .. r[3]) end
  return {1, tonumber(r[1]), r[2], alive}
end
";

/// RecordLoad: KEYS\[1\] the record, ARGV\[1\] the liveness keys' prefix.
const RECORD_LOAD: &str = r"
return read_record()
";

/// RecordSave: KEYS\[1\] the record, KEYS\[2\] the writer's liveness key; ARGV\[1\] the
/// liveness keys' prefix, \[2\] the guard (0: absent, else the version), \[3\] the bytes,
/// \[4\] the owner to set ('' keeps it), \[5\] the TTL ms on creation (0: none), \[6\] the
/// liveness TTL ms. `{2, version}` saved, else what RecordLoad answers.
const RECORD_SAVE: &str = r"
local v = redis.call('HGET', KEYS[1], 'v')
local guard = tonumber(ARGV[2])
if (guard == 0 and v) or (guard ~= 0 and ((not v) or tonumber(v) ~= guard)) then
  return read_record()
end
local nv = (v and tonumber(v) or 0) + 1
redis.call('HSET', KEYS[1], 'v', nv, 'd', ARGV[3])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'o', ARGV[4])
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[6])
end
if (not v) and tonumber(ARGV[5]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
return {2, nv}
";

/// Names one of the store's scripts (what a planned [`ScriptCall`](crate::plan::ScriptCall)
/// invokes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScriptId {
    Create,
    Save,
    Touch,
    Delete,
    Publish,
    Delivered,
    CommitStreams,
    StreamRead,
    RecordLoad,
    RecordSave,
}

/// The scripts, their SHA1s computed once.
pub(crate) struct Scripts {
    create: redis::Script,
    save: redis::Script,
    touch: redis::Script,
    delete: redis::Script,
    publish: redis::Script,
    delivered: redis::Script,
    commit_streams: redis::Script,
    stream_read: redis::Script,
    record_load: redis::Script,
    record_save: redis::Script,
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        let s = |body: &str| redis::Script::new(&format!("{RENEW}{body}"));
        Scripts {
            create: s(CREATE),
            save: s(SAVE),
            touch: s(TOUCH),
            delete: s(DELETE),
            publish: s(PUBLISH),
            delivered: s(DELIVERED),
            commit_streams: s(COMMIT_STREAMS),
            stream_read: s(STREAM_READ),
            record_load: s(&format!("{READ_RECORD}{RECORD_LOAD}")),
            record_save: s(&format!("{READ_RECORD}{RECORD_SAVE}")),
        }
    }

    /// The script `id` names.
    pub(crate) fn get(&self, id: ScriptId) -> &redis::Script {
        match id {
            ScriptId::Create => &self.create,
            ScriptId::Save => &self.save,
            ScriptId::Touch => &self.touch,
            ScriptId::Delete => &self.delete,
            ScriptId::Publish => &self.publish,
            ScriptId::Delivered => &self.delivered,
            ScriptId::CommitStreams => &self.commit_streams,
            ScriptId::StreamRead => &self.stream_read,
            ScriptId::RecordLoad => &self.record_load,
            ScriptId::RecordSave => &self.record_save,
        }
    }

    /// Every script (loaded on every connection before any operation runs).
    pub(crate) fn all(&self) -> [&redis::Script; 10] {
        [
            &self.create,
            &self.save,
            &self.touch,
            &self.delete,
            &self.publish,
            &self.delivered,
            &self.commit_streams,
            &self.stream_read,
            &self.record_load,
            &self.record_save,
        ]
    }
}
