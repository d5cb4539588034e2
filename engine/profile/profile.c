/* `oslens-engine profile`: where a workload's time goes in the kernel.
 *
 *   oslens-engine profile [--out-fd N] [--duration S] [--time-limit S] [--no-bpf]
 *                         [--no-syscalls] [--no-counters] [--cpus LIST] [--stdout-to-stderr]
 *                         (--pid PID | -- CMD ARGS...)
 *
 * --no-syscalls leaves the system-call tracepoints out: tracing every call
 * at entry and exit is the one cost that grows with the workload's call
 * rate (bench/profile.py measures it). --no-counters opens no perf counter:
 * inherited counters are copied at every fork, a cost `appscale` (which
 * times a command, and its rusage is enough) does not want.
 *
 * A command is forked and held before exec until everything is attached:
 * the BPF side follows it (and every child it forks), the counters start at
 * its exec. Its stdin, stdout and stderr are the engine's own, untouched;
 * the records go to fd N (or, where no other descriptor reaches the caller,
 * as through a guest's agent, to stdout, and --stdout-to-stderr sends the
 * command's stdout to stderr). --cpus LIST sets the command's CPUs while
 * it is held, so that it starts on them. With --pid the engine attaches to a running
 * process (and its existing descendants) for --duration, or until it exits
 * or the engine is signalled, and detaches without touching it.
 *
 * Records (engine/README.md): header, bpf, procfs begin, thread begin (--pid),
 * target, end_target, procfs end, thread end, counters, the BPF aggregates,
 * end. */
#include "../engine.h"
#include "../json.h"
#include "../topology.h"
#include "../textfile.h"
#include "counters.h"
#include "profile_args.h"
#include "../bpf/profile.h"
#include "../stopsig.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 4096

static volatile sig_atomic_t got_signal, signal_from_process, got_alarm;
static pid_t command_pid;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (!got_signal)
		got_signal = sig;
	/* A terminal's Ctrl-C reaches the command itself (same process group);
	 * a signal sent to the engine alone is passed on. */
	if (command_pid > 0 && si && (si->si_code == SI_USER || si->si_code == SI_QUEUE)) {
		signal_from_process = 1;
		kill(command_pid, sig);
	}
}

static void on_alarm(int sig)
{
	(void)sig;
	got_alarm = 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

/* ---- procfs ---- */

static void emit_procfs(const char *when)
{
	static const char *const files[] = {"/proc/stat", "/proc/interrupts", "/proc/softirqs", "/proc/vmstat"};
	struct json *j = json_record("procfs");
	json_str(j, "when", when);
	json_uint(j, "t_ns", now_ns());
	json_obj(j, "files");
	for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
		char *text = read_text_file(files[i], 0);
		if (text)
			json_str(j, files[i], text);
		free(text);
	}
	json_end(j);
	json_emit(j);
}

/* One thread's accounting from /proc: stat (times, faults, last CPU),
 * status (switches), schedstat (precise runtime). */
