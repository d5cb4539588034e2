/* oslens-engine: argv in, JSON lines out. See README.md for the records. */
#include "engine.h"
#include "cluster/cluster.h"
#include "json.h"
#include "run_parts.h"
#include "trace.h"
#include "stopsig.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void emit_probe(const struct probe *p, void *arg)
{
	(void)arg;
	struct json *j = json_record("probe");
	json_str(j, "name", p->name);
	json_str(j, "summary", p->summary);
	json_str(j, "subsystem", p->subsystem);
	json_list(j, "syscalls", p->syscalls);
	json_bool(j, "partner", p->partner);
	json_arr(j, "variants");
	for (int i = 0; i < PROBE_MAX_VARIANTS && p->variants[i].name; i++) {
		json_obj(j, NULL);
		json_str(j, "name", p->variants[i].name);
		json_str(j, "help", p->variants[i].help);
		json_list(j, "syscalls", p->variants[i].syscalls ? p->variants[i].syscalls : p->syscalls);
		json_end(j);
	}
	json_end(j);
	json_arr(j, "options");
	for (int i = 0; i < PROBE_MAX_OPTS && p->opts[i].name; i++) {
		json_obj(j, NULL);
		json_str(j, "name", p->opts[i].name);
		json_int(j, "default", p->opts[i].def);
		json_int(j, "min", p->opts[i].min);
		json_int(j, "max", p->opts[i].max);
		json_str(j, "help", p->opts[i].help);
		json_end(j);
	}
	json_end(j);
	json_bool(j, "static", p->needs_static);
	json_bool(j, "timed", p->timed != NULL);
	json_bool(j, "needs_target", p->needs_target);
	json_emit(j);
}

static int cmd_topology(void)
{
	struct topology t;
	if (topology_read(&t) != 0)
		die_usage("cannot read the CPU topology");
	struct json *j = json_record("topology");
	json_int(j, "online", t.nonline);
	json_int(j, "available", t.n);
	json_int(j, "packages", t.npackages);
	json_arr(j, "cpus");
	for (int i = 0; i < t.n; i++) {
		topology_emit_cpu(j, &t.cpus[i]);
	}
	json_emit(j);
	return 0;
}

/* Records the whole numbers read from stdin into a histogram and prints it,
 * so that tests can check the histogram against exact statistics. */
static int cmd_histtest(void)
{
	struct hist *h = hist_new();
	unsigned long long v;
	while (h && scanf("%llu", &v) == 1)
		hist_record(h, v);
	if (!h || !feof(stdin))
		die_usage("histtest: stdin must hold whole non-negative numbers");
	struct json *j = json_record("hist");
	hist_emit(j, "hist", h, 1.0);
	json_emit(j);
	return 0;
}

/* Where `run` would place N workers, without running anything. */
static int cmd_plan(int argc, char **argv)
{
	if (argc != 4)
		die_usage("usage: oslens-engine plan N compact|spread");
	struct topology t;
	if (topology_read(&t) != 0)
		die_usage("cannot read the CPU topology");
	int n = !strcmp(argv[2], "max") ? t.n : atoi(argv[2]);
	struct cpu_topo *cpus = calloc(n > 0 ? n : 1, sizeof *cpus);
	char err[256];
	if (placement_plan(&t, argv[3], n, cpus, err, sizeof err) != 0)
		die_usage("%s", err);
	struct json *j = json_record("plan");
	json_str(j, "policy", argv[3]);
	json_arr(j, "cpus");
	for (int i = 0; i < n; i++)
		json_int(j, NULL, cpus[i].cpu);
	json_emit(j);
	return 0;
}

static int cmd_run(int argc, char **argv)
{
	struct run_config cfg;
	struct topology topo;

	run_catch_signals();
	cluster_begin(&argc, &argv); /* an MPI rank measures its share of the node's CPUs */
	run_parse_args(argc, argv, run_part_table, &cfg, &topo);
	if (clock_init(cfg.clock_want) != 0)
		die_usage("--clock tsc: %s", clock_info.reason);
	if (cfg.dry_run) {
		run_emit_config(&cfg);
		return 0;
	}
	return cluster_end(run_probe(&cfg, &topo));
}

/* One of `run`'s attributions, as `list` publishes it: its option, whether
 * it loads BPF programs, and the period it samples at unless told (none
 * where it samples nothing), so that no caller keeps a copy of it. */
static void emit_attribution(const struct run_part *p)
{
	struct json *j = json_record("attribution");
	json_str(j, "name", p->name);
	json_bool(j, "bpf", p->bpf);
	if (p->sample_period_ns)
		json_int(j, "sample_period_ns", p->sample_period_ns);
	json_emit(j);
}

static int cmd_list(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	probe_foreach(emit_probe, NULL);
	for (int k = 0; run_part_table[k]; k++)
		emit_attribution(run_part_table[k]);
	args_emit_limits();
	return 0;
}

static int cmd_true(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	_exit(0);
}

static void hold_end(int sig)
{
	(void)sig;
	_exit(0);
}

/* Does nothing until SIGTERM, SIGINT or SIGHUP: the first process of a
 * container made for a run (`--in container`), whose engine invocations are
 * exec'd beside it. As a namespace's init it would ignore SIGTERM without
 * a handler, and the runtime would wait out its grace before SIGKILL. */
