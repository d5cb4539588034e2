/* `oslens-engine profile`'s argv into a struct profile_config: every check
 * (an open --out-fd, a live --pid that is not the engine, a command or a
 * pid but not both) before anything is forked or attached. */
#include "profile_args.h"
#include "../args.h"
#include "../json.h"
#include "../topology.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static void usage(void)
{
	die_usage("usage: oslens-engine profile [--out-fd N] [--duration S] [--time-limit S] [--no-bpf] "
		  "[--no-syscalls] [--no-counters] [--cpus LIST] [--stdout-to-stderr] (--pid PID | -- CMD ARGS...)");
}

/* --cpus: every CPU online and in our own affinity mask (the command could
 * not run on another), none twice. */
static void parse_cpus(const char *arg, struct profile_config *cfg)
{
	struct topology topo;
	if (topology_read(&topo) != 0)
		die_usage("cannot read the CPU topology or affinity mask");
	cfg->cpus = malloc(sizeof(int) * (topo.n + 1));
	cfg->ncpus = cfg->cpus ? cpulist_parse(arg, cfg->cpus, topo.n + 1) : -1;
	if (cfg->ncpus <= 0)
		die_usage("--cpus: '%s' is not a CPU list of at most %d CPUs (e.g. 0-3,8)", arg, topo.n);
	for (int i = 0; i < cfg->ncpus; i++) {
		if (!topology_cpu(&topo, cfg->cpus[i]))
			die_usage("--cpus: CPU %d is not online or not in this process's affinity mask", cfg->cpus[i]);
		for (int k = 0; k < i; k++)
			if (cfg->cpus[k] == cfg->cpus[i])
				die_usage("--cpus: CPU %d is listed twice", cfg->cpus[i]);
	}
	free(topo.cpus);
}

void profile_parse_args(int argc, char **argv, struct profile_config *cfg)
{
	static const struct option longopts[] = {{"out-fd", required_argument, 0, 'o'},
						 {"duration", required_argument, 0, 'd'},
						 {"time-limit", required_argument, 0, 't'},
						 {"pid", required_argument, 0, 'p'},
						 {"no-bpf", no_argument, 0, 'n'},
						 {"no-syscalls", no_argument, 0, 's'},
						 {"no-counters", no_argument, 0, 'c'},
						 {"cpus", required_argument, 0, 'C'},
						 {"stdout-to-stderr", no_argument, 0, 'S'},
						 {"dry-run", no_argument, 0, 'D'},
						 {0, 0, 0, 0}};
	*cfg = (struct profile_config){.out_fd = -1, .bpf = 1, .syscalls = 1, .counters = 1};
	optind = 2;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "+", longopts, NULL)) != -1) {
		char *end;
		switch (c) {
		case 'o':
			cfg->out_fd = (int)strtol(optarg, &end, 10);
			if (*end || cfg->out_fd < 0 || fcntl(cfg->out_fd, F_GETFD) < 0)
				die_usage("--out-fd: '%s' is not an open file descriptor", optarg);
			break;
		case 'd': cfg->duration_s = parse_seconds("--duration", optarg, 0); break;
		case 't': cfg->time_limit_s = parse_seconds("--time-limit", optarg, 0); break;
		case 'p':
			cfg->pid = (pid_t)strtol(optarg, &end, 10);
			if (*end || cfg->pid <= 0)
				die_usage("--pid: '%s' is not a process id", optarg);
			if (kill(cfg->pid, 0) != 0 && errno == ESRCH)
				die_usage("--pid: no process %d", cfg->pid);
			if (cfg->pid == getpid())
				die_usage("--pid: cannot profile the profiler itself");
			break;
		case 'n': cfg->bpf = 0; break;
		case 's': cfg->syscalls = 0; break;
		case 'c': cfg->counters = 0; break;
		case 'C': parse_cpus(optarg, cfg); break;
		case 'S': cfg->stdout_to_stderr = 1; break;
		case 'D': cfg->dry_run = 1; break;
		default: usage();
		}
	}
	cfg->cmd = argv + optind;
	cfg->ncmd = argc - optind;
	if ((cfg->pid != 0) == (cfg->ncmd > 0))
		die_usage("profile: give either --pid PID or -- CMD ARGS...");
	if (cfg->ncmd > 0 && cfg->duration_s > 0)
		die_usage("profile: --duration is for --pid; a command is profiled until it exits (see --time-limit)");
	if (cfg->pid && (cfg->cpus || cfg->stdout_to_stderr))
		die_usage("profile: --cpus and --stdout-to-stderr are for a command the engine starts, not --pid");
	if (cfg->stdout_to_stderr && cfg->out_fd >= 0 && cfg->out_fd != STDOUT_FILENO)
		die_usage(
			"profile: --stdout-to-stderr is for records on stdout; with --out-fd the command keeps stdout");
}

void profile_emit_cpus(struct json *j, const struct profile_config *cfg)
{
	if (!cfg->cpus) {
		json_null(j, "cpus");
		return;
	}
	json_arr(j, "cpus");
	for (int i = 0; i < cfg->ncpus; i++)
		json_int(j, NULL, cfg->cpus[i]);
	json_end(j);
}

void profile_emit_config(const struct profile_config *cfg)
{
	struct json *j = json_record("config");
	json_str(j, "command", "profile");
	json_str(j, "mode", cfg->ncmd ? "command" : "pid");
	json_arr(j, "argv");
	for (int i = 0; i < cfg->ncmd; i++)
		json_str(j, NULL, cfg->cmd[i]);
	json_end(j);
	if (cfg->pid)
		json_int(j, "pid", cfg->pid);
	else
		json_null(j, "pid");
	json_num(j, "duration_s", cfg->duration_s);
	json_num(j, "time_limit_s", cfg->time_limit_s);
	json_int(j, "out_fd", cfg->out_fd);
	json_bool(j, "bpf", cfg->bpf);
	json_bool(j, "syscalls", cfg->syscalls);
	json_bool(j, "counters", cfg->counters);
	profile_emit_cpus(j, cfg);
	json_bool(j, "stdout_to_stderr", cfg->stdout_to_stderr);
	json_emit(j);
}
