/* `oslens-engine trace` (trace.c): what it was asked to do, parsed before
 * anything is loaded, with or without BPF in this engine. */
#ifndef OSLENS_TRACE_H
#define OSLENS_TRACE_H

#define TRACE_MAX_TIDS 4096

struct trace_config {
	int *cpus; /* --cpus: the CPUs watched, each once */
	int ncpus;
	int *tids; /* --tids: the probed threads, each alive */
	int ntids;
	double duration_s;
	int dry_run;
};

/* argv (argv[1] = "trace") into cfg, or one line on stderr and exit 2. */
void trace_parse_args(int argc, char **argv, struct trace_config *cfg);
/* --dry-run's one `config` record. */
void trace_emit_config(const struct trace_config *cfg);
/* The `trace` command. */
int cmd_trace(int argc, char **argv);

#endif
