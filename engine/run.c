/* The harness: spawns pinned workers, releases them together, samples or
 * times them, and tears everything down whatever happens.
 *
 * Only the master prints. Workers talk to it through one shared anonymous
 * mapping: a control block and one slot per worker, the hot op counter of
 * each slot alone on its cache lines. */
#include "engine.h"
#include "json.h"
#include "trace/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define LINE 128 /* two cache lines: the adjacent-line prefetcher pairs them */
#define STOP_GRACE_NS 10000000000ull

enum wstate { W_INIT, W_READY, W_RUNNING, W_DONE, W_FAILED };

struct slot {
	volatile uint64_t ops __attribute__((aligned(LINE)));
	struct {
		volatile int state;
		int pid, tid, cpu_start, cpu_end;
		uint64_t t_release, t_start, t_end, done_ops;
		struct rusage ru0, ru1;
		char msg[200];
	} c __attribute__((aligned(LINE)));
};

struct control {
	volatile int go __attribute__((aligned(LINE)));
	volatile int stop;
	int rep;
	uint64_t t_go, warm_deadline;
	volatile int ready __attribute__((aligned(LINE)));
};

struct shm {
	struct control ctl;
	struct slot slot[];
};

struct master {
	const struct run_config *cfg;
	struct shm *shm;
	size_t shm_len;
	struct probe_env *envs;      /* one per choice */
	pid_t pids[4096];
	int npids;
	pid_t pgid;
	uint64_t deadline;
	char failure[300];
	int failed_worker;
	int late_samples;            /* samples taken over half an interval late */
	double window_s;             /* the measured window as sampled */
};

static volatile sig_atomic_t got_signal;
static const char *run_tmpdir;
static int tracing;                  /* BPF events are being recorded */
static int master_apart;             /* the master runs on no worker's CPU */
static struct json *event_batch;     /* events not yet written */
static int event_batch_n;

enum { EVENT_BATCH = 2000 };

static void flush_events(void)
{
	if (event_batch)
		json_emit(event_batch);
	event_batch = NULL;
	event_batch_n = 0;
}

static void on_event(const struct trace_event *e, void *arg)
{
	(void)arg;
	if (!event_batch) {
		event_batch = json_record("events");
		json_arr(event_batch, "events");
	}
	json_arr(event_batch, NULL);
	json_int(event_batch, NULL, e->cpu);
	json_uint(event_batch, NULL, e->start_ns);
	json_uint(event_batch, NULL, e->end_ns);
	json_int(event_batch, NULL, e->kind);
	json_int(event_batch, NULL, e->id);
	json_int(event_batch, NULL, e->flags);
	char name[sizeof e->name + 1];
	memcpy(name, e->name, sizeof e->name);
	name[sizeof e->name] = 0;
	json_str(event_batch, NULL, name);
	json_end(event_batch);
	if (++event_batch_n >= EVENT_BATCH)
		flush_events();
}

static void on_signal(int sig) { if (!got_signal) got_signal = sig; }
static void on_child(int sig) { (void)sig; }

