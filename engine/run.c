/* The master of `oslens-engine run`: spawns pinned workers (worker.c),
 * releases them together, samples or times them, writes the records
 * (run_emit.c), and tears everything down whatever happens. */
#include "cpustat.h"
#include "partners.h"
#include "run_emit.h"
#include "run_parts.h"
#include "run_shm.h"
#include "worker.h"
#include "cluster/cluster.h"
#include "json.h"
#include "stopsig.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sem.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define STOP_GRACE_NS 10000000000ull

/* The master's own state; the workers see only the shared memory (run_shm.h). */
struct master {
	const struct run_config *cfg;
	const struct topology *topo; /* the CPUs the run may use, before the master pinned itself */
	const char *tmpdir;	     /* private to this run: probes' files, workers' results */
	int apart;		     /* the master runs on no worker's CPU */
	struct shm *shm;
	size_t shm_len;
	int shm_fd;		/* a memfd: a worker exec'd afresh maps it again */
	int fresh_image;	/* this repetition's worker processes are exec'd afresh */
	struct probe_env *envs; /* one per choice */
	pid_t pids[4096];
	int npids;
	pid_t pgid;
	uint64_t deadline;
	char failure[300];
	int failed_worker;
	int late_samples; /* samples taken over half an interval late */
	struct partner_watch *partners;
	double window_s; /* the measured window as sampled */
	/* the attribution parts' view of the workers (run_parts.h): per worker
	 * its CPU, process and thread */
	int *view_cpus, *view_pids, *view_tids;
	int *view_helpers, *view_served; /* nworkers * PROBE_PARTNERS_MAX */
};

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	if (!got_signal)
		got_signal = sig;
}
static void on_child(int sig)
{
	(void)sig;
}

/* Whether this repetition's workers can be fresh images: every probe asks
 * for it, they are processes, and no global set-up left state in the
 * master that a fresh image would not have. */
static int fresh_images(const struct master *m)
{
	const struct run_config *cfg = m->cfg;
	if (cfg->threaded)
		return 0;
	for (int k = 0; k < cfg->nchoices; k++)
		if (!cfg->choices[k].probe->fresh_image || m->envs[k].data || m->envs[k].nsems)
			return 0;
	return 1;
}

static int spawn(struct master *m)
{
	const struct run_config *cfg = m->cfg;
	pid_t self = getpid();
	int ntasks = cfg->threaded ? 1 : cfg->nworkers;
	m->pgid = 0;
	m->fresh_image = fresh_images(m);
	clock_save(&m->shm->ctl.clock);
	for (int i = 0; i < cfg->nworkers; i++)
		m->shm->slot[i].c.planned_cpu = cfg->cpus[i].cpu;
	for (int i = 0; i < ntasks; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			snprintf(m->failure, sizeof m->failure, "fork of worker %d: %s", i, strerror(errno));
			return -1;
		}
		if (pid == 0) {
			worker_child_init(self, m->pgid);
			if (m->fresh_image) /* returns only having failed */
				worker_exec_fresh(cfg, m->topo, m->shm, m->shm_fd, m->tmpdir, i);
			if (cfg->threaded)
				worker_host_threads(m->shm, cfg, m->envs);
			worker_main(m->shm, cfg, m->envs, i);
			_exit(0);
		}
		if (!m->pgid)
			m->pgid = pid;
		setpgid(pid, m->pgid); /* both sides set it: no race with the first killpg */
		m->pids[m->npids++] = pid;
	}
	return 0;
}

static int is_worker_pid(const struct master *m, pid_t pid)
{
	for (int i = 0; i < m->npids; i++)
		if (m->pids[i] == pid)
			return 1;
	return 0;
}

static const char *describe_status(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	return buf;
}

/* Why the run must stop now, or NULL. Reaps exited children on the way:
 * workers, and orphans handed to us as child subreaper. */
