-- novaRevokeKey (api-keys.ts): deletes an API key's record and index entry, appends the audit entry.
-- KEYS: record, index, audit. ARGV: key id, audit fields…
-- Returns the record's fields (the hashes it held), or false when the key does not exist.
-- AUDIT_MAX_LENGTH: set by the caller.
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local record = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', AUDIT_MAX_LENGTH, '*', unpack(ARGV, 2))
return record