static long futex(volatile int *addr, int op, int val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

/* ---------------------------------------------------------------- worker */

static void worker_fail(struct slot *s, const char *what, int err)
{
	snprintf(s->c.msg, sizeof s->c.msg, "%s: %s", what, strerror(err));
	__atomic_store_n(&s->c.state, W_FAILED, __ATOMIC_RELEASE);
}

static int pin_self(int cpu)
{
	cpu_set_t *set = CPU_ALLOC(cpu + 1);
	size_t size = CPU_ALLOC_SIZE(cpu + 1);
	CPU_ZERO_S(size, set);
	CPU_SET_S(cpu, size, set);
	int rc = sched_setaffinity(0, size, set);
	CPU_FREE(set);
	return rc;
}

static void result_path(char *buf, size_t len, int rep, int idx)
{
	snprintf(buf, len, "%s/result.%d.%d", run_tmpdir, rep, idx);
}

/* Probes that keep their own books (the detour probe) warm up on the
 * worker side, like fixed work, so their books start after warm-up. */
static int has_own_books(const struct run_config *cfg)
{
	for (int k = 0; k < cfg->nchoices; k++)
		if (cfg->choices[k].probe->emit)
			return 1;
	return 0;
}

/* Whether workers leave result records: histograms, or a probe's own. */
static int has_results(const struct run_config *cfg)
{
	int any = cfg->latency;
	for (int k = 0; k < cfg->nchoices; k++)
		any |= cfg->choices[k].probe->emit != NULL;
	return any;
}

static struct json *result_record(const char *type, const struct shm *shm, const struct run_config *cfg,
				  int idx, const struct choice *c)
{
	struct json *j = json_record(type);
	json_int(j, "rep", shm->ctl.rep);
	json_int(j, "worker", idx);
	json_int(j, "cpu", cfg->cpus[idx].cpu);
	json_int(j, "tid", shm->slot[idx].c.tid);
	json_str(j, "probe", c->probe->name);
	json_str(j, "variant", c->probe->variants[c->variant].name);
	return j;
}

/* Workers write their own results (histograms of tens of KB, detour lists)
 * to files that the master copies to stdout in order: no worker ever blocks
 * on the pipe, and records never interleave. */
static int save_results(const struct shm *shm, const struct run_config *cfg, int idx,
			struct worker *w, struct hist **h)
{
	char path[4200];
	result_path(path, sizeof path, shm->ctl.rep, idx);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int rc = 0;
	for (int k = 0; k < cfg->nchoices && !rc; k++) {
		const struct choice *c = &cfg->choices[k];
		if (h[k]) {
			struct json *j = result_record("hist", shm, cfg, idx, c);
			hist_emit(j, "hist", h[k], ticks_unit_ns());
			rc = json_emit_fd(j, fd);
		}
		if (!rc && c->probe->emit) {
			struct json *j = result_record(c->probe->emit_type, shm, cfg, idx, c);
			rc = c->probe->emit(&w[k], j);
			rc = json_emit_fd(j, fd) || rc;
		}
	}
	return close(fd) || rc ? -1 : 0;
}

/* --mix: one operation of every probe per round, each into its own
 * histogram, until the limit or the stop flag. */
static uint64_t mix_rounds(struct worker *w, struct hist **h, int nc, const struct loop *l,
			   int *err, int *failed)
{
	uint64_t round = 0, one;
	const struct loop step = {.limit = 1, .stop = l->stop, .ops = &one};
	while (round < l->limit && !*l->stop) {
		for (int k = 0; k < nc; k++) {
			uint64_t n = w[k].env->probe->timed(&w[k], &step, h[k], err);
			if (*err) {
				*failed = k;
				return round;
			}
			if (!n) /* stopped */
				return round;
		}
		*l->ops = ++round;
	}
	return round;
}

static void worker_main(struct shm *shm, const struct run_config *cfg,
			const struct probe_env *envs, int idx)
{
	struct slot *s = &shm->slot[idx];
	const int nc = cfg->nchoices;
	struct worker *w = calloc(nc, sizeof *w);
	struct hist **h = calloc(nc, sizeof *h);
	int set_up = 0, err = 0, failed = 0;
	char what[96];

	s->c.pid = getpid();
	s->c.tid = (int)syscall(SYS_gettid);
	if (!w || !h) {
		worker_fail(s, "worker state", ENOMEM);
		return;
	}
	if (pin_self(cfg->cpus[idx].cpu) != 0) {
		worker_fail(s, "sched_setaffinity", errno);
		return;
	}
	s->c.cpu_start = sched_getcpu();
	for (; set_up < nc; set_up++) {
		const struct probe *p = envs[set_up].probe;
		w[set_up] = (struct worker){.index = idx, .cpu = cfg->cpus[idx].cpu,
					    .partner_cpu = cfg->partner_cpus[idx], .env = &envs[set_up]};
		if (cfg->latency && !(h[set_up] = hist_new())) {
			snprintf(what, sizeof what, "histogram for %s", p->name);
			break;
		}
		if (p->setup && p->setup(&w[set_up]) != 0) {
			snprintf(what, sizeof what, "set-up of %s", p->name);
			break;
		}
	}
	if (set_up < nc) {
		err = errno;
		goto teardown;
	}
	__atomic_store_n(&s->c.state, W_READY, __ATOMIC_RELEASE);
	__atomic_add_fetch(&shm->ctl.ready, 1, __ATOMIC_RELEASE);

	while (!__atomic_load_n(&shm->ctl.go, __ATOMIC_ACQUIRE))
		futex(&shm->ctl.go, FUTEX_WAIT, 0);
	s->c.t_release = clock_ns();
	__atomic_store_n(&s->c.state, W_RUNNING, __ATOMIC_RELEASE);

	struct loop l = {.limit = UINT64_MAX, .stop = &shm->ctl.stop, .ops = &s->ops};
	if (cfg->ops || cfg->latency || has_own_books(cfg)) {
		/* Fixed work and latency: warm up together until the shared
		 * deadline, so that neither the count nor the histogram holds a
		 * cold operation. (Fixed time discards warm-up samples instead.) */
		while (!err && !shm->ctl.stop && clock_ns() < shm->ctl.warm_deadline)
			for (int k = 0; k < nc && !err; k++)
				if (envs[k].probe->op(&w[k]) != 0) {
					err = errno;
					failed = k;
				}
		if (cfg->ops)
			l.limit = cfg->ops;
	}
	uint64_t n = 0;
	if (!err) {
		const struct probe *p = envs[0].probe;
		getrusage(RUSAGE_THREAD, &s->c.ru0);
		s->c.t_start = clock_ns();
		if (nc > 1)
			n = mix_rounds(w, h, nc, &l, &err, &failed);
		else
			n = h[0] ? p->timed(&w[0], &l, h[0], &err) : p->loop(&w[0], &l, &err);
		s->c.t_end = clock_ns();
	}
	if (!s->c.t_start)
		getrusage(RUSAGE_THREAD, &s->c.ru0);
	getrusage(RUSAGE_THREAD, &s->c.ru1);
	s->c.done_ops = n;
	s->c.cpu_end = sched_getcpu();
	if (err)
		snprintf(what, sizeof what, "%s operation", envs[failed].probe->name);
	else if (has_results(cfg) && save_results(shm, cfg, idx, w, h) != 0) {
		err = errno;
		snprintf(what, sizeof what, "saving the results");
	}
teardown:
	while (set_up-- > 0)
		if (envs[set_up].probe->teardown)
			envs[set_up].probe->teardown(&w[set_up]);
	for (int k = 0; k < nc; k++)
		free(h[k]);
	free(h);
	free(w);
	if (err)
		worker_fail(s, what, err);
	else
		__atomic_store_n(&s->c.state, W_DONE, __ATOMIC_RELEASE);
}

/* Every task the master forks: in the workers' group, dies with the master,
 * and leaves Ctrl-C to the master so that it can stop the run in order. */
static void child_init(pid_t master, pid_t pgid)
{
	setpgid(0, pgid);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != master)
		_exit(1);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
}