static void emit_proc_thread(pid_t tgid, pid_t tid, const char *when)
{
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/task/%d/stat", tgid, tid);
	char *stat = read_text_file(path, 0);
	if (!stat)
		return;
	char *rparen = strrchr(stat, ')'), *lparen = strchr(stat, '(');
	if (!rparen || !lparen) {
		free(stat);
		return;
	}
	char comm[64];
	snprintf(comm, sizeof comm, "%.*s", (int)(rparen - lparen - 1), lparen + 1);
	/* fields after "(comm) ": 3 state ... 10 minflt 12 majflt 14 utime 15 stime ... 39 processor */
	unsigned long long f[40] = {0};
	char *p = rparen + 2;
	for (int k = 3; k < 40 && *p; k++) {
		while (*p == ' ')
			p++;
		f[k] = strtoull(p, &p, 10);
		if (k == 3)
			while (*p && *p != ' ')
				p++; /* the state letter */
	}
	free(stat);
	long tck = sysconf(_SC_CLK_TCK);
	if (tck <= 0)
		tck = 100;
	unsigned long long runtime = 0, nvcsw = 0, nivcsw = 0;
	snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", tgid, tid);
	char *ss = read_text_file(path, 0);
	if (ss)
		runtime = strtoull(ss, NULL, 10);
	free(ss);
	snprintf(path, sizeof path, "/proc/%d/task/%d/status", tgid, tid);
	char *st = read_text_file(path, 0);
	if (st) {
		char *v = strstr(st, "\nvoluntary_ctxt_switches:");
		if (v)
			nvcsw = strtoull(v + 25, NULL, 10);
		v = strstr(st, "\nnonvoluntary_ctxt_switches:");
		if (v)
			nivcsw = strtoull(v + 28, NULL, 10);
	}
	free(st);
	struct json *j = json_record("thread");
	json_str(j, "when", when);
	json_str(j, "source", "proc");
	json_int(j, "tid", tid);
	json_int(j, "tgid", tgid);
	json_str(j, "comm", comm);
	json_uint(j, "utime_ns", f[14] * (1000000000ull / tck));
	json_uint(j, "stime_ns", f[15] * (1000000000ull / tck));
	json_uint(j, "runtime_ns", runtime);
	json_uint(j, "nvcsw", nvcsw);
	json_uint(j, "nivcsw", nivcsw);
	json_uint(j, "min_flt", f[10]);
	json_uint(j, "maj_flt", f[12]);
	json_int(j, "cpu", (long long)f[39]);
	json_emit(j);
}

/* Calls fn for every thread of process tgid. */
static int for_each_thread(pid_t tgid, void (*fn)(pid_t tgid, pid_t tid, void *arg), void *arg)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", tgid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
			fn(tgid, atoi(e->d_name), arg);
	closedir(d);
	return 0;
}

static void emit_thread_cb(pid_t tgid, pid_t tid, void *when)
{
	emit_proc_thread(tgid, tid, when);
}

struct tid_list {
	pid_t *tids;
	int n, cap;
};

static void collect_tid_cb(pid_t tgid, pid_t tid, void *arg)
{
	(void)tgid;
	struct tid_list *l = arg;
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 64;
		pid_t *more = realloc(l->tids, cap * sizeof *more);
		if (!more)
			return;
		l->tids = more;
		l->cap = cap;
	}
	l->tids[l->n++] = tid;
}

static pid_t parent_of(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	char *stat = read_text_file(path, 0);
	pid_t ppid = -1;
	char *rparen = stat ? strrchr(stat, ')') : NULL;
	if (rparen)
		sscanf(rparen + 2, "%*c %d", &ppid);
	free(stat);
	return ppid;
}

/* The process and its living descendants, parents before children. */
static int process_tree(pid_t root, pid_t *out, int max)
{
	int n = 0;
	out[n++] = root;
	DIR *d = opendir("/proc");
	if (!d)
		return n;
	pid_t *all = malloc(sizeof *all * 65536), *par = malloc(sizeof *par * 65536);
	int nall = 0;
	struct dirent *e;
	while (all && par && (e = readdir(d)) && nall < 65536)
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9') {
			all[nall] = atoi(e->d_name);
			par[nall] = parent_of(all[nall]);
			nall++;
		}
	closedir(d);
	for (int i = 0; i < n && n < max; i++)
		for (int k = 0; k < nall && n < max; k++)
			if (par[k] == out[i] && all[k] != root)
				out[n++] = all[k];
	free(all);
	free(par);
	return n;
}

/* ---- the command ---- */

/* Forks the command, held on `go` until released; its exec failure comes
 * back through `err` (close-on-exec, so EOF means the exec happened). */
