-- wrk script of test/bench/floor.sh: POST /api/messages straight to a
-- secondary, one message a request, each thread (one connection) its own
-- stream with its own seqs.
local threads = 0
function setup(thread) thread:set("tid", threads); threads = threads + 1 end
local n
request = function()
  -- wrk calls request() once on thread 0 to check the script before sending:
  -- thread 0 starts one lower so that its first request sent carries seq 1.
  if n == nil then n = (tid == 0) and -1 or 0 end
  n = n + 1
  local body = '{"id":"w' .. tid .. '-' .. n .. '","stream":"t' .. tid .. '","seq":' .. n ..
               ',"payload":{"n":1,"pad":"abcdefghijklmnopqrstuvwxyz"}}'
  return wrk.format("POST", "/api/messages", {["Content-Type"]="application/json"}, body)
end
