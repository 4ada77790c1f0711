/*
 * trace.h - goroutine dumps, schedtrace and stall reports (trace.c).
 */
#ifndef GMP_TRACE_H
#define GMP_TRACE_H

#include "runtime.h"

/* One schedtrace report (GMP_DEBUG=schedtrace) on stderr. Context: sysmon. */
GMP_HIDDEN void gmp__schedtrace(struct schedt *s, int64_t now);
/* Every goroutine, through the fatal writer (throw.c), taking no lock.
 * Context: a fatal report. */
GMP_HIDDEN void gmp__dump_fatal(struct schedt *s);
/* The stall report (GMP_DEBUG=stall) of the G st names, run on P pid,
 * on stderr: with its name and frames when how is STALL_TAKEN; else
 * without, saying why (STALL_GONE: the slice ended first; STALL_ASKED:
 * no answer; STALL_IDLE: no handler). Context: sysmon. */
GMP_HIDDEN void gmp__stall_report(struct schedt *s, int pid,
                                  const struct gmp__stall *st, int how);

/* Writes the dump of every goroutine and the flight recorder's window to
 * stderr: SIGQUIT's handler (signals.c). Async-signal-safe. */
GMP_HIDDEN void gmp__dump_quit(void);

#endif /* GMP_TRACE_H */
