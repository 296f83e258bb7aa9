-- wrk script: POST /api/v1/kv with the same ops as bench/pgbench/kv_*.sql.
--
--   wrk -t2 -c32 -d5s --latency -s bench/kv.lua http://127.0.0.1:55461 -- OP
--
-- OP: put | get | incr | pia | pia_new | mix | batch25
--   put      {"op":"put"} of a small object, 100k keys, ns bench_put
--   get      {"op":"get"} over the 100k seeded counters, ns bench
--   incr     {"op":"incr","delta":1} over the same counters
--   pia      putIfAbsent over the seeded keys (verdict: exists)
--   pia_new  putIfAbsent of a fresh marker (key drawn from 1e9, 1 h TTL)
--   mix      per request: 60% incr / 30% get / 10% pia
--   batch25  25 ops per request drawn as in mix, keys base + i*4001 mod 100000
--            (distinct: a key is written at most once per call)
-- done() prints one line "WRKRESULT key=value ..." that bench/run.sh parses;
-- latencies are in microseconds, measured by wrk per request.

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
  table.insert(threads, thread)
end

local op = "mix"
local headers = { ["Content-Type"] = "application/json" }
local path = "/api/v1/kv"

local function one(kind, k)
  if kind == "put" then
    return string.format('{"op":"put","ns":"bench_put","key":"k%d","value":{"n":%d,"s":"bench"},"forever":true}', k, k)
  elseif kind == "get" then
    return string.format('{"op":"get","ns":"bench","key":"k%d"}', k)
  elseif kind == "incr" then
    return string.format('{"op":"incr","ns":"bench","key":"k%d","delta":1,"forever":true}', k)
  elseif kind == "pia" then
    return string.format('{"op":"putIfAbsent","ns":"bench","key":"k%d","value":true,"forever":true}', k)
  elseif kind == "pia_new" then
    return string.format('{"op":"putIfAbsent","ns":"bench_marker","key":"m%d","value":true,"ttlSeconds":3600}', k)
  end
end

local function drawn()
  local r = math.random()
  if r < 0.6 then return "incr" elseif r < 0.9 then return "get" else return "pia" end
end

function init(args)
  op = args[1] or "mix"
  math.randomseed(os.time() * 1000 + (tid or 0) * 7919)
end

function request()
  local body
  if op == "batch25" then
    local base = math.random(0, 99999)
    local parts = {}
    for i = 0, 24 do
      parts[#parts + 1] = one(drawn(), (base + i * 4001) % 100000)
    end
    body = '{"operations":[' .. table.concat(parts, ",") .. ']}'
  elseif op == "mix" then
    body = '{"operations":[' .. one(drawn(), math.random(0, 99999)) .. ']}'
  elseif op == "pia_new" then
    body = '{"operations":[' .. one(op, math.random(1, 1000000000)) .. ']}'
  else
    body = '{"operations":[' .. one(op, math.random(0, 99999)) .. ']}'
  end
  return wrk.format("POST", path, headers, body)
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRKRESULT requests=%d duration_us=%d p50_us=%d p99_us=%d mean_us=%.1f max_us=%d " ..
    "err_connect=%d err_read=%d err_write=%d err_status=%d err_timeout=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency.mean, latency.max, e.connect, e.read, e.write, e.status, e.timeout))
end
