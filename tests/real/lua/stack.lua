-- stack.lua - Lua's own limit on C recursion (LUAI_MAXCCALLS) comes
-- before the end of a goroutine's stack (512 KiB, as gmplua asks): pcall
-- nested as deep as Lua allows, and string.gsub callbacks that recurse,
-- end in Lua's "C stack overflow" error, in the main goroutine and in
-- another one, never in the runtime's fatal stack overflow. Returns the
-- pcall depth each reached.
local function probe()
  local function nest(n)
    local ok, a, b = pcall(nest, n + 1)
    if ok then return a, b end
    return n, a
  end
  local function sub(s, n)
    if n == 0 then return s end
    return (s:gsub(".", function(x) return sub(x, n - 1) end))
  end
  local depth, err = nest(1)
  assert(depth > 150 and err:find("stack overflow", 1, true),
         "pcall nesting: " .. depth .. " " .. tostring(err))
  local ok, err2 = pcall(sub, "ab", 1000)
  assert(not ok and err2:find("stack overflow", 1, true),
         "gsub recursion: " .. tostring(err2))
  return depth
end

local main_depth = probe()
local res = gmp.chan(1)
gmp.go(function(probe, res)
  res:send(probe())
end, probe, res)
return main_depth, (res:recv())
