-- KEYS[1] marker, KEYS[2] event stream; ARGV[1] marker ttl ms, ARGV[2] stream max length, ARGV[3] event JSON.
-- The marker and the event go together: an event meant once is never lost to a set marker, nor sent twice.
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'event', ARGV[3])
  return 1
end
return 0
