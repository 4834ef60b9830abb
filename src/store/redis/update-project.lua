-- novaUpdateProject (project-settings.ts): changes fields of an existing project and appends the
-- audit entry, atomically; a missing project stays missing (no partial record is created).
-- KEYS: project hash, audit stream. ARGV: number of field/value pairs, the pairs, audit fields…
-- Returns the project's fields, or false when it does not exist.
-- AUDIT_MAX_LENGTH: set by the caller.
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local n = tonumber(ARGV[1])
redis.call('HSET', KEYS[1], unpack(ARGV, 2, 1 + n * 2))
redis.call('XADD', KEYS[2], 'MAXLEN', '~', AUDIT_MAX_LENGTH, '*', unpack(ARGV, 2 + n * 2))
return redis.call('HGETALL', KEYS[1])
