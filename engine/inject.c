/* `oslens-engine inject`: known noise, to check the detour probe against.
 * A thread pinned to one CPU, at real-time priority so that it preempts the
 * probe at once, wakes every period and spins for a set time; it reports
 * each injection it made as [start, end] on CLOCK_MONOTONIC. */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "json.h"

static volatile sig_atomic_t stop;
static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

struct inject_config {
	int cpu;
	long period_us, busy_us;
	int prio; /* SCHED_FIFO priority */
	double duration_s;
	int dry_run;
};

/* argv (argv[1] = "inject") into cfg, or one line on stderr and exit 2. */
static void inject_parse_args(int argc, char **argv, struct inject_config *cfg)
{
	static const struct option longopts[] = {{"cpu", required_argument, 0, 'c'},
						 {"period-us", required_argument, 0, 'p'},
						 {"busy-us", required_argument, 0, 'b'},
						 {"duration", required_argument, 0, 'd'},
						 {"prio", required_argument, 0, 'P'},
						 {"dry-run", no_argument, 0, 'D'},
						 {0, 0, 0, 0}};
	*cfg = (struct inject_config){.cpu = -1, .period_us = 10000, .busy_us = 100, .duration_s = 1, .prio = 1};
	optind = 2;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': cfg->cpu = (int)parse_long("--cpu", optarg, 0, CPU_SETSIZE - 1); break;
		case 'p': cfg->period_us = parse_long("--period-us", optarg, 2, 1000000000L); break;
		case 'b': cfg->busy_us = parse_long("--busy-us", optarg, 1, 1000000000L); break;
		case 'd': cfg->duration_s = parse_seconds("--duration", optarg, 0); break;
		case 'P': cfg->prio = (int)parse_long("--prio", optarg, 1, 99); break;
		case 'D': cfg->dry_run = 1; break;
		default: die_usage("inject: unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("inject: unexpected argument '%s'", argv[optind]);
	if (cfg->cpu < 0 || cfg->busy_us >= cfg->period_us)
		die_usage("inject needs --cpu N and 0 < --busy-us < --period-us");
}

int cmd_inject(int argc, char **argv)
{
	struct inject_config cfg;
	inject_parse_args(argc, argv, &cfg);
	if (cfg.dry_run) {
		struct json *j = json_record("config");
		json_str(j, "command", "inject");
		json_int(j, "cpu", cfg.cpu);
		json_int(j, "period_us", cfg.period_us);
		json_int(j, "busy_us", cfg.busy_us);
		json_int(j, "prio", cfg.prio);
		json_num(j, "duration_s", cfg.duration_s);
		json_emit(j);
		return 0;
	}
	int cpu = cfg.cpu;
	long period_us = cfg.period_us, busy_us = cfg.busy_us;
	double duration = cfg.duration_s;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		die_usage("inject: cannot run on CPU %d: %s", cpu, strerror(errno));
	struct sched_param sp = {.sched_priority = cfg.prio};
	if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
		die_usage("inject: SCHED_FIFO needs root or CAP_SYS_NICE: %s", strerror(errno));
	prctl(PR_SET_NAME, "oslens-inject");
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);

	size_t cap = (size_t)(duration * 1e6 / (double)period_us) + 2, n = 0;
	uint64_t(*made)[2] = calloc(cap, sizeof *made);
	if (!made)
		die_usage("inject: out of memory");
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	uint64_t end_at = mono_ns() + (uint64_t)(duration * 1e9);
	while (!stop && n < cap) {
		next.tv_nsec += period_us * 1000;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		if (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) != 0)
			continue;
		uint64_t start = mono_ns();
		if (start >= end_at)
			break;
		while (mono_ns() - start < (uint64_t)busy_us * 1000)
			;
		made[n][0] = start;
		made[n][1] = mono_ns();
		n++;
	}
	struct json *j = json_record("injected");
	json_int(j, "cpu", cpu);
	json_int(j, "period_us", period_us);
	json_int(j, "busy_us", busy_us);
	json_pairs(j, "intervals", made, n);
	json_emit(j);
	free(made);
	return 0;
}
