/* `oslens-engine trace --cpus LIST --duration S [--tids LIST]`: the kernel
 * events on some CPUs (bpf/noise.*) as JSON lines, for a while. Its argv
 * is parsed into a struct trace_config first: the CPUs must exist (the
 * possible CPUs, as BPF maps are sized) and the threads be alive. Without
 * BPF in this engine it says why, as a `trace` record. */
#include "trace.h"
#include "bpf/noise.h"
#include "event_batch.h"
#include "args.h"
#include "json.h"
#include "textfile.h"
#include "topology.h"
#include "stopsig.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The number of possible CPUs (highest possible + 1), as the kernel sizes
 * per-CPU BPF maps. */
static int possible_cpus(void)
{
	char *text = read_text_file("/sys/devices/system/cpu/possible", 0);
	long nconf = sysconf(_SC_NPROCESSORS_CONF);
	int max = nconf > 0 ? (int)nconf + 1 : 8192, n = -1, highest = -1;
	int *cpus = calloc(max, sizeof *cpus);
	if (text && cpus) {
		text[strcspn(text, "\n")] = 0;
		n = cpulist_parse(text, cpus, max);
	}
	for (int i = 0; i < n; i++)
		highest = cpus[i] > highest ? cpus[i] : highest;
	free(text);
	free(cpus);
	return highest >= 0 ? highest + 1 : (nconf > 0 ? (int)nconf : 1);
}

void trace_parse_args(int argc, char **argv, struct trace_config *cfg)
{
	static const struct option longopts[] = {{"cpus", required_argument, 0, 'c'},
						 {"duration", required_argument, 0, 'd'},
						 {"tids", required_argument, 0, 't'},
						 {"dry-run", no_argument, 0, 'D'},
						 {0, 0, 0, 0}};
	const char *cpus_arg = NULL, *tids_arg = NULL;
	*cfg = (struct trace_config){0};
	optind = 2;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': cpus_arg = optarg; break;
		case 't': tids_arg = optarg; break;
		case 'd': cfg->duration_s = parse_seconds("--duration", optarg, 0); break;
		case 'D': cfg->dry_run = 1; break;
		default: die_usage("trace: unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("trace: unexpected argument '%s'", argv[optind]);
	if (!cpus_arg || cfg->duration_s <= 0)
		die_usage("usage: oslens-engine trace --cpus LIST --duration S [--tids LIST]");

	int possible = possible_cpus();
	cfg->cpus = calloc(possible + 1, sizeof *cfg->cpus);
	cfg->ncpus = cfg->cpus ? cpulist_parse(cpus_arg, cfg->cpus, possible + 1) : -1;
	if (cfg->ncpus <= 0)
		die_usage("--cpus: '%s' is not a CPU list (e.g. 0-3,8)", cpus_arg);
	for (int i = 0; i < cfg->ncpus; i++) {
		if (cfg->cpus[i] >= possible)
			die_usage("--cpus: CPU %d does not exist (%d possible)", cfg->cpus[i], possible);
		for (int k = 0; k < i; k++)
			if (cfg->cpus[k] == cfg->cpus[i])
				die_usage("--cpus: CPU %d is listed twice", cfg->cpus[i]);
	}
	cfg->tids = calloc(TRACE_MAX_TIDS, sizeof *cfg->tids);
	if (tids_arg) {
		cfg->ntids = cfg->tids ? cpulist_parse(tids_arg, cfg->tids, TRACE_MAX_TIDS) : -1;
		if (cfg->ntids <= 0)
			die_usage("--tids: '%s' is not a list of at most %d thread ids", tids_arg, TRACE_MAX_TIDS);
		for (int i = 0; i < cfg->ntids; i++) {
			char path[64];
			snprintf(path, sizeof path, "/proc/%d", cfg->tids[i]);
			if (cfg->tids[i] <= 0 || access(path, F_OK) != 0)
				die_usage("--tids: no thread %d", cfg->tids[i]);
		}
	}
}

void trace_emit_config(const struct trace_config *cfg)
{
	struct json *j = json_record("config");
	json_str(j, "command", "trace");
	json_arr(j, "cpus");
	for (int i = 0; i < cfg->ncpus; i++)
		json_int(j, NULL, cfg->cpus[i]);
	json_end(j);
	json_arr(j, "tids");
	for (int i = 0; i < cfg->ntids; i++)
		json_int(j, NULL, cfg->tids[i]);
	json_end(j);
	json_num(j, "duration_s", cfg->duration_s);
	json_emit(j);
}

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig)
{
	stop_signal = sig;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Keeps this process off the CPUs it watches, where it would be noise. */
static void move_off(const int *cpus, int ncpus)
{
	struct topology topo;
	if (topology_read(&topo) != 0)
		return;
	int *spare = calloc(topo.n, sizeof *spare);
	int n = spare ? topology_unused(&topo, cpus, ncpus, spare) : 0;
	if (n > 0)
		cpus_pin(spare, n);
	free(spare);
	free(topo.cpus);
}

int cmd_trace(int argc, char **argv)
{
	struct trace_config cfg;
	trace_parse_args(argc, argv, &cfg);
	if (cfg.dry_run) {
		trace_emit_config(&cfg);
		return 0;
	}
	int *cpus = cfg.cpus, ncpus = cfg.ncpus, *tids = cfg.tids, ntids = cfg.ntids;
	double duration = cfg.duration_s;

	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	stopsig_catch(&sa);
	move_off(cpus, ncpus);

	char why[512];
	if (event_batch_start(cpus, ncpus, tids, ntids, why, sizeof why) != 0) {
		fprintf(stderr, "oslens-engine: %s\n", why);
		free(cpus);
		free(tids);
		return 1;
	}

	struct event_batch b = {0};
	double end = now_s() + duration;
	int failed = 0;
	while (!stop_signal && !json_output_lost) {
		double left = end - now_s();
		if (left <= 0)
			break;
		int ms = left > 0.1 ? 100 : (int)(left * 1000) + 1;
		if (noise_bpf_poll(event_batch_add, &b, ms) < 0) {
			failed = 1;
			break;
		}
		event_batch_flush(&b);
	}
	event_batch_finish(&b, stop_signal); /* with what the kernel recorded up to now */
	free(cpus);
	free(tids);
	if (stop_signal)
		return 128 + stop_signal;
	return failed || json_output_lost ? 1 : 0;
}
