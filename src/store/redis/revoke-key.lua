-- novaRevokeKey (api-keys.ts): deletes an API key's record and index entry, appends the audit entry.
-- KEYS: record, index, audit.
-- ARGV[1]: a JSON object {keyId, audit: [field, value, …] (the stream entry)}.
-- Returns the record's fields ([field, value, …]: the hashes it held), or false when the key does
-- not exist.
-- AUDIT_MAX_LENGTH: set by the caller.
local RECORD, INDEX, AUDIT = KEYS[1], KEYS[2], KEYS[3]
if redis.call('EXISTS', RECORD) == 0 then return false end
local Q = cjson.decode(ARGV[1])
local record = redis.call('HGETALL', RECORD)
redis.call('DEL', RECORD)
redis.call('ZREM', INDEX, Q.keyId)
redis.call('XADD', AUDIT, 'MAXLEN', '~', AUDIT_MAX_LENGTH, '*', unpack(Q.audit))
return record
