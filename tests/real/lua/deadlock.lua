-- deadlock.lua - every goroutine waits on a channel nobody sends to: the
-- runtime's deadlock report names each by its Lua function.
local never = gmp.chan()
gmp.go(function(never)
  never:recv()
end, never)
never:recv()