static const char *check(struct master *m, int expect_exit)
{
	static char why[300];
	int status;
	pid_t pid;
	/* A worker's own account of its failure first: it exits right after. */
	for (int i = 0; i < m->cfg->nworkers; i++)
		if (__atomic_load_n(&m->shm->slot[i].c.state, __ATOMIC_ACQUIRE) == W_FAILED) {
			snprintf(why, sizeof why, "worker %d (cpu %d): %s", i, m->cfg->cpus[i].cpu,
				 m->shm->slot[i].c.msg);
			m->failed_worker = i;
			return why;
		}
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (!is_worker_pid(m, pid))
			continue;
		for (int i = 0; i < m->npids; i++)
			if (m->pids[i] == pid)
				m->pids[i] = -pid; /* reaped: never signal a recycled pid */
		int clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (!clean || !expect_exit) {
			char st[96];
			int idx = -1;
			for (int i = 0; i < m->cfg->nworkers; i++)
				if (m->shm->slot[i].c.pid == pid)
					idx = i;
			if (m->cfg->threaded)
				snprintf(why, sizeof why, "worker process %d %s", pid,
					 describe_status(status, st, sizeof st));
			else
				snprintf(why, sizeof why, "worker %d (pid %d, cpu %d) %s", idx, pid,
					 idx >= 0 ? m->cfg->cpus[idx].cpu : -1, describe_status(status, st, sizeof st));
			m->failed_worker = idx;
			return why;
		}
	}
	/* a partner's death, once no worker's is news: the watch kills its
	 * worker, which waits on the partner for ever */
	int w;
	const char *partner = m->partners ? partners_check(m->partners, m->shm, &w) : NULL;
	if (partner) {
		snprintf(why, sizeof why, "worker %d (cpu %d): %s", w, m->cfg->cpus[w].cpu, partner);
		m->failed_worker = w;
		return why;
	}
	if (got_signal)
		return "interrupted";
	if (json_output_lost)
		return "output closed";
	if (m->deadline && clock_ns() > m->deadline)
		return "time limit exceeded";
	return NULL;
}

/* Sleeps until `until` (clock_ns), waking early for signals and child
 * exits; an attribution part that streams (--trace) drains the kernel's
 * events meanwhile. */
static void sleep_until(uint64_t until)
{
	uint64_t now = clock_ns();
	if (now >= until)
		return;
	uint64_t d = until - now;
	if (d > 10000000ull) /* re-check at least every 10 ms */
		d = 10000000ull;
	if (d >= 1000000ull && run_parts_collect((int)(d / 1000000ull)))
		return;
	struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
	nanosleep(&ts, NULL);
}

static int count_state(const struct master *m, int state)
{
	int n = 0;
	for (int i = 0; i < m->cfg->nworkers; i++)
		n += __atomic_load_n(&m->shm->slot[i].c.state, __ATOMIC_ACQUIRE) == state;
	return n;
}

static int live_pids(const struct master *m)
{
	int n = 0;
	for (int i = 0; i < m->npids; i++)
		n += m->pids[i] > 0;
	return n;
}

/* Stops every worker and every descendant, politely first. */
static void stop_all(struct master *m, int polite)
{
	m->shm->ctl.stop = 1;
	if (!m->shm->ctl.go) { /* release sleepers so that they see stop */
		m->shm->ctl.go = 1;
		futex(&m->shm->ctl.go, FUTEX_WAKE, 1 << 30);
	}
	uint64_t until = clock_ns() + (polite ? STOP_GRACE_NS : 0);
	while (live_pids(m) && clock_ns() < until) {
		int status;
		pid_t pid;
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			for (int i = 0; i < m->npids; i++)
				if (m->pids[i] == pid)
					m->pids[i] = -pid;
		sleep_until(clock_ns() + 1000000ull);
	}
	if (m->pgid > 0)
		killpg(m->pgid, SIGKILL);
	for (int i = 0; i < m->npids; i++)
		if (m->pids[i] > 0)
			kill(m->pids[i], SIGKILL);
	/* Reap workers and every orphan reparented to us; bounded, never hangs. */
	uint64_t give_up = clock_ns() + 5000000000ull;
	int status;
	for (;;) {
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid < 0 && errno == ECHILD)
			break;
		if (pid > 0) {
			for (int i = 0; i < m->npids; i++)
				if (m->pids[i] == pid)
					m->pids[i] = -pid;
			continue;
		}
		if (clock_ns() > give_up)
			break;
		sleep_until(clock_ns() + 1000000ull);
	}
}

