-- novaHashOf (api-keys.ts): the secret hash a key's record holds now.
-- KEYS: record.
return redis.call('HGET', KEYS[1], 'hash')