static int cmd_hold(int argc, char **argv)
{
	if (argc != 2)
		die_usage("hold takes no arguments (got '%s')", argv[2]);
	signal(SIGTERM, hold_end);
	signal(SIGINT, hold_end);
	signal(SIGHUP, hold_end);
	for (;;)
		pause();
}

/* In oslens-engine-mpi, every rank's topology (its share of its node) with
 * its rank and node records: what `oslens cluster` plans worker counts
 * from, and its check that the launcher starts the ranks at all. */
static int cmd_topology_argv(int argc, char **argv)
{
	cluster_begin(&argc, &argv);
	return cluster_end(cmd_topology());
}

static int cmd_histtest_argv(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return cmd_histtest();
}

/* `run`'s attributions, from their table: the option of each, what it
 * says, and which load BPF programs (one such per run). */
static void usage_run_parts(int indent)
{
	fprintf(stderr, "%*swhere ATTRIBUTION is any of these, with at most one marked BPF:\n", indent, "");
	for (int k = 0; run_part_table[k]; k++) {
		const struct run_part *p = run_part_table[k];
		char period[64] = "";
		if (p->sample_period_ns)
			snprintf(period, sizeof period, " (NS: %lld unless given)", (long long)p->sample_period_ns);
		fprintf(stderr, "%*s--%-14s %s%s%s\n", indent + 4, "", p->name, p->help, period,
			p->bpf ? " [BPF]" : "");
	}
}

/* Every command: its name, its arguments and what it does (the usage text
 * is made of these, so that it lists every command there is), and the
 * function that parses its own argv (argv[1] is the command's name). A
 * line of args that goes on starts the next with a newline; more, if any,
 * writes what the args name (indented by its argument). */
static const struct command {
	const char *name, *args, *help;
	int (*fn)(int argc, char **argv);
	void (*more)(int indent);
} commands[] = {
	{"list", "", "the probes, their variants and options, and the engine's limits", cmd_list},
	{"topology", "", "the CPUs this process may use, with package, core, SMT and NUMA node", cmd_topology_argv},
	{"plan", "N compact|spread", "where N workers would be placed", cmd_plan},
	{"run",
	 "--probe NAME[:VARIANT][,...] [--workers N|max | --cpus LIST] [--mode process|thread]\n"
	 "[--placement compact|spread] [--duration S | --ops N] [--warmup S] [--reps N] [--interval S]\n"
	 "[--opt KEY=VALUE]... [--time-limit S] [--clock auto|tsc|monotonic] [--tmpdir DIR]\n"
	 "[--latency [--latency-every N|auto] [--mix]] [--target DEVICE|FILE] [--dry-run] [ATTRIBUTION [--sample-period NS]]...",
	 "workers hammering one probe (or a mix), timed", cmd_run, usage_run_parts},
	{"worker", "FD IDX TMPDIR ARGV...", "one worker of a run, exec'd afresh by its master (internal)", cmd_worker},
	{"app",
	 "list | NAME [--workers N] [--mode thread|process] [--size K] [--dir DIR]\n| NAME --prepare DIR [--size K]",
	 "a built-in application workload", cmd_app},
	{"profile",
	 "[--out-fd N] [--duration S] [--time-limit S] [--no-bpf] [--no-syscalls] [--no-counters]\n"
	 "(--pid PID | -- CMD ARGS...) [--dry-run]",
	 "a command's or a process tree's kernel time", cmd_profile},
	{"trace", "--cpus LIST --duration S [--tids LIST] [--dry-run]", "kernel events on some CPUs (BPF)", cmd_trace},
	{"bsp",
	 "[--compute-us U] [--iterations K] [--warmup-iterations W] [--collective barrier|allreduce]\n"
	 "[--threshold-ns T] [--sync-every N] [--max-detours N] [--trace]",
	 "compute, then a collective, K times, on every rank (oslens-engine-mpi)", cmd_bsp},
	{"inject", "--cpu N --period-us P --busy-us B --duration S [--dry-run]",
	 "a periodic busy interruption on one CPU (tests)", cmd_inject},
	{"histtest", "< NUMBERS", "numbers on stdin into a histogram (tests)", cmd_histtest_argv},
	{"true", "", "exit at once (the fork+exec probe's static target)", cmd_true},
	{"hold", "", "wait for a signal (a run's container holds it while invocations are exec'd beside it)", cmd_hold},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

/* Each command and what it does, then its arguments (a continued line
 * indented under the first). */
static void usage(void)
{
	fputs("usage: oslens-engine COMMAND ARGS..., one of\n", stderr);
	for (size_t i = 0; i < NCOMMANDS; i++) {
		const struct command *c = &commands[i];
		fprintf(stderr, "  %s: %s\n", c->name, c->help);
		if (!*c->args)
			continue;
		fprintf(stderr, "      %s ", c->name);
		for (const char *a = c->args; *a; a++)
			if (*a == '\n')
				fprintf(stderr, "\n%*s", 6 + (int)strlen(c->name) + 1, "");
			else
				fputc(*a, stderr);
		fputc('\n', stderr);
		if (c->more)
			c->more(6);
	}
	exit(EXIT_USAGE);
}

int main(int argc, char **argv)
{
	stopsig_note_inherited();
	if (argc < 2)
		usage();
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc, argv);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		usage();
	char names[512] = "";
	for (size_t i = 0, len = 0; i < NCOMMANDS && len < sizeof names; i++)
		len += snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", commands[i].name);
	die_usage("unknown command '%s' (%s)", argv[1], names);
}