/* Fixed time: the master samples every counter each interval after warm-up,
 * and /proc/stat at the first and the last sample (the window measured). */
static const char *measure_fixed_time(struct master *m, int rep, struct cpustat_window *stat)
{
	const struct run_config *cfg = m->cfg;
	int nw = cfg->nworkers;
	uint64_t dur = (uint64_t)(cfg->duration_s * 1e9), step = (uint64_t)(cfg->interval_s * 1e9);
	int k = (int)((dur + step - 1) / step);
	uint64_t *ts = calloc(k + 1, sizeof *ts), *samples = calloc((size_t)(k + 1) * nw, sizeof *samples);
	if (!ts || !samples)
		return "out of memory for samples";
	uint64_t t0 = m->shm->ctl.t_go + (uint64_t)(cfg->warmup_s * 1e9);
	const char *why = NULL;
	for (int s = 0; s <= k && !why; s++) {
		uint64_t at = t0 + (s == k ? dur : (uint64_t)s * step);
		while (!(why = check(m, 0)) && clock_ns() < at)
			sleep_until(at);
		if (why)
			break;
		ts[s] = clock_ns();
		for (int i = 0; i < nw; i++)
			samples[(size_t)s * nw + i] = m->shm->slot[i].ops;
		if (s == 0 || s == k)
			cpustat_take(stat, cfg, s == k);
		run_parts_sampled(s == 0, s == k);
		m->late_samples += ts[s] - at > step / 2;
	}
	m->window_s = why ? 0 : (double)(ts[k] - ts[0]) / 1e9;
	m->shm->ctl.stop = 1;
	if (!why) {
		uint64_t until = clock_ns() + STOP_GRACE_NS;
		while (!(why = check(m, 1)) && count_state(m, W_DONE) < nw && clock_ns() < until)
			sleep_until(clock_ns() + 1000000ull);
		if (!why && count_state(m, W_DONE) < nw)
			why = "workers did not stop within 10 s of the stop flag";
	}
	if (!why) {
		double secs = (double)(ts[k] - ts[0]) / 1e9;
		for (int i = 0; i < nw; i++) {
			uint64_t ops = samples[(size_t)k * nw + i] - samples[i];
			struct json *j = json_record("worker");
			emit_worker_common(j, cfg, &m->shm->slot[i], rep, i);
			json_uint(j, "ops", ops);
			json_num(j, "seconds", secs);
			json_num(j, "ops_per_sec", (double)ops / secs);
			json_arr(j, "interval_ops");
			for (int s = 1; s <= k; s++)
				json_uint(j, NULL, samples[(size_t)s * nw + i] - samples[(size_t)(s - 1) * nw + i]);
			json_end(j);
			json_arr(j, "interval_s");
			for (int s = 1; s <= k; s++)
				json_num(j, NULL, (double)(ts[s] - ts[s - 1]) / 1e9);
			json_end(j);
			emit_rusage(j, &m->shm->slot[i]);
			json_emit(j);
		}
	}
	free(ts);
	free(samples);
	return why;
}

/* Fixed work: every worker times its own cfg->ops operations. */
static const char *measure_fixed_work(struct master *m, int rep)
{
	int nw = m->cfg->nworkers;
	const char *why;
	while (!(why = check(m, 1)) && count_state(m, W_DONE) < nw)
		sleep_until(clock_ns() + 2000000ull);
	if (why)
		return why;
	uint64_t first = UINT64_MAX;
	for (int i = 0; i < nw; i++)
		if (m->shm->slot[i].c.t_start < first)
			first = m->shm->slot[i].c.t_start;
	for (int i = 0; i < nw; i++) {
		const struct slot *s = &m->shm->slot[i];
		double secs = (double)(s->c.t_end - s->c.t_start) / 1e9;
		struct json *j = json_record("worker");
		emit_worker_common(j, m->cfg, s, rep, i);
		json_uint(j, "ops", s->c.done_ops);
		json_num(j, "seconds", secs);
		json_num(j, "ops_per_sec", (double)s->c.done_ops / secs);
		json_uint(j, "start_offset_ns", s->c.t_start - first);
		emit_rusage(j, s);
		json_emit(j);
	}
	return NULL;
}