struct thread_arg {
	struct shm *shm;
	const struct run_config *cfg;
	const struct probe_env *envs;
	int idx;
};

static void *worker_thread(void *a)
{
	struct thread_arg *t = a;
	worker_main(t->shm, t->cfg, t->envs, t->idx);
	return NULL;
}

static void thread_host(struct shm *shm, const struct run_config *cfg, const struct probe_env *envs)
{
	pthread_t *th = calloc(cfg->nworkers, sizeof *th);
	struct thread_arg *args = calloc(cfg->nworkers, sizeof *args);
	if (!th || !args)
		_exit(1);
	for (int i = 0; i < cfg->nworkers; i++) {
		args[i] = (struct thread_arg){shm, cfg, envs, i};
		int rc = pthread_create(&th[i], NULL, worker_thread, &args[i]);
		if (rc) {
			worker_fail(&shm->slot[i], "pthread_create", rc);
			_exit(1);
		}
	}
	for (int i = 0; i < cfg->nworkers; i++)
		pthread_join(th[i], NULL);
	_exit(0);
}

/* ---------------------------------------------------------------- master */

static int spawn(struct master *m)
{
	const struct run_config *cfg = m->cfg;
	pid_t self = getpid();
	int ntasks = cfg->threaded ? 1 : cfg->nworkers;
	m->pgid = 0;
	for (int i = 0; i < ntasks; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			snprintf(m->failure, sizeof m->failure, "fork of worker %d: %s", i, strerror(errno));
			return -1;
		}
		if (pid == 0) {
			child_init(self, m->pgid);
			if (cfg->threaded)
				thread_host(m->shm, cfg, m->envs);
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
				snprintf(why, sizeof why, "worker process %d %s", pid, describe_status(status, st, sizeof st));
			else
				snprintf(why, sizeof why, "worker %d (pid %d, cpu %d) %s", idx, pid,
					 idx >= 0 ? m->cfg->cpus[idx].cpu : -1, describe_status(status, st, sizeof st));
			m->failed_worker = idx;
			return why;
		}
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
 * exits; while tracing, the master drains the kernel's events meanwhile. */
static void sleep_until(uint64_t until)
{
	uint64_t now = clock_ns();
	if (now >= until)
		return;
	uint64_t d = until - now;
	if (d > 10000000ull) /* re-check at least every 10 ms */
		d = 10000000ull;
	if (tracing && d >= 1000000ull) {
		trace_poll(on_event, NULL, (int)(d / 1000000ull));
		return;
	}
	struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
	nanosleep(&ts, NULL);
}

/* Starts recording kernel events on the workers' CPUs, for their threads. */
static void start_tracing(const struct master *m)
{
	int n = m->cfg->nworkers, *cpus = calloc(n, sizeof *cpus), *tids = calloc(n, sizeof *tids);
	char why[256] = "out of memory";
	if (cpus && tids) {
		for (int i = 0; i < n; i++) {
			cpus[i] = m->cfg->cpus[i].cpu;
			tids[i] = m->shm->slot[i].c.tid;
		}
		tracing = trace_start(cpus, n, tids, n, why, sizeof why) == 0;
	}
	free(cpus);
	free(tids);
	if (!tracing) {
		struct json *j = json_record("trace");
		json_bool(j, "available", 0);
		json_str(j, "reason", why);
		json_emit(j);
	}
}

/* Drains what is left, unloads everything, and says how complete it was. */
static void stop_tracing(void)
{
	if (!tracing)
		return;
	while (trace_poll(on_event, NULL, 0) > 0)
		;
	flush_events();
	uint64_t lost = trace_lost();
	char missing[256];
	snprintf(missing, sizeof missing, "%s", trace_missing());
	trace_stop();
	tracing = 0;
	struct json *j = json_record("trace");
	json_bool(j, "available", 1);
	json_uint(j, "lost", lost);
	json_arr(j, "missing");
	for (char *save, *t = strtok_r(missing, ",", &save); t; t = strtok_r(NULL, ",", &save))
		json_str(j, NULL, t);
	json_end(j);
	json_emit(j);
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

static void emit_rusage(struct json *j, const struct slot *s)
{
	const struct rusage *a = &s->c.ru0, *b = &s->c.ru1;
	json_obj(j, "rusage");
	json_num(j, "user_s", (double)(b->ru_utime.tv_sec - a->ru_utime.tv_sec) +
				      (double)(b->ru_utime.tv_usec - a->ru_utime.tv_usec) / 1e6);
	json_num(j, "sys_s", (double)(b->ru_stime.tv_sec - a->ru_stime.tv_sec) +
				     (double)(b->ru_stime.tv_usec - a->ru_stime.tv_usec) / 1e6);
	json_int(j, "nvcsw", b->ru_nvcsw - a->ru_nvcsw);
	json_int(j, "nivcsw", b->ru_nivcsw - a->ru_nivcsw);
	json_int(j, "minflt", b->ru_minflt - a->ru_minflt);
	json_int(j, "majflt", b->ru_majflt - a->ru_majflt);
	/* What the figures above cover: the timed loop, warm-up excluded. */
	json_num(j, "interval_s", (double)(s->c.t_end - s->c.t_start) / 1e9);
	json_end(j);
}

static void emit_worker_common(struct json *j, const struct master *m, int rep, int i)
{
	const struct slot *s = &m->shm->slot[i];
	json_int(j, "rep", rep);
	json_int(j, "worker", i);
	json_int(j, "cpu", m->cfg->cpus[i].cpu);
	json_int(j, "cpu_seen", s->c.cpu_end);
	json_int(j, "pid", s->c.pid);
	json_int(j, "tid", s->c.tid);
}

static void emit_error(const char *msg, int worker)
{
	struct json *j = json_record("error");
	json_str(j, "message", msg);
	if (worker >= 0)
		json_int(j, "worker", worker);
	json_emit(j);
	fprintf(stderr, "oslens-engine: %s\n", msg);
}

/* Fixed time: the master samples every counter each interval after warm-up. */
static const char *measure_fixed_time(struct master *m, int rep)
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
			emit_worker_common(j, m, rep, i);
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
		emit_worker_common(j, m, rep, i);
		json_uint(j, "ops", s->c.done_ops);
		json_num(j, "seconds", secs);
		json_num(j, "ops_per_sec", (double)s->c.done_ops / secs);
		json_uint(j, "start_offset_ns", s->c.t_start - first);
		emit_rusage(j, s);
		json_emit(j);
	}
	return NULL;
}

