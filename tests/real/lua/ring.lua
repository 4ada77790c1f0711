-- ring.lua - n goroutines in a ring: each receives from the unbuffered
-- channel on its left and sends to the one on its right. k tokens, each
-- an integer counting its hops, go round `laps` times: n * k * laps
-- messages. The last goroutine takes a token that has done its laps out
-- of the ring; each goroutine passes exactly k * laps and reports it.
-- Returns the messages passed (the goroutines' counts summed), the sum of
-- the tokens' final values, and how many tokens came back.
--   gmplua ring.lua [n [k [laps]]]      (default 10000 10 10)
local n, k, laps = ...
n = math.tointeger(tonumber(n or 10000))
k = math.tointeger(tonumber(k or 10))
laps = math.tointeger(tonumber(laps or 10))
assert(n and k and laps and k < n, "usage: ring.lua [n [k [laps]]], k < n")

local ring = {}
for i = 1, n do ring[i] = gmp.chan() end
local done, counts = gmp.chan(k), gmp.chan(n)
local t0 = gmp.now()
for i = 1, n do
  gmp.go(function(left, right, last, done, counts, passes, goal)
    local passed = 0
    for _ = 1, passes do
      local v = left:recv() + 1
      passed = passed + 1
      if last and v == goal then done:send(v) else right:send(v) end
    end
    counts:send(passed)
  end, ring[i], ring[i % n + 1], i == n, done, counts, k * laps, n * laps)
end
for _ = 1, k do ring[1]:send(0) end

local sum, back = 0, 0
for _ = 1, k do
  local v = done:recv()
  assert(v == n * laps, ("a token came back at %d, want %d"):format(v,
                                                                    n * laps))
  sum, back = sum + v, back + 1
end
local passed = 0
for _ = 1, n do passed = passed + counts:recv() end
print(("ring: %d goroutines, %d messages, procs %d, %.2f s"):format(
  n, passed, gmp.procs(), gmp.now() - t0))
return passed, sum, back