/* The workers as the attribution parts see them, once all are ready. */
static struct run_view workers_view(struct master *m, int rep)
{
	for (int i = 0; i < m->cfg->nworkers; i++) {
		m->view_cpus[i] = m->cfg->cpus[i].cpu;
		m->view_pids[i] = m->shm->slot[i].c.pid;
		m->view_tids[i] = m->shm->slot[i].c.tid;
	}
	int nhelpers = 0; /* the partner processes the workers forked, each with its worker */
	for (int i = 0; i < m->cfg->nworkers; i++)
		for (int k = 0; k < PROBE_PARTNERS_MAX; k++) {
			int pid = __atomic_load_n(&m->shm->slot[i].c.partners[k], __ATOMIC_ACQUIRE);
			if (pid > 0) {
				m->view_helpers[nhelpers] = pid;
				m->view_served[nhelpers++] = m->view_tids[i];
			}
		}
	return (struct run_view){.cfg = m->cfg,
				 .rep = rep,
				 .nworkers = m->cfg->nworkers,
				 .cpus = m->view_cpus,
				 .pids = m->view_pids,
				 .tids = m->view_tids,
				 .helpers = m->view_helpers,
				 .served = m->view_served,
				 .nhelpers = nhelpers};
}

static void release_sems(struct probe_env *env)
{
	for (int i = 0; i < env->nsems; i++)
		semctl(env->sem_ids[i], 0, IPC_RMID);
	free(env->sem_ids);
	env->sem_ids = NULL;
	env->nsems = env->sem_cap = 0;
}

