/* What `oslens-engine run` was asked to do, and the harness that does it. */
#ifndef OSLENS_ENGINE_H
#define OSLENS_ENGINE_H

#include <stdint.h>

#include "args.h"
#include "clock.h"
#include "probe.h"
#include "topology.h"

#define ENGINE_VERSION "0.1.0"
#define EXIT_MEASURE_FAILED 1

struct run_part;

/* A probe, its variant and its option values, as chosen on the command line. */
struct choice {
	const struct probe *probe;
	int variant;
	long opt[PROBE_MAX_OPTS];
};

struct run_config {
	struct choice *choices; /* one, or the whole catalogue with --mix */
	int nchoices;
	int mix; /* every worker runs every choice in turn */
	int nworkers;
	int threaded;
	const char *placement;
	struct cpu_topo *cpus; /* nworkers entries, the plan */
	int *partner_cpus;     /* per worker: a CPU for its partner task, or -1 */
	int latency;	       /* time operations into a histogram */
	/* --latency-every: time one operation in every N (in a random place
	 * in each block of N, so that no cycle of the probe's is aliased);
	 * 1 times them all; 0 (auto) picks N per worker from the measured
	 * costs of an operation and of timing one, so that timing takes at
	 * most LATENCY_BUDGET of the loop (worker.c) */
	uint64_t latency_every;
	double duration_s; /* fixed time, or 0 */
	uint64_t ops;	   /* fixed work, or 0 */
	double warmup_s;
	double interval_s;
	int reps;
	double time_limit_s; /* 0: none */
	const char *tmpdir_base;
	const char *target;	    /* --target: what the I/O probes read and write */
	int dry_run;		    /* --dry-run: parse and check, print the config, measure nothing */
	enum clock_want clock_want; /* --clock: calibrated by `run`, adopted by its fresh workers */
	/* --sample-period: the period of the clocks an attribution samples the
	 * threads with (run_part.samples), ns; 0 takes no sample; -1: its own */
	int64_t sample_period_ns;
	int argc;
	char **argv;
	/* The attributions (run_parts.h) the parser was given, NULL-terminated
	 * (none in a worker), and those asked for: bit k for part_table[k]. */
	const struct run_part *const *part_table;
	unsigned parts;
	/* argv less the attributions' options: what a fresh worker parses again
	 * (it loads no attribution, and its image has none). */
	int worker_argc;
	char **worker_argv;
};

/* `run`'s argv into cfg and topo (run_args.c), or one line and exit 2;
 * parts: the attributions it may ask for (run_part_table; NULL: none). */
void run_parse_args(int argc, char **argv, const struct run_part *const *parts, struct run_config *cfg,
		    struct topology *topo);
/* A probe's environment as the master gives it before its global set-up;
 * a worker exec'd afresh builds the same one from the same arguments
 * (worker.c). */
void probe_env_init(struct probe_env *env, const struct run_config *cfg, const struct choice *c, const char *tmpdir);
/* --dry-run's one `config` record. */
void run_emit_config(const struct run_config *cfg);
/* Runs every repetition and returns the process exit status. */
/* Catches SIGINT, SIGTERM and SIGHUP (a stop flag), first of all: a signal
 * in the engine's first moments still ends it in order, as interrupted. */
void run_catch_signals(void);
int run_probe(const struct run_config *cfg, const struct topology *topo);

/* `oslens-engine worker FD IDX TMPDIR ARGV...` (worker.c): a worker exec'd
 * afresh. It rebuilds the run's configuration from the master's own
 * arguments, maps the master's shared memory from FD, runs worker IDX. */
int cmd_worker(int argc, char **argv);
int cmd_inject(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_app(int argc, char **argv);

#endif
