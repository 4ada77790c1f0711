/*
 * lgmp.h - the C side of the Lua module `gmp` (lgmp.c): what a host calls
 * to give goroutines Lua interpreters. The module's reference, for Lua
 * code and for hosts, is the essay atop lgmp.c; gmplua.c is a host.
 *
 * Every lua_State of the module belongs to one goroutine and lives and
 * dies on it: create it there with lgmp_newstate, lua_close it there
 * while the runtime runs (closing it frees what its channels still hold,
 * which needs the runtime).
 */
#ifndef LGMP_H
#define LGMP_H

#include <lua.h>
#include <stdint.h>

/* A new interpreter for the calling goroutine: Lua's standard libraries,
 * the module as the global `gmp` (and for require "gmp"), and the count
 * hook. NULL when memory is short. */
lua_State *lgmp_newstate(void);

/* VM instructions between two calls of the count hook in interpreters
 * made from now on (default 1000); 0: no hook, which only serves to show
 * what the hook does: a CPU-bound loop then keeps its P. Any thread. */
void lgmp_set_hook_count(int count);

/* A message handler for lua_pcall: the error message (or a description
 * of a non-string error object) with a traceback. */
int lgmp_traceback(lua_State *L);

/* Runs body in a new interpreter (lgmp_newstate) on the calling
 * goroutine, protected with lgmp_traceback, given arg as a light userdata,
 * then closes the interpreter. An error that reaches it, and a lack of
 * memory for the interpreter, end the process as lgmp_die does, naming
 * the goroutine by label (read then: body may change the text). */
void lgmp_run(lua_CFunction body, void *arg, const char *label);

/* Prints the error on top of L's stack, as the handler left it, naming
 * the goroutine, and ends the process with status 2: what an unhandled
 * Lua error does, as an unrecovered panic in Go. Never returns. */
void lgmp_die(lua_State *L, const char *what);

/* Channels, wait groups and atomics, and messages in flight, alive now in
 * the whole process: 0 once every interpreter is closed, whatever was
 * left in channels. For tests that check nothing leaks. */
int64_t lgmp_live(void);

int luaopen_gmp(lua_State *L);

#endif /* LGMP_H */
