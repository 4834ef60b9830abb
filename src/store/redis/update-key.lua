-- novaUpdateKey (api-keys.ts): changes an API key's fields and appends the audit entry, in one step,
-- so a key is never half-updated.
-- KEYS: record, audit.
-- ARGV[1]: a JSON object {fields: [field, value, …] (the hash fields to set), audit: [field, value, …]}.
-- Returns the key's fields as [field, value, …], or false when the key does not exist.
-- AUDIT_MAX_LENGTH: set by the caller.
local RECORD, AUDIT = KEYS[1], KEYS[2]
if redis.call('EXISTS', RECORD) == 0 then return false end
local Q = cjson.decode(ARGV[1])
redis.call('HSET', RECORD, unpack(Q.fields))
redis.call('XADD', AUDIT, 'MAXLEN', '~', AUDIT_MAX_LENGTH, '*', unpack(Q.audit))
return redis.call('HGETALL', RECORD)