static const char *emit_results(const struct master *m, int rep)
{
	static char why[300];
	for (int i = 0; i < m->cfg->nworkers; i++) {
		char path[4200], buf[65536];
		result_path(path, sizeof path, rep, i);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			snprintf(why, sizeof why, "worker %d left no results: %s", i, strerror(errno));
			return why;
		}
		ssize_t n;
		while ((n = read(fd, buf, sizeof buf)) > 0)
			if (write_all(STDOUT_FILENO, buf, (size_t)n) != 0)
				json_output_lost = 1;
		close(fd);
		unlink(path);
	}
	return NULL;
}

/* The kernel's own accounting of the workers' CPUs (/proc/stat), read
 * around the measured window: irq, softirq and steal time (the hypervisor
 * running something else) that no guest-side event can show. */
struct cpustat {
	uint64_t v[8]; /* user nice system idle iowait irq softirq steal, in USER_HZ */
};

static void read_cpustat(const struct run_config *cfg, struct cpustat *out)
{
	memset(out, 0, sizeof *out * cfg->nworkers);
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		int cpu;
		struct cpustat s;
		if (sscanf(line, "cpu%d %lu %lu %lu %lu %lu %lu %lu %lu", &cpu, &s.v[0], &s.v[1], &s.v[2],
			   &s.v[3], &s.v[4], &s.v[5], &s.v[6], &s.v[7]) != 9)
			continue;
		for (int i = 0; i < cfg->nworkers; i++)
			if (cfg->cpus[i].cpu == cpu)
				out[i] = s;
	}
	fclose(f);
}

