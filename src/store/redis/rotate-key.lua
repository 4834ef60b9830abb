-- novaRotateKey (api-keys.ts): gives an API key a new secret hash and appends the audit entry.
-- KEYS: record, index, audit.
-- ARGV[1]: a JSON object {hash (the new secret's), keepPrevious (true: the old hash stays valid
--   until previousExpiresAt, an ISO time), previousExpiresAt, redactedValue, audit: [field, value, …]}.
-- Returns a JSON object {previousHash, olderHash ('' for none), record (the key's fields)}, or
-- false when the key does not exist.
-- AUDIT_MAX_LENGTH: set by the caller.
local RECORD, AUDIT = KEYS[1], KEYS[3]
if redis.call('EXISTS', RECORD) == 0 then return false end
local Q = cjson.decode(ARGV[1])
local old = redis.call('HMGET', RECORD, 'hash', 'prev_hash')
if Q.keepPrevious then
  redis.call('HSET', RECORD, 'hash', Q.hash, 'prev_hash', old[1], 'previous_secret_expires_at', Q.previousExpiresAt)
else
  redis.call('HSET', RECORD, 'hash', Q.hash, 'prev_hash', '', 'previous_secret_expires_at', '')
end
redis.call('HSET', RECORD, 'redacted_value', Q.redactedValue)
redis.call('XADD', AUDIT, 'MAXLEN', '~', AUDIT_MAX_LENGTH, '*', unpack(Q.audit))
local record, fields = {}, redis.call('HGETALL', RECORD)
for i = 1, #fields, 2 do record[fields[i]] = fields[i + 1] end
return cjson.encode({previousHash = old[1], olderHash = old[2] or '', record = record})