/* One repetition; returns NULL or why it failed. */
static const char *run_rep(struct master *m, int rep)
{
	const struct run_config *cfg = m->cfg;
	const char *why = NULL;
	static char setup_err[256];
	int set_up = 0;

	memset(m->shm, 0, m->shm_len);
	partners_reset(m->partners);
	m->shm->ctl.rep = rep;
	m->npids = 0;
	m->pgid = 0; /* never signal the group of a previous repetition */
	m->failed_worker = -1;
	m->late_samples = 0;
	m->window_s = 0;
	for (; set_up < cfg->nchoices; set_up++) {
		struct probe_env *env = &m->envs[set_up];
		const struct choice *c = &cfg->choices[set_up];
		probe_env_init(env, cfg, c, m->tmpdir);
		if (c->probe->global_setup && c->probe->global_setup(env) != 0) {
			snprintf(setup_err, sizeof setup_err, "%s set-up: %s", c->probe->name, strerror(errno));
			why = setup_err;
			set_up++; /* its teardown frees what its set-up made before failing */
			break;
		}
	}
	emit_resources(rep, m->tmpdir, m->envs, cfg->nchoices);
	if (!why && !(why = check(m, 0)) && spawn(m) != 0)
		why = m->failure;
	while (!why && !(why = check(m, 0)) && __atomic_load_n(&m->shm->ctl.ready, __ATOMIC_ACQUIRE) < cfg->nworkers)
		sleep_until(clock_ns() + 1000000ull);

	/* As a rank of an MPI job, all ranks start together, or none does. */
	if (cluster_agree(why != NULL) && !why)
		why = "another rank of the job failed before the start";
	uint64_t t_go = 0;
	struct cpustat_window stat;
	if (cpustat_window_init(&stat, cfg) != 0 && !why)
		why = "out of memory";
	if (!why) {
		emit_started(cfg, m->shm, rep);
		struct run_view view = workers_view(m, rep);
		run_parts_attach(&view);
		if (cfg->ops) /* fixed work: the whole repetition */
			cpustat_take(&stat, cfg, 0);
		/* The measured window, on CLOCK_MONOTONIC (the BPF side's clock):
		 * from the end of the warm-up for the duration. Given before the
		 * workers are released, from CLOCK_MONOTONIC read then: read after,
		 * a master that shares a CPU with a worker could read it late and
		 * miss that worker's first events. */
		uint64_t mono_at_go = mono_ns();
		t_go = clock_ns();
		uint64_t window_start = mono_at_go + (uint64_t)(cfg->warmup_s * 1e9);
		run_parts_window(&view, window_start, window_start + (uint64_t)(cfg->duration_s * 1e9));
		m->shm->ctl.t_go = t_go;
		m->shm->ctl.warm_deadline = t_go + (uint64_t)(cfg->warmup_s * 1e9);
		__atomic_store_n(&m->shm->ctl.go, 1, __ATOMIC_RELEASE);
		futex(&m->shm->ctl.go, FUTEX_WAKE, 1 << 30);
		why = cfg->ops ? measure_fixed_work(m, rep) : measure_fixed_time(m, rep, &stat);
		if (cfg->ops)
			cpustat_take(&stat, cfg, 1);
		run_parts_finish(rep, !why);
		if (!why)
			cpustat_emit(&stat, cfg, rep);
		if (!why && run_has_results(cfg))
			why = emit_results(m->tmpdir, cfg->nworkers, rep);
	}
	uint64_t t_end = clock_ns();
	run_parts_detach(); /* on every path: nothing stays loaded */
	cpustat_window_free(&stat);
	stop_all(m, !why || strcmp(why, "interrupted") != 0);
	while (set_up-- > 0) {
		if (m->envs[set_up].probe->global_teardown)
			m->envs[set_up].probe->global_teardown(&m->envs[set_up]);
		release_sems(&m->envs[set_up]);
	}

	/* A master starved of CPU samples late, and a window sampled late is not
	 * the window asked for: say so rather than report its numbers as good. */
	int late = !why && !cfg->ops && (m->window_s < 0.9 * cfg->duration_s || m->late_samples > 1);
	struct json *j = json_record("rep");
	json_int(j, "rep", rep);
	json_str(j, "status", why ? (got_signal ? "interrupted" : "failed") : late ? "late" : "ok");
	if (!cfg->ops && !why) {
		json_num(j, "window_s", m->window_s);
		json_int(j, "late_samples", m->late_samples);
	}
	if (!why) {
		uint64_t lo = UINT64_MAX, hi = 0;
		for (int i = 0; i < cfg->nworkers; i++) {
			uint64_t t = m->shm->slot[i].c.t_release;
			lo = t < lo ? t : lo;
			hi = t > hi ? t : hi;
		}
		json_num(j, "wall_s", (double)(t_end - t_go) / 1e9);
		json_uint(j, "release_skew_ns", hi - lo);
		json_uint(j, "release_latency_ns", hi - t_go);
	}
	json_emit(j);
	return why;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* The master wakes to sample (and to drain kernel events): where a CPU no
 * worker uses exists, it runs there, so its own wake-ups are never noise
 * on the CPUs it measures. The header says where it ran. */
static int place_master(const struct run_config *cfg, const struct topology *topo)
{
	int *used = calloc(cfg->nworkers, sizeof *used), *spare = calloc(topo->n, sizeof *spare);
	int placed = 0;
	if (used && spare) {
		for (int i = 0; i < cfg->nworkers; i++)
			used[i] = cfg->cpus[i].cpu;
		int n = topology_unused(topo, used, cfg->nworkers, spare);
		placed = n > 0 && cpus_pin(spare, n) == 0;
	}
	free(used);
	free(spare);
	return placed;
}

void run_catch_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	stopsig_catch(&sa);
	sa.sa_handler = on_child;
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* a mask inherited from the parent (one that blocked them around a
	 * critical step) would keep them, pending, from ever stopping us */
	sigset_t stops;
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	sigaddset(&stops, SIGCHLD);
	sigprocmask(SIG_UNBLOCK, &stops, NULL);
}

/* The run's last record. */
static void emit_end(const char *status)
{
	struct json *j = json_record("end");
	json_str(j, "status", status);
	if (got_signal)
		json_int(j, "signal", got_signal);
	json_emit(j);
}