static void emit_cpustat(const struct run_config *cfg, int rep, const struct cpustat *a, const struct cpustat *b)
{
	static const char *names[8] = {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"};
	double ns_per_tick = 1e9 / (double)sysconf(_SC_CLK_TCK);
	struct json *j = json_record("cpustat");
	json_int(j, "rep", rep);
	json_num(j, "resolution_ns", ns_per_tick);
	json_arr(j, "cpus");
	for (int i = 0; i < cfg->nworkers; i++) {
		json_obj(j, NULL);
		json_int(j, "cpu", cfg->cpus[i].cpu);
		for (int k = 0; k < 8; k++)
			json_num(j, names[k], (double)(b[i].v[k] - a[i].v[k]) * ns_per_tick);
		json_end(j);
	}
	json_end(j);
	json_emit(j);
}

static void emit_resources(const struct master *m, int rep)
{
	struct json *j = json_record("resources");
	json_int(j, "rep", rep);
	json_str(j, "tmpdir", run_tmpdir);
	json_arr(j, "sysv_sem");
	for (int k = 0; k < m->cfg->nchoices; k++)
		for (int i = 0; i < m->envs[k].nsems; i++)
			json_int(j, NULL, m->envs[k].sem_ids[i]);
	json_end(j);
	json_emit(j);
}

static void emit_started(const struct master *m, int rep)
{
	struct json *j = json_record("started");
	json_int(j, "rep", rep);
	json_arr(j, "workers");
	for (int i = 0; i < m->cfg->nworkers; i++) {
		const struct slot *s = &m->shm->slot[i];
		json_obj(j, NULL);
		json_int(j, "worker", i);
		json_int(j, "cpu", m->cfg->cpus[i].cpu);
		json_int(j, "pid", s->c.pid);
		json_int(j, "tid", s->c.tid);
		json_end(j);
	}
	json_end(j);
	json_emit(j);
}

static void release_sems(struct probe_env *env)
{
	for (int i = 0; i < env->nsems; i++)
		semctl(env->sem_ids[i], 0, IPC_RMID);
	env->nsems = 0;
}

/* One repetition; returns NULL or why it failed. */
static const char *run_rep(struct master *m, int rep)
{
	const struct run_config *cfg = m->cfg;
	const char *why = NULL;
	static char setup_err[256];
	int set_up = 0;

	memset(m->shm, 0, m->shm_len);
	m->shm->ctl.rep = rep;
	m->npids = 0;
	m->pgid = 0; /* never signal the group of a previous repetition */
	m->failed_worker = -1;
	m->late_samples = 0;
	m->window_s = 0;
	for (; set_up < cfg->nchoices; set_up++) {
		struct probe_env *env = &m->envs[set_up];
		const struct choice *c = &cfg->choices[set_up];
		memset(env, 0, sizeof *env);
		env->probe = c->probe;
		env->variant = c->variant;
		memcpy(env->opt, c->opt, sizeof env->opt);
		env->nworkers = cfg->nworkers;
		env->threaded = cfg->threaded;
		env->tmpdir = run_tmpdir;
		if (c->probe->global_setup && c->probe->global_setup(env) != 0) {
			snprintf(setup_err, sizeof setup_err, "%s set-up: %s", c->probe->name, strerror(errno));
			why = setup_err;
			set_up++; /* its teardown frees what its set-up made before failing */
			break;
		}
	}
	emit_resources(m, rep);
	if (!why && !(why = check(m, 0)) && spawn(m) != 0)
		why = m->failure;
	while (!why && !(why = check(m, 0)) &&
	       __atomic_load_n(&m->shm->ctl.ready, __ATOMIC_ACQUIRE) < cfg->nworkers)
		sleep_until(clock_ns() + 1000000ull);

	uint64_t t_go = 0;
	struct cpustat *stat0 = calloc(cfg->nworkers, sizeof *stat0), *stat1 = calloc(cfg->nworkers, sizeof *stat1);
	if (!why && (!stat0 || !stat1))
		why = "out of memory";
	if (!why) {
		emit_started(m, rep);
		if (cfg->trace)
			start_tracing(m);
		read_cpustat(cfg, stat0);
		t_go = clock_ns();
		m->shm->ctl.t_go = t_go;
		m->shm->ctl.warm_deadline = t_go + (uint64_t)(cfg->warmup_s * 1e9);
		__atomic_store_n(&m->shm->ctl.go, 1, __ATOMIC_RELEASE);
		futex(&m->shm->ctl.go, FUTEX_WAKE, 1 << 30);
		why = cfg->ops ? measure_fixed_work(m, rep) : measure_fixed_time(m, rep);
		read_cpustat(cfg, stat1);
		stop_tracing();
		if (!why)
			emit_cpustat(cfg, rep, stat0, stat1);
		if (!why && has_results(cfg))
			why = emit_results(m, rep);
	}
	uint64_t t_end = clock_ns();
	stop_tracing(); /* on every path: nothing stays loaded */
	free(stat0);
	free(stat1);
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
	(void)sb; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

static void emit_header(const struct run_config *cfg, const struct topology *topo)
{
	const struct choice *c = &cfg->choices[0];
	const struct probe *p = c->probe;
	struct json *j = json_record("header");
	json_obj(j, "engine");
	json_str(j, "version", ENGINE_VERSION);
	json_str(j, "compiler", __VERSION__);
#ifdef OSLENS_STATIC
	json_bool(j, "static", 1);
#else
	json_bool(j, "static", 0);
#endif
	json_end(j);
	json_arr(j, "argv");
	for (int i = 0; i < cfg->argc; i++)
		json_str(j, NULL, cfg->argv[i]);
	json_end(j);
	json_obj(j, "probe");
	json_str(j, "name", cfg->mix ? "mix" : p->name);
	json_str(j, "subsystem", cfg->mix ? "mixed" : p->subsystem);
	json_str(j, "syscalls", cfg->mix ? "" : p->syscalls);
	json_end(j);
	json_str(j, "variant", cfg->mix ? "default" : p->variants[c->variant].name);
	json_obj(j, "options");
	for (int i = 0; i < PROBE_MAX_OPTS && p->opts[i].name && !cfg->mix; i++)
		json_int(j, p->opts[i].name, c->opt[i]);
	json_end(j);
	json_arr(j, "mix");
	for (int k = 0; k < cfg->nchoices && cfg->mix; k++) {
		json_obj(j, NULL);
		json_str(j, "probe", cfg->choices[k].probe->name);
		json_str(j, "variant", cfg->choices[k].probe->variants[cfg->choices[k].variant].name);
		json_end(j);
	}
	json_end(j);
	json_str(j, "mode", cfg->threaded ? "thread" : "process");
	json_int(j, "workers", cfg->nworkers);
	json_obj(j, "placement");
	json_str(j, "policy", cfg->placement);
	json_int(j, "cpus_available", topo->n);
	json_int(j, "packages", topo->npackages);
	json_arr(j, "workers");
	for (int i = 0; i < cfg->nworkers; i++) {
		topology_emit_cpu(j, &cfg->cpus[i]);
	}
	json_end(j);
	json_end(j);
	json_obj(j, "clock");
	json_str(j, "source", clock_info.source);
	json_num(j, "tsc_hz", clock_info.tsc_hz);
	json_num(j, "calibration_ppm", clock_info.calib_ppm);
	json_str(j, "reason", clock_info.reason);
	json_end(j);
	json_str(j, "fixed", cfg->ops ? "ops" : "time");
	json_bool(j, "latency", cfg->latency);
	if (cfg->ops)
		json_uint(j, "ops", cfg->ops);
	else
		json_num(j, "duration_s", cfg->duration_s);
	json_num(j, "warmup_s", cfg->warmup_s);
	json_num(j, "interval_s", cfg->interval_s);
	json_int(j, "reps", cfg->reps);
	json_str(j, "tmpdir", run_tmpdir);
	json_int(j, "pid", getpid());
	json_bool(j, "master_apart", master_apart);
	json_arr(j, "partner_cpus"); /* where two-task probes put each worker's partner */
	for (int i = 0; i < cfg->nworkers; i++)
		json_int(j, NULL, cfg->partner_cpus[i]);
	json_end(j);
	json_emit(j);
}

/* The master wakes to sample (and to drain kernel events): where a CPU no
 * worker uses exists, it runs there, so its own wake-ups are never noise
 * on the CPUs it measures. The header says where it ran. */
static int place_master(const struct run_config *cfg, const struct topology *topo)
{
	int max = 0;
	for (int i = 0; i < topo->n; i++)
		max = topo->cpus[i].cpu > max ? topo->cpus[i].cpu : max;
	cpu_set_t *set = CPU_ALLOC(max + 1);
	size_t size = CPU_ALLOC_SIZE(max + 1);
	CPU_ZERO_S(size, set);
	int free_cpus = 0;
	for (int i = 0; i < topo->n; i++) {
		int used = 0;
		for (int w = 0; w < cfg->nworkers && !used; w++)
			used = cfg->cpus[w].cpu == topo->cpus[i].cpu;
		if (!used) {
			CPU_SET_S(topo->cpus[i].cpu, size, set);
			free_cpus++;
		}
	}
	int placed = free_cpus && sched_setaffinity(0, size, set) == 0;
	CPU_FREE(set);
	return placed;
}

int run_probe(const struct run_config *cfg, const struct topology *topo)
{
	struct master m = {.cfg = cfg};
	static char tmpl[4096];
	snprintf(tmpl, sizeof tmpl, "%s/oslens.XXXXXX", cfg->tmpdir_base);
	if (!mkdtemp(tmpl))
		die_usage("cannot create a temporary directory in %s: %s", cfg->tmpdir_base, strerror(errno));
	run_tmpdir = tmpl;

	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = on_child;
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	prctl(PR_SET_TIMERSLACK, 1);

	m.envs = calloc(cfg->nchoices, sizeof *m.envs);
	if (!m.envs)
		die_usage("out of memory");
	m.shm_len = sizeof(struct shm) + (size_t)cfg->nworkers * sizeof(struct slot);
	m.shm = mmap(NULL, m.shm_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m.shm == MAP_FAILED) {
		nftw(run_tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
		die_usage("cannot map shared memory for %d workers: %s", cfg->nworkers, strerror(errno));
	}
	if (cfg->time_limit_s > 0)
		m.deadline = clock_ns() + (uint64_t)(cfg->time_limit_s * 1e9);

	master_apart = place_master(cfg, topo);
	emit_header(cfg, topo);
	const char *why = NULL;
	for (int rep = 0; rep < cfg->reps && !why; rep++)
		why = run_rep(&m, rep);

	nftw(run_tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	munmap(m.shm, m.shm_len);

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
	struct json *j = json_record("end");
	json_str(j, "status", status);
	if (got_signal)
		json_int(j, "signal", got_signal);
	json_emit(j);
	return code;
}
