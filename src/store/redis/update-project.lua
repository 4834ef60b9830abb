-- novaUpdateProject (project-settings.ts): changes fields of an existing project and appends the
-- audit entry, atomically; a missing project stays missing (no partial record is created).
-- KEYS: project hash, audit stream.
-- ARGV[1]: a JSON object {fields: {name: value}, audit: [field, value, …] (the stream entry)}.
-- Returns the project's fields ([field, value, …]), or false when it does not exist.
-- AUDIT_MAX_LENGTH: set by the caller.
local PROJECT, AUDIT = KEYS[1], KEYS[2]
if redis.call('EXISTS', PROJECT) == 0 then return false end
local Q = cjson.decode(ARGV[1])
local set = {}
for name, value in pairs(Q.fields) do
  set[#set + 1] = name
  set[#set + 1] = value
end
redis.call('HSET', PROJECT, unpack(set))
redis.call('XADD', AUDIT, 'MAXLEN', '~', AUDIT_MAX_LENGTH, '*', unpack(Q.audit))
return redis.call('HGETALL', PROJECT)
