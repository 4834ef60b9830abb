-- novaStorageBytes (usage.ts).
-- KEYS: storage total, expiry index, sizes, conversation bytes held.
-- Returns the storage total after freeing what expired.
-- reconcile() and PRUNE_LIMIT: set before this by the caller.
reconcile(KEYS[1], KEYS[2], KEYS[3], KEYS[4], PRUNE_LIMIT)
return tonumber(redis.call('GET', KEYS[1]) or '0')
