-- values.lua - every kind of value a channel carries, copied through a
-- channel within one interpreter and through another goroutine's
-- interpreter and back (an echo goroutine decodes and encodes it again),
-- and as arguments of gmp.go; what cannot be copied raises an error the
-- sender catches, and nothing is sent. Returns the number of checks.
local checks = 0
local function check(cond, what)
  checks = checks + 1
  if not cond then error("check failed: " .. what, 2) end
end

-- Deep equality: subtypes of numbers, -0.0, NaN, cycles; table keys are
-- left to the checks that use them.
local function same(a, b, seen)
  seen = seen or {}
  if type(a) ~= type(b) then return false end
  if type(a) == "number" then
    if math.type(a) ~= math.type(b) then return false end
    if a ~= a then return b ~= b end
    if a == 0 then return b == 0 and 1 / a == 1 / b end
    return a == b
  end
  if type(a) == "function" then return string.dump(a) == string.dump(b) end
  if type(a) ~= "table" then return a == b end
  if seen[a] then return seen[a] == b end
  seen[a] = b
  for k, v in pairs(a) do
    if type(k) ~= "table" and not same(v, rawget(b, k), seen) then
      return false
    end
  end
  for k in pairs(b) do
    if type(k) ~= "table" and rawget(a, k) == nil then return false end
  end
  return true
end

-- A trip: v sent on out, what comes back on back returned.
local function tripper(out, back)
  return function(v)
    out:send(v)
    local r, ok = back:recv()
    check(ok, "received")
    return r
  end
end

local loop = gmp.chan(1)
local local_trip = tripper(loop, loop)
local inq, outq = gmp.chan(), gmp.chan()
gmp.go(function(inq, outq)
  while true do
    local v, ok = inq:recv()
    if not ok then return end
    outq:send(v)
  end
end, inq, outq)
local echo_trip = tripper(inq, outq)

local trips = {local_trip, echo_trip}

