/* Command-line helpers at the bottom of the engine: every command parses its
 * numbers here, against bounds defined once and published by `list` (the
 * `limits` record), so that oslens checks user input against the engine's
 * own numbers instead of a copy. */
#ifndef OSLENS_ARGS_H
#define OSLENS_ARGS_H

#include <limits.h>

#define EXIT_USAGE 2

/* Bounds of the engine's options. */
#define ARGS_MAX_SECONDS (7 * 86400.0) /* any duration, warm-up, interval or time limit */
#define RUN_MAX_REPS 100000
#define RUN_MAX_WORKERS 4096
#define RUN_MAX_OPS LONG_MAX
#define RUN_MAX_LATENCY_EVERY (1L << 30)
#define RUN_MAX_SAMPLES 1e6 /* --duration / --interval */
/* --sample-period, ns, or 0 (no sample): 10 kHz at most, where a sample per
 * thread already costs a fifth of a system-call-bound probe's throughput
 * in a VM (bpf/explain.h), and 1 Hz at least */
#define RUN_MIN_SAMPLE_PERIOD_NS 100000
#define RUN_MAX_SAMPLE_PERIOD_NS 1000000000
#define APP_MAX_WORKERS 4096

/* One line on stderr, exit status 2. */
void die_usage(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* A whole number in [min, max] given for option opt, or die_usage. */
long parse_long(const char *opt, const char *s, long min, long max);

/* A number of seconds in (0, ARGS_MAX_SECONDS], or [0, …] with allow_zero. */
double parse_seconds(const char *opt, const char *s, int allow_zero);

/* The `limits` record: every bound above, by command and option. */
void args_emit_limits(void);

#endif
