-- novaSetWebhook (alerts.ts): adds (Q.change 'add', Q.record the record's JSON) or removes ('remove')
-- the project's webhook Q.id, appends the audit entry (Q.audit: [field, value, …]), and keeps beside
-- the webhooks the union of their thresholds, which quota-batch.lua reads when it settles: in one
-- step, so two changes at once never lose one.
-- KEYS[1] the project's webhooks (id -> JSON), KEYS[2] their thresholds ("0.5,0.8,1"), KEYS[3] the
-- project's audit stream. ARGV[1]: Q as JSON.
-- Returns 1 when the webhook was added or removed, 0 (and no audit entry) when there was none to remove.
-- AUDIT_MAX_LENGTH: set by the caller.
local Q = cjson.decode(ARGV[1])
local changed
if Q.change == 'add' then
  redis.call('HSET', KEYS[1], Q.id, Q.record)
  changed = 1
else
  changed = redis.call('HDEL', KEYS[1], Q.id)
end
if changed == 0 then return 0 end
redis.call('XADD', KEYS[3], 'MAXLEN', '~', AUDIT_MAX_LENGTH, '*', unpack(Q.audit))
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