static pid_t fork_command(char **argv, int saved_stdout, int stdout_to_stderr, int *go_w, int *err_r)
{
	int go[2], err[2];
	if (pipe2(go, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -1;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(go[1]);
		close(err[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		stopsig_as_inherited(); /* as the command would have started without us (nohup's SIGHUP ignored) */
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(127); /* the engine gave up before releasing us */
		if (stdout_to_stderr)
			dup2(STDERR_FILENO, STDOUT_FILENO);
		else if (saved_stdout >= 0)
			dup2(saved_stdout, STDOUT_FILENO);
		execvp(argv[0], argv);
		int e = errno;
		if (write(err[1], &e, sizeof e) < 0)
			_exit(127);
		_exit(127);
	}
	close(go[0]);
	close(err[1]);
	*go_w = go[1];
	*err_r = err[0];
	return pid;
}

/* With the command's rusage (itself and the descendants it waited for):
 * the CPU time of the tree without BPF; and the time limit asked for, which
 * a report names when it is what ended the command. */
static void emit_end_target(const char *how, int status, int has_status, uint64_t wall_ns, const struct rusage *ru,
			    double time_limit_s)
{
	struct json *j = json_record("end_target");
	json_str(j, "how", how);
	if (time_limit_s > 0)
		json_num(j, "time_limit_s", time_limit_s);
	else
		json_null(j, "time_limit_s");
	if (has_status && WIFEXITED(status))
		json_int(j, "code", WEXITSTATUS(status));
	else
		json_null(j, "code");
	if (has_status && WIFSIGNALED(status))
		json_int(j, "signal", WTERMSIG(status));
	else
		json_null(j, "signal");
	json_uint(j, "wall_ns", wall_ns);
	if (ru) {
		json_obj(j, "rusage");
		json_uint(j, "utime_ns", ru->ru_utime.tv_sec * 1000000000ull + ru->ru_utime.tv_usec * 1000ull);
		json_uint(j, "stime_ns", ru->ru_stime.tv_sec * 1000000000ull + ru->ru_stime.tv_usec * 1000ull);
		json_uint(j, "min_flt", ru->ru_minflt);
		json_uint(j, "maj_flt", ru->ru_majflt);
		json_uint(j, "nvcsw", ru->ru_nvcsw);
		json_uint(j, "nivcsw", ru->ru_nivcsw);
		json_uint(j, "maxrss_kb", ru->ru_maxrss);
		json_end(j);
	} else {
		json_null(j, "rusage");
	}
	json_emit(j);
}

static void emit_error(const char *msg)
{
	struct json *j = json_record("error");
	json_str(j, "message", msg);
	json_emit(j);
}

static void arm_alarm(double s)
{
	struct itimerval it = {.it_value = {.tv_sec = (time_t)s, .tv_usec = (suseconds_t)((s - (time_t)s) * 1e6)}};
	if (!it.it_value.tv_sec && !it.it_value.tv_usec)
		it.it_value.tv_usec = 1;
	setitimer(ITIMER_REAL, &it, NULL);
}

/* Waits for the command; on --time-limit or a signal passed on, it gets
 * SIGTERM, then SIGKILL after a grace period. */
static int wait_command(pid_t pid, double time_limit, int *status, const char **how, struct rusage *ru)
{
	const double grace = 2.0;
	int terminated = 0;
	if (time_limit > 0)
		arm_alarm(time_limit);
	*how = "exited";
	for (;;) {
		pid_t r = wait4(pid, status, 0, ru);
		if (r == pid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -1;
		if (got_alarm) {
			got_alarm = 0;
			kill(pid, terminated ? SIGKILL : SIGTERM);
			if (!terminated) {
				*how = time_limit > 0 && !got_signal ? "time_limit" : "signal";
				terminated = 1;
				arm_alarm(grace);
			}
		} else if (got_signal && !terminated && (signal_from_process || got_signal == SIGTERM)) {
			*how = "signal";
			terminated = 1;
			arm_alarm(grace);
		} else if (got_signal) {
			*how = "signal";
		}
	}
}

/* Waits for the attached process's exit, the duration, or a signal. */
static const char *wait_attached(pid_t pid, double duration)
{
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	uint64_t end = duration > 0 ? now_ns() + (uint64_t)(duration * 1e9) : 0;
	while (!got_signal) {
		int ms = 200;
		if (end) {
			uint64_t now = now_ns();
			if (now >= end)
				return "duration";
			if ((end - now) / 1000000 < 200)
				ms = (int)((end - now) / 1000000) + 1;
		}
		if (pidfd >= 0) {
			struct pollfd p = {.fd = pidfd, .events = POLLIN};
			if (poll(&p, 1, ms) == 1) {
				close(pidfd);
				return "exited";
			}
		} else {
			if (kill(pid, 0) != 0 && errno == ESRCH)
				return "exited";
			usleep(ms * 1000);
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	return "signal";
}

int cmd_profile(int argc, char **argv)
{
	struct profile_config cfg;
	profile_parse_args(argc, argv, &cfg);
	if (cfg.dry_run) {
		profile_emit_config(&cfg);
		return 0;
	}
	char **cmd = cfg.cmd;
	int ncmd = cfg.ncmd;
	pid_t pid = cfg.pid; /* a command's, once forked */

	/* The records leave on --out-fd; stdout goes back to the command. */
	int saved_stdout = -1;
	if (cfg.out_fd >= 0 && cfg.out_fd != STDOUT_FILENO) {
		saved_stdout = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
		if (dup2(cfg.out_fd, STDOUT_FILENO) < 0)
			die_usage("--out-fd: %s", strerror(errno));
		close(cfg.out_fd);
	}
	signal(SIGPIPE, SIG_IGN);

	struct json *j = json_record("header");
	json_str(j, "command", "profile");
	json_str(j, "version", ENGINE_VERSION);
	json_str(j, "mode", ncmd ? "command" : "pid");
	json_arr(j, "argv");
	for (int i = 0; i < ncmd; i++)
		json_str(j, NULL, cmd[i]);
	json_end(j);
	if (pid)
		json_int(j, "pid", pid);
	else
		json_null(j, "pid");
	json_int(j, "cpus_possible", sysconf(_SC_NPROCESSORS_CONF));
	char *online = read_text_file("/sys/devices/system/cpu/online", 0);
	json_arr(j, "cpus_online");
	if (online) {
		online[strcspn(online, "\n")] = 0;
		long nconf = sysconf(_SC_NPROCESSORS_CONF);
		int max = nconf > 0 ? (int)nconf + 1 : 8192;
		int *cpus = calloc(max, sizeof *cpus);
		int n = cpus ? cpulist_parse(online, cpus, max) : -1;
		for (int i = 0; i < n; i++)
			json_int(j, NULL, cpus[i]);
		free(cpus);
	}
	json_end(j);
	free(online);
	json_int(j, "clk_tck", sysconf(_SC_CLK_TCK));
	json_int(j, "page_size", sysconf(_SC_PAGESIZE));
	profile_emit_cpus(j, &cfg);
	json_emit(j);

	struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO};
	sigemptyset(&sa.sa_mask);
	stopsig_catch(&sa);
	sigaction(SIGQUIT, &sa, NULL);
	struct sigaction alarm_sa = {.sa_handler = on_alarm};
	sigemptyset(&alarm_sa.sa_mask);
	sigaction(SIGALRM, &alarm_sa, NULL);

	/* On the heap, not a static: the engine's image, which every fork
	 * probe's worker carries, keeps no room for 4,096 pids. */
	pid_t *tree = malloc(MAX_PROCS * sizeof *tree);
	if (!tree) {
		emit_error("no memory for the process tree");
		return EXIT_MEASURE_FAILED;
	}
	int go_w = -1, err_r = -1;
	if (ncmd) {
		pid = fork_command(cmd, saved_stdout, cfg.stdout_to_stderr, &go_w, &err_r);
		if (pid < 0) {
			emit_error("cannot fork the command");
			free(tree);
			return EXIT_MEASURE_FAILED;
		}
		command_pid = pid;
		/* Held before exec, it takes --cpus now: every thread and child it
		 * makes inherits them (appscale's confinement where no cgroup
		 * reaches, as in a guest). */
		if (cfg.cpus && cpus_pin_pid(pid, cfg.cpus, cfg.ncpus) != 0) {
			char msg[160];
			snprintf(msg, sizeof msg, "--cpus: cannot set the command's CPUs: %s", strerror(errno));
			emit_error(msg);
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			free(tree);
			return EXIT_MEASURE_FAILED;
		}
	}

	char why[512] = "";
	int bpf = 0;
	if (!cfg.bpf)
		snprintf(why, sizeof why, "not asked for (--no-bpf)");
	else
		bpf = profile_bpf_start(!cfg.syscalls ? "syscalls" : "", why, sizeof why) == 0;

	/* the processes followed from the start */
	int ntree = ncmd ? (tree[0] = pid, 1) : process_tree(pid, tree, MAX_PROCS);
	for (int i = 0; bpf && i < ntree; i++)
		profile_bpf_follow(tree[i]);
	struct tid_list tids = {0};
	if (ncmd)
		collect_tid_cb(pid, pid, &tids);
	for (int i = 0; !ncmd && i < ntree; i++)
		for_each_thread(tree[i], collect_tid_cb, &tids);
	if (bpf)
		profile_bpf_time_faults(tids.tids, tids.n);

	j = json_record("bpf");
	json_bool(j, "loaded", bpf);
	if (bpf)
		json_null(j, "why");
	else
		json_str(j, "why", why);
	json_list(j, "missing", profile_bpf_missing());
	json_arr(j, "skipped");
	if (bpf && !cfg.syscalls)
		json_str(j, NULL, "syscalls");
	json_end(j);
	json_emit(j);

	for (int i = 0; !ncmd && i < ntree; i++)
		for_each_thread(tree[i], emit_thread_cb, "begin");
	if (cfg.counters)
		counters_open(tids.tids, tids.n, ncmd > 0);
	free(tids.tids);

	emit_procfs("begin");
	uint64_t t0 = now_ns();
	j = json_record("target");
	json_int(j, "pid", pid);
	json_uint(j, "t_ns", t0);
	json_emit(j);

	const char *how;
	int rc = 0;
	if (ncmd) {
		int status = 0;
		if (write(go_w, "g", 1) != 1) {
			emit_error("cannot release the command");
			kill(pid, SIGKILL);
		}
		close(go_w);
		int exec_errno = 0;
		ssize_t n;
		do
			n = read(err_r, &exec_errno, sizeof exec_errno);
		while (n < 0 && errno == EINTR);
		close(err_r);
		struct rusage ru;
		int waited = wait_command(pid, cfg.time_limit_s, &status, &how, &ru);
		uint64_t wall = now_ns() - t0;
		if (n == (ssize_t)sizeof exec_errno) {
			char msg[512];
			snprintf(msg, sizeof msg, "cannot execute '%s': %s", cmd[0], strerror(exec_errno));
			emit_error(msg);
			rc = EXIT_USAGE;
		}
		emit_end_target(how, status, waited == 0, wall, waited == 0 ? &ru : NULL, cfg.time_limit_s);
	} else {
		how = wait_attached(pid, cfg.duration_s);
		emit_end_target(how, 0, 0, now_ns() - t0, NULL, 0);
	}
	emit_procfs("end");

	/* threads still alive at the end: the attached process, descendants,
	 * a command's leftovers; the kernel side knows the whole tree */
	if (bpf)
		ntree = profile_bpf_followed(tree, MAX_PROCS);
	for (int i = 0; i < ntree; i++)
		for_each_thread(tree[i], emit_thread_cb, "end");
	if (cfg.counters)
		counters_emit_and_close();
	if (bpf)
		profile_bpf_emit();
	profile_bpf_stop();

	j = json_record("end");
	json_str(j, "status", got_signal ? "interrupted" : rc ? "failed" : "ok");
	if (got_signal)
		json_int(j, "signal", got_signal);
	json_emit(j);
	free(tree);
	return rc;
}
