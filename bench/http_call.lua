-- bench/http_call.lua -- wrk script for bench/http.sh: every request is a
-- per-key call, POST /v1/queues/<Q>/keys/k<i>/call with a V-byte payload,
-- the key drawn at random among K (env Q, K, V as the script sets them).
local queue = os.getenv("Q") or "httpbench"
local keys = tonumber(os.getenv("K") or "1000")
local payload = string.rep("p", tonumber(os.getenv("V") or "64"))

function setup(thread)
  thread:set("seed", math.random(1, 1000000))
end

function init(args)
  math.randomseed(seed or os.time())
end

request = function()
  local k = math.random(1, keys)
  return wrk.format("POST", "/v1/queues/" .. queue .. "/keys/k" .. k .. "/call", nil, payload)
end
