/*
 * gmplua.c - a Lua 5.4 interpreter whose scripts have goroutines: runs a
 * script file as the main goroutine of gmp_main, with the module `gmp`
 * (lgmp.c, whose opening comment is the module's reference) as a global
 * and for require "gmp".
 *
 *   gmplua [-p procs] [-c count] script.lua [args...]
 *
 *   -p procs   Ps (default: $GMP_MAXPROCS, else the CPUs)
 *   -c count   VM instructions between two calls of the count hook that
 *              lets CPU-bound Lua share its P (default 1000). 0: no hook,
 *              only to show what it does: such a loop then keeps its P.
 *   script     a file, or - for standard input. It gets the arguments as
 *              `...` and in the table `arg` (arg[0] the script), as
 *              lua5.4 gives them.
 *
 * Exit status: 0 once the script's main chunk returns (goroutines still
 * running then are abandoned, as when Go's main returns); 2 after an error
 * that no pcall caught, in any goroutine, printed with its traceback, as
 * Go's unrecovered panic; 2 as well for a bad command line. GMP_DEBUG
 * applies (asyncpreemptoff=1, schedtrace=...), and SIGQUIT prints every
 * goroutine, named after the Lua function it runs, and exits with 2.
 *
 * Built beside the other examples when pkg-config finds lua5.4 (Debian:
 * liblua5.4-dev), and not when cross-compiling; tests/real runs it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include <gmprt.h>

#include "lgmp.h"

/* liblua recurses on the C stack up to LUAI_MAXCCALLS (200) levels, each
 * a few hundred bytes to a few KB (luaV_execute, a pcall's jmp_buf, a
 * string.format buffer), before its own "C stack overflow" error stops
 * the recursion: pcall nested that deep overflows the default 128 KiB
 * stack, string.gsub callbacks that recurse overflow 256 KiB; 512 KiB
 * holds both (tests/real/lua/stack.lua). Stacks are committed as they
 * are touched, so the size costs address space, not memory. */
#define STACK_SIZE (512 * 1024)

struct opts {
    const char *script;
    int argc;                       /* arguments after the script */
    char **argv;
    char label[256];
};

/* The main chunk, protected: arg, the script's load, its call. */
static int main_body(lua_State *L)
{
    struct opts *o = lua_touserdata(L, 1);
    lua_createtable(L, o->argc, 1);
    lua_pushstring(L, o->script);
    lua_rawseti(L, -2, 0);
    for (int i = 0; i < o->argc; i++) {
        lua_pushstring(L, o->argv[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setglobal(L, "arg");
    const char *file = strcmp(o->script, "-") == 0 ? NULL : o->script;
    if (luaL_loadfile(L, file) != LUA_OK)
        return lua_error(L);
    luaL_checkstack(L, o->argc, "too many arguments");
    for (int i = 0; i < o->argc; i++)
        lua_pushstring(L, o->argv[i]);
    lua_call(L, o->argc, 0);
    return 0;
}

static void run_main(void *arg)
{
    struct opts *o = arg;
    snprintf(o->label, sizeof o->label, "lua main %s", o->script);
    gmp_set_label(o->label);
    lgmp_run(main_body, o, o->label);
    gmp_set_label(NULL);
}

static void usage(void)
{
    fprintf(stderr, "usage: gmplua [-p procs] [-c count] script.lua "
            "[args...]\n");
    exit(2);
}

static int number(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < 0 || v > 1000000000)
        usage();
    return (int)v;
}

int main(int argc, char **argv)
{
    gmp_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.stack_size = STACK_SIZE;
    cfg.dump_on_sigquit = 1;
    int c;
    /* '+': options end at the script; what follows is the script's. */
    while ((c = getopt(argc, argv, "+p:c:")) != -1) {
        if (c == 'p')
            cfg.procs = number(optarg);
        else if (c == 'c')
            lgmp_set_hook_count(number(optarg));
        else
            usage();
    }
    if (optind >= argc)
        usage();
    struct opts o = {argv[optind], argc - optind - 1, argv + optind + 1,
                     ""};
    int r = gmp_main(run_main, &o, &cfg);
    if (r != 0) {
        fprintf(stderr, "gmplua: cannot start the runtime: %s\n",
                gmp_strerror(r));
        return 2;
    }
    return 0;
}
