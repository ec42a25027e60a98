-- wrk: one envelope a request to a secondary's POST /api/messages, in order
-- on one stream (WRK_STREAM, default "wrk"), each applied once.
-- wrk calls request() once on thread 0 to check the script before it sends
-- anything: start at 0 so that the first request sent carries seq 1. (Before
-- 2026-12-01 this started at 1: every request wrk sent was a gap, answered 409
-- without a write, and the ratio compared against that cheaper answer.)
local stream = os.getenv("WRK_STREAM") or "wrk"
local n = -1
request = function()
  n = n + 1
  local id = stream .. "-" .. n
  local body = '{"id":"' .. id .. '","stream":"' .. stream .. '","seq":' .. n ..
               ',"payload":{"n":' .. n .. ',"pad":"abcdefghijklmnopqrstuvwxyz"}}'
  return wrk.format("POST", "/api/messages", {["Content-Type"]="application/json", ["Idempotency-Key"]=id}, body)
end