-- Scalars.
local bytes = {}
for i = 0, 255 do bytes[#bytes + 1] = string.char(i) end
local big = table.concat(bytes):rep(400)
local scalars = {true, false, 0, 1, -1, math.maxinteger, math.mininteger,
                 0.0, -0.0, 1.0, 0.5, -2.25, 2^53, 2^63, math.huge,
                 -math.huge, 0/0, 1e308, 5e-324, "", "a\0b\0", big}
for _, trip in ipairs(trips) do
  check(trip(nil) == nil, "nil")
  for i, v in ipairs(scalars) do
    check(same(v, trip(v)), "scalar " .. i)
  end
  check(math.type(trip(1)) == "integer", "integer stays integer")
  check(math.type(trip(1.0)) == "float", "float stays float")
  check(#trip(big) == 102400, "long string")
end

-- Tables: nesting, keys of every kind, shared subtables, cycles.
local shared = {x = 1}
local t = {
  1, 2.0, "three", {4, {5, {6}}},
  name = "t", flag = true, [2.5] = "float key", [false] = "false key",
  [-7] = "negative key", [math.maxinteger] = "big key",
  nested = {a = {b = {c = {d = "deep"}}}},
  s1 = shared, s2 = shared,
  withmeta = setmetatable({v = 1}, {__index = function() return "meta" end}),
}
t.self = t
t.nested.up = t
t[{"table key"}] = "tk"
for _, trip in ipairs(trips) do
  local r = trip(t)
  check(r ~= t and same(t, r), "table copied")
  check(r.self == r and r.nested.up == r, "cycles kept")
  check(r.s1 == r.s2 and r.s1 ~= shared, "shared subtable kept")
  check(math.type(r[1]) == "integer" and math.type(r[2]) == "float",
        "subtypes in a table")
  check(r[4][2][2][1] == 6 and r.nested.a.b.c.d == "deep", "nesting")
  check(getmetatable(r.withmeta) == nil and r.withmeta.v == 1 and
        r.withmeta.other == nil, "metatable not copied")
  local tk
  for k, v in pairs(r) do
    if type(k) == "table" then tk = {k, v} end
  end
  check(tk and tk[1][1] == "table key" and tk[2] == "tk", "table key")
end

-- Functions: no upvalue, or _ENV only; identity kept within a value.
local function double(x) return x * 2 + 1 end
local function globals(x) return math.sqrt(x) + tonumber("1") end
for _, trip in ipairs(trips) do
  local f, g = trip(double), trip(globals)
  check(f ~= double and f(20) == 41, "function")
  check(g(16) == 5.0, "function using globals")
  check(string.dump(f) == string.dump(double), "function's code")
  local ft = trip({f1 = double, f2 = double, g = globals})
  check(ft.f1 == ft.f2 and ft.f1(1) == 3 and ft.g(4) == 3.0,
        "function identity within a value")
end

-- Handles: the same object comes back as the same value; a channel sent
-- to another goroutine carries its reply.
local c, wg, at = gmp.chan(1), gmp.waitgroup(), gmp.atomic(5)
for _, trip in ipairs(trips) do
  check(trip(c) == c, "a channel comes back as itself")
  local r = trip({c, wg, at, c})
  check(r[1] == c and r[4] == c and r[2] == wg and r[3] == at, "handles")
end
local req = gmp.chan()
gmp.go(function(req)
  while true do
    local m, ok = req:recv()
    if not ok then return end
    m.at:add(m.n)
    m.reply:send(m.n * 2)
  end
end, req)
local reply = gmp.chan()
req:send({reply = reply, n = 21, at = at})
check(reply:recv() == 42 and at:load() == 26, "reply over a sent channel")
req:send({reply = reply, n = 1, at = at})
check(reply:recv() == 2 and at:load() == 27, "again")

-- Arguments of gmp.go, every kind.
local res = gmp.chan(1)
gmp.go(function(res, ...)
  res:send(table.pack(...))
end, res, nil, true, 1, 1.0, "s\0", {1, {2}}, double, c, t)
local p = res:recv()
check(p.n == 9 and p[1] == nil and p[2] == true, "go: nil, boolean")
check(math.type(p[3]) == "integer" and math.type(p[4]) == "float",
      "go: numbers")
check(p[5] == "s\0" and p[6][2][1] == 2 and p[7](1) == 3 and p[8] == c,
      "go: string, table, function, channel")
check(p[9].self == p[9] and same(t, p[9]), "go: cyclic table")

-- What cannot be copied: an error the sender catches, nothing sent.
local box = gmp.chan(1)
local function fails(v, pattern)
  local ok, err = pcall(box.send, box, v)
  check(not ok and tostring(err):find(pattern, 1, true),
        "error '" .. pattern .. "', got " .. tostring(err))
  check(box:len() == 0, "nothing sent")
end
local up = 1
local deep, d = {}, nil
d = deep
for _ = 1, 200 do d.next = {} d = d.next end
fails(coroutine.create(function() end), "cannot copy a coroutine")
fails(function() return up end, "upvalue 'up'")
fails(print, "cannot copy a C function")
fails(io.stdout, "cannot copy a userdata")
fails({1, 2, {3, {coroutine.running()}}}, "cannot copy a coroutine")
fails({f = function() return up end}, "upvalue 'up'")
fails(deep, "nested more than")
local ok, err = pcall(gmp.go, function() return up end)
check(not ok and err:find("upvalue 'up'", 1, true), "go: upvalue")
ok, err = pcall(gmp.go, print)
check(not ok and err:find("cannot copy a C function", 1, true), "go: C")
ok, err = pcall(gmp.go, double, coroutine.create(print))
check(not ok and err:find("cannot copy a coroutine", 1, true), "go: arg")
ok, err = pcall(gmp.go, 42)
check(not ok, "go: not a function")
ok, err = pcall(gmp.select, {{box, "send", print}})
check(not ok and err:find("cannot copy a C function", 1, true),
      "select: C function")
check(box:len() == 0, "select sent nothing")
box:send("still works")
check(box:recv() == "still works", "channel usable after errors")

-- Messages left in channels nobody holds any more: freed with them (the
-- test's leak count checks it).
do
  local outer, inner = gmp.chan(4), gmp.chan(4)
  inner:send({"payload", 1.5})
  inner:send(gmp.atomic(3))
  outer:send({inner = inner, s = ("x"):rep(1000)})
  outer:send(gmp.chan(1))
end
collectgarbage()
collectgarbage()

inq:close()
req:close()
return checks
