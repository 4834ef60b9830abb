-- novaTouchKey (api-keys.ts): sets last_used_at of a key that still exists.
-- KEYS: record. ARGV: last_used_at ISO.
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'last_used_at', ARGV[1]) end
return 1
