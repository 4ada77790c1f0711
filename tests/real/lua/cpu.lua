-- cpu.lua - a CPU-bound Lua loop beside a ticker goroutine (a gmp.sleep
-- loop). The loop calls nothing that gives up the P: it reads the
-- ticker's count from an atomic, which never switches. At procs 1 with
-- preemption by signal off the ticker can only tick while the loop runs
-- if the count hook gives the P away. The loop runs until it has seen nt
-- ticks, or for nmax iterations at most (a starved ticker is then a
-- failed check, not a hang).
-- Returns the iterations, the ticks seen, the loop's checksum, the
-- ticker's worst lateness in seconds and its ticks in all.
--   gmplua -p 1 cpu.lua [nt [nmax [tick seconds]]]
local nt, nmax, tick = ...
nt = math.tointeger(tonumber(nt or 3))
nmax = math.tointeger(tonumber(nmax or 200000000))
tick = tonumber(tick or 0.0002)

local ticks, stop, report = gmp.atomic(), gmp.atomic(), gmp.chan(1)
gmp.go(function(ticks, stop, report, tick)
  local worst = 0
  while stop:load() == 0 do
    local t = gmp.now()
    gmp.sleep(tick)
    local late = gmp.now() - t - tick
    if late > worst then worst = late end
    ticks:add(1)
  end
  report:send(worst)
end, ticks, stop, report, tick)

local n, acc = 0, 0
while ticks:load() < nt and n < nmax do
  for _ = 1, 1000 do
    n = n + 1
    acc = (acc * 31 + n) % 1000000007
  end
end
local seen = ticks:load()
stop:store(1)
local worst = report:recv()
return n, seen, acc, worst, ticks:load()
