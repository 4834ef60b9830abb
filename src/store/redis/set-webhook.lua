-- novaSetWebhook (alerts.ts): adds (ARGV[1] 'add', ARGV[3] the record's JSON) or removes ('remove') the
-- project's webhook ARGV[2], and keeps beside them the union of their thresholds, which
-- quota-batch.lua reads when it settles: in one step, so two changes at once never lose one.
-- KEYS[1] the project's webhooks (id -> JSON), KEYS[2] their thresholds ("0.5,0.8,1").
-- Returns 1 when the webhook was added or removed, 0 when there was none to remove.
local changed
if ARGV[1] == 'add' then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
  changed = 1
else
  changed = redis.call('HDEL', KEYS[1], ARGV[2])
end
local seen, list = {}, {}
for _, json in ipairs(redis.call('HVALS', KEYS[1])) do
  for _, t in ipairs(cjson.decode(json).thresholds or {}) do
    if not seen[t] then seen[t], list[#list + 1] = true, t end
  end
end
if #list == 0 then
  redis.call('DEL', KEYS[2])
else
  table.sort(list)
  for i, t in ipairs(list) do list[i] = tostring(t) end
  redis.call('SET', KEYS[2], table.concat(list, ','))
end
return changed