int run_probe(const struct run_config *cfg, const struct topology *topo)
{
	/* Asked to stop before anything was made. The ranks of a job decide
	 * it together: one returning here alone would skip the collectives the
	 * others wait in, and the job would hang. */
	if (cluster_agree(got_signal != 0)) {
		if (!got_signal)
			emit_error("another rank of the job was stopped before the start", -1);
		emit_end(got_signal ? "interrupted" : "failed");
		return got_signal ? 128 + got_signal : EXIT_MEASURE_FAILED;
	}
	struct master m = {.cfg = cfg, .topo = topo};
	static char tmpl[4096];
	/* With a ledger, the name starts with this process's pid and start
	 * time, written there first: found after a SIGKILL, never another's. */
	char prefix[sizeof tmpl - sizeof "XXXXXX"]; /* room left for mkdtemp's suffix */
	snprintf(prefix, sizeof prefix, "%s/oslens.%d.%llu.", cfg->tmpdir_base, (int)getpid(), probe_self_start());
	if (probe_own("tmpdir %s\n", prefix) == 0)
		snprintf(tmpl, sizeof tmpl, "%sXXXXXX", prefix);
	else
		snprintf(tmpl, sizeof tmpl, "%s/oslens.XXXXXX", cfg->tmpdir_base);
	if (!mkdtemp(tmpl))
		die_usage("cannot create a temporary directory in %s: %s", cfg->tmpdir_base, strerror(errno));
	m.tmpdir = tmpl;

	prctl(PR_SET_CHILD_SUBREAPER, 1);
	prctl(PR_SET_TIMERSLACK, 1);

	m.envs = calloc(cfg->nchoices, sizeof *m.envs);
	m.partners = cfg->threaded ? NULL : partners_new(cfg->nworkers); /* a thread's partner is a thread */
	m.view_cpus = calloc(cfg->nworkers, sizeof *m.view_cpus);
	m.view_pids = calloc(cfg->nworkers, sizeof *m.view_pids);
	m.view_tids = calloc(cfg->nworkers, sizeof *m.view_tids);
	m.view_helpers = calloc((size_t)cfg->nworkers * PROBE_PARTNERS_MAX, sizeof *m.view_helpers);
	m.view_served = calloc((size_t)cfg->nworkers * PROBE_PARTNERS_MAX, sizeof *m.view_served);
	if (!m.envs || (!cfg->threaded && !m.partners) || !m.view_cpus || !m.view_pids || !m.view_tids ||
	    !m.view_helpers || !m.view_served)
		die_usage("out of memory");
	m.shm_len = sizeof(struct shm) + (size_t)cfg->nworkers * sizeof(struct slot);
	/* a memfd, not an anonymous mapping: a worker exec'd afresh maps it again */
	m.shm_fd = memfd_create("oslens-run", MFD_CLOEXEC);
	m.shm = MAP_FAILED;
	if (m.shm_fd >= 0 && ftruncate(m.shm_fd, (off_t)m.shm_len) == 0)
		m.shm = mmap(NULL, m.shm_len, PROT_READ | PROT_WRITE, MAP_SHARED, m.shm_fd, 0);
	if (m.shm == MAP_FAILED) {
		nftw(m.tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		die_usage("cannot map shared memory for %d workers: %s", cfg->nworkers, strerror(errno));
	}
	if (cfg->time_limit_s > 0)
		m.deadline = clock_ns() + (uint64_t)(cfg->time_limit_s * 1e9);

	m.apart = place_master(cfg, topo);
	emit_header(cfg, topo, m.tmpdir, m.apart);
	const char *why = NULL;
	for (int rep = 0; rep < cfg->reps && !why; rep++) {
		why = run_rep(&m, rep);
		if (cluster_agree(why != NULL) && !why)
			why = "another rank of the job failed";
		cluster_gather();
	}

	nftw(m.tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	munmap(m.shm, m.shm_len);
	close(m.shm_fd);
	partners_free(m.partners);
	free(m.view_cpus);
	free(m.view_pids);
	free(m.view_tids);
	free(m.view_helpers);
	free(m.view_served);

	const char *status = "ok";
	int code = 0;
	if (why && got_signal) {
		status = "interrupted";
		code = 128 + got_signal;
	} else if (why && !strcmp(why, "time limit exceeded")) {
		status = "timeout";
		code = EXIT_MEASURE_FAILED;
	} else if (why) {
		status = "failed";
		code = EXIT_MEASURE_FAILED;
	}
	if (why && !got_signal)
		emit_error(why, m.failed_worker);
	emit_end(status);
	return code;
}
