-- bench/http_call.lua -- wrk script for bench/http.sh: every request is a
-- per-key call, POST /v1/queues/<Q>/keys/k<i>/call with a V-byte payload,
-- the key drawn at random among K (env Q, K, V as the script sets them).
--
-- The K requests are formatted once per thread (init) and each request
-- picks one, as redis-benchmark builds its command once and only rewrites
-- the random digits: formatting per request cost wrk about 14,300
-- instructions a call against redis-benchmark's 5,000 for its Q.CALL
-- (callgrind), CPU the two cores of the bench machine share with ordod.
-- Picked so, wrk costs about 4,100.
--
-- STOP=n (bench/instr_http.sh): each thread stops after n responses, so a
-- counted phase makes a fixed number of calls. Unset, no response() is
-- defined, and wrk reads no response in Lua.
local queue = os.getenv("Q") or "httpbench"
local keys = tonumber(os.getenv("K") or "1000")
local payload = string.rep("p", tonumber(os.getenv("V") or "64"))
local requests = {}
local stop = tonumber(os.getenv("STOP") or "0")

function setup(thread)
  thread:set("seed", math.random(1, 1000000))
end

function init(args)
  math.randomseed(seed or os.time())
  for k = 1, keys do
    requests[k] = wrk.format("POST", "/v1/queues/" .. queue .. "/keys/k" .. k .. "/call", nil, payload)
  end
end

request = function()
  return requests[math.random(1, keys)]
end

if stop > 0 then
  local got = 0
  response = function()
    got = got + 1
    if got == stop then
      wrk.thread:stop()
    end
  end
end
