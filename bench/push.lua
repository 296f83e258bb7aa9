-- wrk script: POST /api/v1/push, N messages per request over 16 partitions.
--
--   wrk -t2 -c32 -d5s --latency -s bench/push.lua http://127.0.0.1:55461 -- N
--
-- Each request pushes N items to queue bench_push, partition p<0..15> drawn
-- per request (a push call locks the partitions it writes), payload a small
-- object. No transactionId: every message is new. done() prints the same
-- WRKRESULT line as bench/kv.lua; run.sh counts messages (requests x N).

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
  table.insert(threads, thread)
end

local n = 1
local headers = { ["Content-Type"] = "application/json" }

function init(args)
  n = tonumber(args[1] or "1") or 1
  math.randomseed(os.time() * 1000 + (tid or 0) * 7919)
end

function request()
  local partition = math.random(0, 15)
  local items = {}
  for i = 1, n do
    items[i] = string.format('{"queue":"bench_push","partition":"p%d","payload":{"n":%d,"s":"bench"}}',
                             partition, i)
  end
  return wrk.format("POST", "/api/v1/push", headers, '{"items":[' .. table.concat(items, ",") .. ']}')
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRKRESULT requests=%d duration_us=%d p50_us=%d p99_us=%d mean_us=%.1f max_us=%d " ..
    "err_connect=%d err_read=%d err_write=%d err_status=%d err_timeout=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.mean, latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
