-- sync.lua - closing channels, select, wait groups, atomics, sleep.
-- Returns the number of checks.
local checks = 0
local function check(cond, what)
  checks = checks + 1
  if not cond then error("check failed: " .. what, 2) end
end
local function fails(pattern, f, ...)
  local ok, err = pcall(f, ...)
  check(not ok and tostring(err):find(pattern, 1, true),
        "error '" .. pattern .. "', got " .. tostring(err))
end

-- Close: buffered values first, then nil, false for ever.
local c = gmp.chan(3)
c:send(1)
c:send(2)
c:close()
local v, ok = c:recv()
check(v == 1 and ok, "first after close")
v, ok = c:recv()
check(v == 2 and ok, "second after close")
for _ = 1, 2 do
  v, ok = c:recv()
  check(v == nil and ok == false, "closed and drained")
end
fails("send on closed channel", c.send, c, 3)
fails("close of closed channel", c.close, c)
local n1 = gmp.chan(1)
n1:send(nil)
v, ok = n1:recv()
check(v == nil and ok == true, "nil is a value")
check(#n1 == 0 and n1:cap() == 1, "len and cap")

-- Receivers on an unbuffered channel, waiting or not yet: all get
-- nil, false from its close.
local u, results = gmp.chan(), gmp.chan(8)
for _ = 1, 8 do
  gmp.go(function(u, results)
    results:send(table.pack(u:recv()))
  end, u, results)
end
u:close()
for _ = 1, 8 do
  local r = results:recv()
  check(r.n == 2 and r[1] == nil and r[2] == false, "woken by close")
end

-- Select among several ready receives: each case chosen (random among
-- the ready: one never chosen in 150 has probability (2/3)^150), each
-- channel's values in order.
local a, b, cc = gmp.chan(100), gmp.chan(100), gmp.chan(100)
for i = 1, 100 do
  a:send(i)
  b:send(-i)
  cc:send(i * 1.5)
end
local got, nxt = {0, 0, 0}, {1, 1, 1}
for _ = 1, 150 do
  local i, w, wok = gmp.select{{a, "recv"}, {b, "recv"}, {cc, "recv"}}
  check(wok, "select recv ok")
  local want = ({nxt[1], -nxt[2], nxt[3] * 1.5})[i]
  check(w == want and math.type(w) == math.type(want), "select order")
  got[i], nxt[i] = got[i] + 1, nxt[i] + 1
end
check(got[1] > 0 and got[2] > 0 and got[3] > 0, "every ready case chosen")

-- A ready receive and a ready send: both chosen over 100 selects; the
-- value of the send not chosen is dropped.
local full, room = gmp.chan(1), gmp.chan(1)
full:send("x")
local chosen = {}
for _ = 1, 100 do
  local i, w, wok = gmp.select{{full, "recv"}, {room, "send", {"y"}}}
  chosen[i] = true
  if i == 1 then
    check(w == "x" and wok, "select recv")
    full:send("x")
  else
    check(w == nil and room:recv()[1] == "y", "select send")
  end
end
check(chosen[1] and chosen[2], "send and recv both chosen")

-- Nothing ready.
local idle = gmp.chan()
check(gmp.select{{idle, "recv"}, default = true} == nil, "default")
check(gmp.select{{false, "recv"}, {nil, "send", 1}, default = true} == nil,
      "nil channels never ready")
check(gmp.select{default = true} == nil, "no case, default")
local t0 = gmp.now()
check(gmp.select{{idle, "recv"}, timeout = 0.002} == nil, "timeout")
check(gmp.now() - t0 >= 0.002 - 1e-9, "not before the timeout")

-- Closed channels in select.
local closed = gmp.chan()
closed:close()
local i, w, wok = gmp.select{{idle, "recv"}, {closed, "recv"}}
check(i == 2 and w == nil and wok == false, "select recv on closed")
fails("send on closed channel", gmp.select, {{closed, "send", 1}})

-- A select that waits, woken by another goroutine's send; a select
-- send taken by a waiting receiver.
local late = gmp.chan()
gmp.go(function(late)
  gmp.sleep(0.001)
  late:send("late")
end, late)
i, w = gmp.select{{idle, "recv"}, {late, "recv"}}
check(i == 2 and w == "late", "select woken")
local sink, ack = gmp.chan(), gmp.chan()
gmp.go(function(sink, ack)
  ack:send(sink:recv())
end, sink, ack)
check(gmp.select{{idle, "recv"}, {sink, "send", {k = "v"}}} == 2,
      "select send")
check(ack:recv().k == "v", "select send delivered")

-- Bad selects.
fails("op is not", gmp.select, {{a, "peek"}})
fails("case 1 is not a table", gmp.select, {42})
fails("no channel", gmp.select, {{gmp.atomic(), "recv"}})
fails("without default", gmp.select, {{a, "recv"}, default = true,
                                      timeout = 1})

-- Wait group and atomics across goroutines.
local wg, sum = gmp.waitgroup(), gmp.atomic()
local N = 20
wg:add(N)
for k = 1, N do
  gmp.go(function(wg, sum, k)
    gmp.yield()
    sum:add(k)
    wg:done()
  end, wg, sum, k)
end
wg:wait()
check(sum:load() == N * (N + 1) // 2, "wait group waited for all")
fails("32-bit", wg.add, wg, 1 << 40)
local at = gmp.atomic(7)
check(at:add(-10) == -3 and at:load() == -3, "atomic add")
at:store(math.maxinteger)
check(at:add(1) == math.mininteger, "atomic wraps as Lua integers")

-- Sleep, and the rest.
t0 = gmp.now()
gmp.sleep(0.001)
check(gmp.now() - t0 >= 0.001 - 1e-9, "sleep")
gmp.yield()
check(gmp.id() > 0 and gmp.procs() >= 1 and gmp.numgoroutine() >= 1,
      "id, procs, numgoroutine")
check(require("gmp") == gmp, "require")
return checks
