-- novaRotateKey (api-keys.ts): gives an API key a new secret hash and appends the audit entry.
-- KEYS: record, index, audit. ARGV: new hash, previous expiry ISO or '', keep previous (1/0),
-- redacted value, audit fields…
-- Returns {old hash, older hash or '', the record's fields}, or false when the key does not exist.
-- AUDIT_MAX_LENGTH: set by the caller.
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local old = redis.call('HMGET', KEYS[1], 'hash', 'prev_hash')
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'hash', ARGV[1], 'prev_hash', old[1], 'previous_secret_expires_at', ARGV[2])
else
  redis.call('HSET', KEYS[1], 'hash', ARGV[1], 'prev_hash', '', 'previous_secret_expires_at', '')
end
redis.call('HSET', KEYS[1], 'redacted_value', ARGV[4])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', AUDIT_MAX_LENGTH, '*', unpack(ARGV, 5))
return {old[1], old[2] or '', redis.call('HGETALL', KEYS[1])}
