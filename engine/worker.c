/* The worker side of `run`: pinned to its CPU, it sets up its probes,
 * waits at the start barrier, runs the timed loop (or every operation
 * timed into a histogram), and leaves its results in a file of its own. */
#include "worker.h"
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static void worker_fail(struct slot *s, const char *what, int err)
{
	snprintf(s->c.msg, sizeof s->c.msg, "%s: %s", what, strerror(err));
	__atomic_store_n(&s->c.state, W_FAILED, __ATOMIC_RELEASE);
}

void run_result_path(char *buf, size_t len, const char *tmpdir, int rep, int idx)
{
	snprintf(buf, len, "%s/result.%d.%d", tmpdir, rep, idx);
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
int run_has_results(const struct run_config *cfg)
{
	int any = cfg->latency;
	for (int k = 0; k < cfg->nchoices; k++)
		any |= cfg->choices[k].probe->emit != NULL;
	return any;
}

static struct json *result_record(const char *type, const struct shm *shm, const struct run_config *cfg, int idx,
				  const struct choice *c)
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

/* How one operation in N is timed (--latency-every auto): at most this share
 * of the loop's time goes to timing. Timing one costs two serialised clock
 * reads and a histogram update: some 40 ns in a VM, a third of a null system
 * call, so that timing them all slowed getppid by 35 %. */
#define LATENCY_BUDGET 0.005
/* The operations and time a worker's cost per operation is measured over
 * at the least (the warm-up's, or more if it had fewer), and at the most. */
#define CALIBRATE_OPS 32
#define CALIBRATE_MIN_NS 2000000ull
#define CALIBRATE_MAX_NS 50000000ull

/* What timing one operation costs here: the least of a few batches of
 * clock-read pairs and histogram updates (into a scratch histogram), as
 * the timed loop does them around an operation. */
static double timing_cost_ns(void)
{
	struct hist *scratch = hist_new();
	if (!scratch)
		return 0;
	double best = 0;
	for (int b = 0; b < 8; b++) {
		uint64_t t = clock_ns();
		for (int i = 0; i < 64; i++) {
			uint64_t t0 = ticks_begin();
			uint64_t t1 = ticks_end();
			hist_record(scratch, t1 - t0);
		}
		double per = (double)(clock_ns() - t) / 64;
		if (b == 0 || per < best)
			best = per;
	}
	free(scratch);
	return best;
}

/* N for --latency-every auto: timing one operation in N costs at most
 * LATENCY_BUDGET of the loop, from this worker's cost per operation (the
 * warm-up's) and of timing one. */
static uint64_t latency_every_auto(double op_ns, double timing_ns)
{
	if (op_ns <= 0 || timing_ns <= 0)
		return 1;
	double n = timing_ns / (LATENCY_BUDGET * op_ns);
	return n <= 1 ? 1 : n >= (double)RUN_MAX_LATENCY_EVERY ? (uint64_t)RUN_MAX_LATENCY_EVERY : (uint64_t)n + 1;
}

/* Workers write their own results (histograms of tens of KB, detour lists)
 * to files that the master copies to stdout in order: no worker ever blocks
 * on the pipe, and records never interleave. */
/* How a worker timed its operations: one in `every`, from its measured
 * cost per operation and of timing one (auto; 0 where not measured). */
struct timed_every {
	uint64_t every;
	double op_ns, timing_ns;
};

static int save_results(const struct shm *shm, const struct run_config *cfg, int idx, struct worker *w, struct hist **h,
			const struct timed_every *te)
{
	char path[4200];
	run_result_path(path, sizeof path, w[0].env->tmpdir, shm->ctl.rep, idx);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int rc = 0;
	for (int k = 0; k < cfg->nchoices && !rc; k++) {
		const struct choice *c = &cfg->choices[k];
		if (h[k]) {
			struct json *j = result_record("hist", shm, cfg, idx, c);
			json_uint(j, "every", te->every);
			if (te->op_ns > 0) {
				json_num(j, "op_ns", te->op_ns);
				json_num(j, "timing_ns", te->timing_ns);
			}
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
static uint64_t mix_rounds(struct worker *w, struct hist **h, int nc, const struct loop *l, int *err, int *failed)
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

/* Reading /proc about this process is done in a scratch mapping of its own,
 * unmapped afterwards, so that the reading leaves nothing behind in the image
 * it describes; its own mapping and pages are taken out of the figures.
 * MADV_DONTFORK keeps it from merging with a neighbouring anonymous mapping
 * (the count of mappings would be one short) and out of any fork meanwhile. */
enum { SCRATCH_READ = 4096, SCRATCH_LINE = 512, SCRATCH_BYTES = 2 * 4096 };

static char *scratch_map(void)
{
	char *p = mmap(NULL, SCRATCH_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	madvise(p, SCRATCH_BYTES, MADV_DONTFORK);
	memset(p, 0, SCRATCH_BYTES); /* all present: exactly SCRATCH_BYTES to take out */
	return p;
}

/* /proc/self/maps read line by line with read(2), not stdio (whose buffer
 * would stay in the heap). Gives the number of mappings and the bounds of the
 * main thread's stack (0 when not found); -1 if it cannot be read. */
static int scan_maps(char *scratch, unsigned long *stack_lo, unsigned long *stack_hi)
{
	*stack_lo = *stack_hi = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char *buf = scratch, *line = scratch + SCRATCH_READ;
	size_t len = 0;
	int lines = 0;
	ssize_t got;
	while ((got = read(fd, buf, SCRATCH_READ)) > 0)
		for (ssize_t i = 0; i < got; i++) {
			if (buf[i] != '\n') {
				if (len < SCRATCH_LINE - 1)
					line[len++] = buf[i];
				continue;
			}
			line[len] = 0;
			len = 0;
			lines++;
			if (strstr(line, "[stack]"))
				sscanf(line, "%lx-%lx", stack_lo, stack_hi);
		}
	close(fd);
	return lines;
}

/* The mappings and anonymous memory of this process now, without the
 * scratch that read them (-1 where /proc says nothing). */
static void read_image(int *maps, int *anon_kb)
{
	*maps = *anon_kb = -1;
	char *scratch = scratch_map();
	if (!scratch)
		return;
	unsigned long lo, hi;
	int lines = scan_maps(scratch, &lo, &hi);
	if (lines > 0)
		*maps = lines - 1;
	int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t got = read(fd, scratch, SCRATCH_READ - 1);
		close(fd);
		scratch[got > 0 ? got : 0] = 0;
		const char *at = strstr(scratch, "\nAnonymous:");
		if (at)
			*anon_kb = atoi(at + strlen("\nAnonymous:")) - SCRATCH_BYTES / 1024;
	}
	munmap(scratch, SCRATCH_BYTES);
}

/* A worker process starts as a copy of the master (or as a fresh image that
 * planned the run again), with pages only that start used: freed heap and
 * the deep stack of set-up. Probes whose cost grows with the present pages
 * of the address space (fork above all: it copies and the child's exit zaps
 * every one) would carry them in every operation, so the worker, once set
 * up, gives back what is free and what lies below its own stack frame (they
 * fault in again, fresh, if ever touched). */
static void shed_inherited_memory(void)
{
	char *scratch = scratch_map();
	if (!scratch)
		return;
	unsigned long lo, hi;
	scan_maps(scratch, &lo, &hi);
	munmap(scratch, SCRATCH_BYTES);
	malloc_trim(0);
	long page = sysconf(_SC_PAGESIZE);
	unsigned long here = (unsigned long)__builtin_frame_address(0);
	unsigned long below = (here & ~(unsigned long)(page - 1)) - (unsigned long)page;
	if (lo && here > lo && here < hi && below > lo)
		madvise((void *)lo, below - lo, MADV_DONTNEED);
}

void worker_main(struct shm *shm, const struct run_config *cfg, const struct probe_env *envs, int idx)
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
	if (cpus_pin(&cfg->cpus[idx].cpu, 1) != 0) {
		worker_fail(s, "sched_setaffinity", errno);
		return;
	}
	s->c.cpu_start = sched_getcpu();
	for (; set_up < nc; set_up++) {
		const struct probe *p = envs[set_up].probe;
		w[set_up] = (struct worker){.index = idx,
					    .cpu = cfg->cpus[idx].cpu,
					    .partner_cpu = cfg->partner_cpus[idx],
					    .env = &envs[set_up],
					    .partners = s->c.partners};
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
	if (!cfg->threaded) /* a fresh image too sheds what planning the run left */
		shed_inherited_memory();
	read_image(&s->c.image_maps, &s->c.image_anon_kb);
	__atomic_store_n(&s->c.state, W_READY, __ATOMIC_RELEASE);
	__atomic_add_fetch(&shm->ctl.ready, 1, __ATOMIC_RELEASE);

	while (!__atomic_load_n(&shm->ctl.go, __ATOMIC_ACQUIRE))
		futex(&shm->ctl.go, FUTEX_WAIT, 0);
	s->c.t_release = clock_ns();
	__atomic_store_n(&s->c.state, W_RUNNING, __ATOMIC_RELEASE);

	struct loop l = {.limit = UINT64_MAX, .stop = &shm->ctl.stop, .ops = &s->ops};
	struct timed_every te = {.every = cfg->latency_every ? cfg->latency_every : 1};
	if (cfg->ops || cfg->latency || has_own_books(cfg)) {
		/* Fixed work and latency: warm up together until the shared
		 * deadline, so that neither the count nor the histogram holds a
		 * cold operation. (Fixed time discards warm-up samples instead.)
		 * Its operations, counted, give the cost of one (auto). */
		const int calibrate = cfg->latency && !cfg->latency_every && nc == 1;
		uint64_t warm_ops = 0, warm_t0 = clock_ns(), now = warm_t0;
		while (!err && !shm->ctl.stop &&
		       ((now = clock_ns()) < shm->ctl.warm_deadline ||
			(calibrate && now - warm_t0 < CALIBRATE_MAX_NS &&
			 (warm_ops < CALIBRATE_OPS || now - warm_t0 < CALIBRATE_MIN_NS))))
			for (int k = 0; k < nc && !err; k++, warm_ops++)
				if (envs[k].probe->op(&w[k]) != 0) {
					err = errno;
					failed = k;
				}
		if (calibrate && warm_ops) {
			te.op_ns = (double)(now - warm_t0) / (double)warm_ops;
			te.timing_ns = timing_cost_ns();
			te.every = latency_every_auto(te.op_ns, te.timing_ns);
		}
		if (cfg->ops)
			l.limit = cfg->ops;
	}
	l.every = te.every;
	l.rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)s->c.tid << 32) ^ (uint64_t)shm->ctl.rep ^ clock_ns();
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
	else if (run_has_results(cfg) && save_results(shm, cfg, idx, w, h, &te) != 0) {
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

void worker_child_init(pid_t master, pid_t pgid)
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

/* The environment a fresh worker is given: only what the engine reads
 * (OSLENS_*, TMPDIR) and what ld.so does (LD_*). The kernel copies argv and the environment onto the
 * new stack, pages that fork would copy for the probe in every operation;
 * a shell's or a CI job's environment can fill several. */
static char **worker_environment(void)
{
	extern char **environ;
	static char *kept[64];
	int n = 0;
	for (char **e = environ; e && *e && n < (int)(sizeof kept / sizeof *kept) - 1; e++)
		if (!strncmp(*e, "OSLENS_", 7) || !strncmp(*e, "TMPDIR=", 7) || !strncmp(*e, "LD_", 3))
			kept[n++] = *e;
	kept[n] = NULL;
	return kept;
}

/* The worker image beside this engine (oslens-engine-worker, or its static
 * build for the static engine: worker_image.c), if it is there. */
static int worker_image_path(char *path, size_t size)
{
#ifdef OSLENS_STATIC
	static const char name[] = "oslens-engine-worker-static";
#else
	static const char name[] = "oslens-engine-worker";
#endif
	ssize_t len = readlink("/proc/self/exe", path, size - 1);
	if (len <= 0)
		return -1;
	path[len] = 0;
	char *slash = strrchr(path, '/');
	if (!slash || (size_t)(slash + 1 - path) + sizeof name > size)
		return -1;
	memcpy(slash + 1, name, sizeof name);
	return access(path, X_OK);
}

void worker_exec_fresh(const struct run_config *cfg, const struct topology *topo, struct shm *shm, int shm_fd,
		       const char *tmpdir, int idx)
{
	/* worker FD IDX TMPDIR, then the master's own argv (argv[0] first) less
	 * its attributions' options, which the worker image has no table of */
	char fd[16], index[16], **argv = calloc((size_t)cfg->worker_argc + 6, sizeof *argv);
	snprintf(fd, sizeof fd, "%d", shm_fd);
	snprintf(index, sizeof index, "%d", idx);
	/* The CPUs the master was given, not the one it pinned itself to: the
	 * fresh image plans the run again from its arguments and must find the
	 * same topology (cmd_worker checks the plan). */
	int *cpus = calloc(topo->n, sizeof *cpus);
	for (int i = 0; cpus && i < topo->n; i++)
		cpus[i] = topo->cpus[i].cpu;
	if (argv && cpus && cpus_pin(cpus, topo->n) == 0 &&
	    fcntl(shm_fd, F_SETFD, 0) == 0) { /* the one descriptor it keeps */
		int n = 0;
		argv[n++] = cfg->argv[0];
		argv[n++] = "worker";
		argv[n++] = fd;
		argv[n++] = index;
		argv[n++] = (char *)tmpdir;
		for (int i = 0; i < cfg->worker_argc; i++)
			argv[n++] = cfg->worker_argv[i];
		argv[n] = NULL;
		/* the worker image, or, with none beside the engine, the engine itself */
		char image[PATH_MAX];
		if (worker_image_path(image, sizeof image) == 0)
			argv[0] = image;
		execve(argv[0] == image ? image : "/proc/self/exe", argv, worker_environment());
	}
	worker_fail(&shm->slot[idx], "exec of a fresh worker", errno);
	_exit(1);
}

int cmd_worker(int argc, char **argv)
{
	if (argc < 7)
		die_usage("worker: internal command of `run` (worker FD IDX TMPDIR ARGV...)");
	int fd = atoi(argv[2]), idx = atoi(argv[3]);
	/* exec'd as /proc/self/exe, it would be named "exe" in ps and perf */
	const char *name = strrchr(argv[0], '/');
	prctl(PR_SET_NAME, name ? name + 1 : argv[0]);
	const char *tmpdir = argv[4];
	struct run_config cfg;
	struct topology topo;
	run_parse_args(argc - 5, argv + 5, NULL, &cfg, &topo);
	struct stat st;
	if (fstat(fd, &st) != 0 || idx < 0 || idx >= cfg.nworkers ||
	    (size_t)st.st_size < sizeof(struct shm) + (size_t)cfg.nworkers * sizeof(struct slot))
		die_usage("worker: no shared memory of the run at descriptor %d for worker %d", fd, idx);
	struct shm *shm = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (shm == MAP_FAILED)
		die_usage("worker: cannot map the run's shared memory: %s", strerror(errno));
	close(fd);
	struct probe_env *envs = calloc(cfg.nchoices, sizeof *envs);
	if (!envs) {
		worker_fail(&shm->slot[idx], "worker environment", ENOMEM);
		return 1;
	}
	for (int k = 0; k < cfg.nchoices; k++)
		probe_env_init(&envs[k], &cfg, &cfg.choices[k], tmpdir);
	clock_adopt(&shm->ctl.clock);
	struct slot *s = &shm->slot[idx];
	if (s->c.planned_cpu != cfg.cpus[idx].cpu) {
		snprintf(s->c.msg, sizeof s->c.msg, "a fresh worker planned CPU %d where its master planned %d",
			 cfg.cpus[idx].cpu, s->c.planned_cpu);
		__atomic_store_n(&s->c.state, W_FAILED, __ATOMIC_RELEASE);
		return 1;
	}
	s->c.fresh_image = 1;
	snprintf(s->c.program, sizeof s->c.program, "%s", name ? name + 1 : argv[0]);
	worker_main(shm, &cfg, envs, idx);
	return 0;
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

void worker_host_threads(struct shm *shm, const struct run_config *cfg, const struct probe_env *envs)
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
