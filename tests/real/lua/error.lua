-- error.lua - an error no pcall catches, in a goroutine: gmplua prints it
-- with its traceback and exits with status 2; the main goroutine, waiting,
-- never prints.
local wg = gmp.waitgroup()
wg:add(1)
gmp.go(function(wg)
  local function inner(x)
    error("boom from a goroutine " .. x)
  end
  inner(42)
  wg:done()
end, wg)
wg:wait()
print("not reached")
