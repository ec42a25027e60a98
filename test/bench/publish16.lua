-- wrk script of the pair benchmarks: POST /publish, each connection spreading
-- its publishes over 16 streams (s0..s15).
local threads = 0
function setup(thread) thread:set("tid", threads); threads = threads + 1 end
local n = 0
request = function()
  n = n + 1
  return wrk.format("POST", "/publish?stream=s" .. ((n + tid * 7) % 16), {["Content-Type"]="application/json"},
                    '{"n":1,"pad":"abcdefghijklmnopqrstuvwxyz"}')
end
