/* What `oslens-engine profile` was asked to do, parsed from argv before
 * anything runs (profile_args.c). */
#ifndef OSLENS_PROFILE_ARGS_H
#define OSLENS_PROFILE_ARGS_H

#include <sys/types.h>

struct profile_config {
	char **cmd; /* -- CMD ARGS..., or NULL with --pid */
	int ncmd;
	pid_t pid;	     /* --pid, or 0 */
	double duration_s;   /* --pid only: 0 until the process exits */
	double time_limit_s; /* 0: none */
	int out_fd;	     /* where the records go, or -1 for stdout */
	int bpf;	     /* attribution (not --no-bpf) */
	int syscalls;	     /* the system-call tracepoints (not --no-syscalls) */
	int counters;	     /* perf counters (not --no-counters) */
	int *cpus;	     /* --cpus: the command runs on these, or NULL */
	int ncpus;
	int stdout_to_stderr; /* the command's stdout goes to stderr: the records alone are on stdout */
	int dry_run;
};

/* argv (argv[1] = "profile") into cfg, or one line on stderr and exit 2. */
void profile_parse_args(int argc, char **argv, struct profile_config *cfg);
struct json;
/* "cpus": --cpus as a list, or null. */
void profile_emit_cpus(struct json *j, const struct profile_config *cfg);
/* --dry-run's one `config` record. */
void profile_emit_config(const struct profile_config *cfg);

#endif
