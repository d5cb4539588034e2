/* `oslens-engine profile`'s argv into a struct profile_config: every check
 * (an open --out-fd, a live --pid that is not the engine, a command or a
 * pid but not both) before anything is forked or attached. */
#include "profile_args.h"
#include "../args.h"
#include "../json.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static void usage(void)
{
	die_usage("usage: oslens-engine profile [--out-fd N] [--duration S] [--time-limit S] [--no-bpf] "
		  "[--no-syscalls] [--no-counters] (--pid PID | -- CMD ARGS...)");
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
	json_emit(j);
}
