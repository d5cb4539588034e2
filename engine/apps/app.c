/* `oslens-engine app`: the app registry, the fan-out of one app over N
 * workers (threads or processes), and the helpers the apps share.
 *
 * The harness times only the parallel part: from the release of the start
 * barrier, when every worker exists and waits, to the last worker's end (a
 * forked worker ends once its result is through its pipe). The
 * input is made before (setup), the partial results combined after (merge,
 * reported as merge_ns). Workers never pin themselves: `oslens appscale`
 * restricts the whole engine to a CPU set and the workers inherit it. */
#include "app.h"
#include "../clock.h"
#include "../engine.h"
#include "../json.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>


extern const struct app *const __start_oslens_apps[];
extern const struct app *const __stop_oslens_apps[];

const struct app *app_find(const char *name)
{
	for (const struct app *const *a = __start_oslens_apps; a < __stop_oslens_apps; a++)
		if (!strcmp((*a)->name, name))
			return *a;
	return NULL;
}

static const char *const kind_names[] = {[APP_COMPUTE] = "compute", [APP_MEMORY] = "memory",
					 [APP_KERNEL] = "kernel"};

/* ------------------------------------------------ shared state, barrier */

/* In MAP_SHARED memory, so that it is the same object for threads and for
 * forked workers; the futexes are therefore never FUTEX_PRIVATE. */
struct app_ctl {
	int ready;                   /* threads that wait for go */
	int go;                      /* the start barrier's release */
	int done;                    /* threads finished, well or not */
	int failed;                  /* the first failure's message is in msg */
	uint64_t t0;                 /* CLOCK_MONOTONIC at the release */
	char msg[320];               /* "worker N: " and a worker's err */
	struct {
		int count;
		int gen;
	} barrier __attribute__((aligned(64))); /* its own line: workers hammer it */
	uint64_t end_ns[] __attribute__((aligned(64)));
};

static long futex(int *addr, int op, int val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

static void futex_wait_while(int *addr, int val)
{
	while (__atomic_load_n(addr, __ATOMIC_ACQUIRE) == val)
		futex(addr, FUTEX_WAIT, val);
}

/* A generation barrier: the last to arrive resets the count, then starts
 * the next generation, which releases the others. */
void app_barrier(const struct app_worker *w)
{
	struct app_ctl *c = w->run->ctl;
	int gen = __atomic_load_n(&c->barrier.gen, __ATOMIC_ACQUIRE);
	if (__atomic_add_fetch(&c->barrier.count, 1, __ATOMIC_ACQ_REL) == w->run->nworkers) {
		__atomic_store_n(&c->barrier.count, 0, __ATOMIC_RELAXED);
		__atomic_add_fetch(&c->barrier.gen, 1, __ATOMIC_RELEASE);
		futex(&c->barrier.gen, FUTEX_WAKE, INT_MAX);
	} else {
		futex_wait_while(&c->barrier.gen, gen);
	}
}

void *app_shared_alloc(struct app_run *r, size_t len)
{
	(void)r;
	void *p = mmap(NULL, len ? len : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void app_share(long n, int nworkers, int i, long *begin, long *end)
{
	*begin = (long)((__int128)n * i / nworkers);
	*end = (long)((__int128)n * (i + 1) / nworkers);
}

int app_fail(struct app_worker *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->err, sizeof w->err, fmt, ap);
	va_end(ap);
	return -1;
}

int app_run_fail(struct app_run *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->err, sizeof r->err, fmt, ap);
	va_end(ap);
	return -1;
}

int app_buf_put(struct app_buf *b, const void *p, size_t len)
{
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + len)
			cap *= 2;
		char *d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, len);
	b->len += len;
	return 0;
}

/* A failure after the arguments were accepted: one line, exit 1. */
static void __attribute__((noreturn, format(printf, 1, 2))) die_failed(const char *fmt, ...)
{
	va_list ap;
	char line[512];
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, "oslens-engine: %s\n", line);
	_exit(EXIT_MEASURE_FAILED);
}

/* ---------------------------------------------------------- thread mode */

struct thread_arg {
	struct app_worker w;
	struct app_buf out;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	struct app_ctl *c = a->w.run->ctl;
	__atomic_add_fetch(&c->ready, 1, __ATOMIC_RELEASE);
	futex(&c->ready, FUTEX_WAKE, 1);
	futex_wait_while(&c->go, 0);
	int rc = a->w.run->app->work(&a->w, &a->out);
	c->end_ns[a->w.index] = mono_ns();
	int expected = 0;
	if (rc != 0 && __atomic_compare_exchange_n(&c->failed, &expected, 1, 0, __ATOMIC_ACQ_REL,
						   __ATOMIC_ACQUIRE))
		snprintf(c->msg, sizeof c->msg, "worker %d: %s", a->w.index, a->w.err);
	__atomic_add_fetch(&c->done, 1, __ATOMIC_RELEASE);
	futex(&c->done, FUTEX_WAKE, 1);
	return NULL;
}

/* A failed thread may leave the others waiting at a barrier for ever, so
 * the master waits for "all done or one failed" and, on a failure, exits
 * with the threads still in it. */
static void run_threads(struct app_run *r, struct app_buf *parts)
{
	struct app_ctl *c = r->ctl;
	int n = r->nworkers;
	struct thread_arg *args = calloc(n, sizeof *args);
	pthread_t *tids = calloc(n, sizeof *tids);
	if (!args || !tids)
		die_failed("out of memory for %d workers", n);
	for (int i = 0; i < n; i++) {
		args[i].w = (struct app_worker){.run = r, .index = i};
		int err = pthread_create(&tids[i], NULL, thread_main, &args[i]);
		if (err)
			die_failed("cannot start worker thread %d: %s", i, strerror(err));
	}
	for (int got; (got = __atomic_load_n(&c->ready, __ATOMIC_ACQUIRE)) < n;)
		futex(&c->ready, FUTEX_WAIT, got);
	c->t0 = mono_ns();
	__atomic_store_n(&c->go, 1, __ATOMIC_RELEASE);
	futex(&c->go, FUTEX_WAKE, INT_MAX);
	for (int got; (got = __atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) < n &&
		      !__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE);)
		futex(&c->done, FUTEX_WAIT, got);
	if (__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE))
		die_failed("%s: %s", r->app->name, c->msg);
	for (int i = 0; i < n; i++) {
		pthread_join(tids[i], NULL);
		parts[i] = args[i].out;
	}
	free(args);
	free(tids);
}

/* --------------------------------------------------------- process mode */

/* A forked worker speaks through its own pipe: 'R' once it waits at the
 * start barrier, then 'D' <u64 length> <partial result> or 'E' <message>.
 * A pipe that ends any other way is a worker that died. */
struct child {
	pid_t pid;
	int fd;                      /* read end, -1 at EOF */
	struct app_buf in;
};

static void __attribute__((noreturn)) child_main(struct app_run *r, int index, int fd, pid_t master)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != master) /* the master died before the prctl */
		_exit(1);
	struct app_ctl *c = r->ctl;
	struct app_worker w = {.run = r, .index = index};
	struct app_buf out = {0};
	if (write_all(fd, "R", 1) != 0)
		_exit(1);
	futex_wait_while(&c->go, 0);
	if (r->app->work(&w, &out) != 0) {
		write_all(fd, "E", 1);
		write_all(fd, w.err, strlen(w.err));
		_exit(1);
	}
	uint64_t len = out.len;
	if (write_all(fd, "D", 1) != 0 || write_all(fd, (const char *)&len, sizeof len) != 0 ||
	    write_all(fd, out.data, out.len) != 0)
		_exit(1);
	c->end_ns[index] = mono_ns();
	_exit(0);
}

static void __attribute__((noreturn, format(printf, 4, 5)))
fail_children(struct app_run *r, struct child *ch, int n, const char *fmt, ...)
{
	for (int i = 0; i < n; i++)
		if (ch[i].pid > 0)
			kill(ch[i].pid, SIGKILL);
	for (int i = 0; i < n; i++)
		if (ch[i].pid > 0)
			while (waitpid(ch[i].pid, NULL, 0) < 0 && errno == EINTR)
				;
	char line[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	die_failed("%s: %s", r->app->name, line);
}

/* The pipe of worker i ended: reap it and check it said 'R', 'D' and all
 * of its result. */
static void child_ended(struct app_run *r, struct child *ch, int n, int i)
{
	int st;
	while (waitpid(ch[i].pid, &st, 0) < 0)
		if (errno != EINTR)
			fail_children(r, ch, n, "waitpid for worker %d: %s", i, strerror(errno));
	ch[i].pid = 0;
	const struct app_buf *b = &ch[i].in;
	if (b->len >= 2 && b->data[1] == 'E') {
		fail_children(r, ch, n, "worker %d: %.*s", i, (int)(b->len - 2), b->data + 2);
	}
	if (WIFSIGNALED(st))
		fail_children(r, ch, n, "worker %d was killed by signal %d (%s)", i, WTERMSIG(st),
			      strsignal(WTERMSIG(st)));
	uint64_t len;
	if (WEXITSTATUS(st) != 0 || b->len < 10 || b->data[0] != 'R' || b->data[1] != 'D' ||
	    (memcpy(&len, b->data + 2, sizeof len), len != b->len - 10))
		fail_children(r, ch, n, "worker %d exited with status %d without its whole result", i,
			      WEXITSTATUS(st));
}

static void run_processes(struct app_run *r, struct app_buf *parts)
{
	struct app_ctl *c = r->ctl;
	int n = r->nworkers;
	struct child *ch = calloc(n, sizeof *ch);
	struct pollfd *pfd = calloc(n, sizeof *pfd);
	if (!ch || !pfd)
		die_failed("out of memory for %d workers", n);
	pid_t master = getpid();
	for (int i = 0; i < n; i++) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) != 0)
			fail_children(r, ch, n, "pipe: %s", strerror(errno));
		pid_t pid = fork();
		if (pid < 0)
			fail_children(r, ch, n, "fork of worker %d: %s", i, strerror(errno));
		if (pid == 0) {
			close(p[0]);
			for (int k = 0; k < i; k++)
				close(ch[k].fd);
			child_main(r, i, p[1], master);
		}
		close(p[1]);
		ch[i].pid = pid;
		ch[i].fd = p[0];
	}
	int released = 0, open = n;
	while (open > 0) {
		if (!released) {
			int ready = 0;
			for (int i = 0; i < n; i++)
				ready += ch[i].in.len > 0;
			if (ready == n) {
				c->t0 = mono_ns();
				__atomic_store_n(&c->go, 1, __ATOMIC_RELEASE);
				futex(&c->go, FUTEX_WAKE, INT_MAX);
				released = 1;
			}
		}
		for (int i = 0; i < n; i++)
			pfd[i] = (struct pollfd){.fd = ch[i].fd, .events = POLLIN};
		if (poll(pfd, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			fail_children(r, ch, n, "poll: %s", strerror(errno));
		}
		for (int i = 0; i < n; i++) {
			if (ch[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			char buf[65536];
			ssize_t got = read(ch[i].fd, buf, sizeof buf);
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0)
				fail_children(r, ch, n, "reading worker %d: %s", i, strerror(errno));
			if (got > 0) {
				if (app_buf_put(&ch[i].in, buf, got) != 0)
					fail_children(r, ch, n, "out of memory for the result of worker %d", i);
				continue;
			}
			close(ch[i].fd);
			ch[i].fd = -1;
			open--;
			child_ended(r, ch, n, i);
		}
	}
	for (int i = 0; i < n; i++)
		parts[i] = (struct app_buf){.data = ch[i].in.data + 10, .len = ch[i].in.len - 10};
	free(pfd);
	/* the buffers behind parts stay until the process exits */
	free(ch);
}

/* ------------------------------------------------------------- commands */

static void emit_app_info(const struct app *a)
{
	struct json *j = json_record("app_info");
	json_str(j, "name", a->name);
	json_str(j, "summary", a->summary);
	json_str(j, "kind", kind_names[a->kind]);
	json_int(j, "default_size", a->default_size);
	json_str(j, "size_unit", a->size_unit);
	json_bool(j, "uses_dir", a->uses_dir);
	json_emit(j);
}

/* --dry-run: what a run would do, after every check, doing nothing. */
static int emit_app_config(const struct app_run *r, int prepare)
{
	struct json *j = json_record("config");
	json_str(j, "command", "app");
	json_str(j, "name", r->app->name);
	json_bool(j, "prepare", prepare);
	json_int(j, "workers", r->nworkers);
	json_str(j, "mode", r->threaded ? "thread" : "process");
	json_int(j, "size", r->size);
	if (r->dir)
		json_str(j, "dir", r->dir);
	else
		json_null(j, "dir");
	json_emit(j);
	return 0;
}

static void app_usage(void)
{
	die_usage("usage: oslens-engine app list | app NAME [--workers N] [--mode thread|process] "
		  "[--size K] [--dir DIR] | app NAME --prepare DIR [--size K]");
}

int cmd_app(int argc, char **argv)
{
	if (argc < 3 || argv[2][0] == '-')
		app_usage();
	if (!strcmp(argv[2], "list")) {
		if (argc > 3)
			die_usage("app list: unexpected argument '%s'", argv[3]);
		for (const struct app *const *a = __start_oslens_apps; a < __stop_oslens_apps; a++)
			emit_app_info(*a);
		return 0;
	}
	const struct app *app = app_find(argv[2]);
	if (!app)
		die_usage("unknown app '%s' (see 'oslens-engine app list')", argv[2]);

	static const struct option longopts[] = {
		{"workers", required_argument, 0, 'w'}, {"mode", required_argument, 0, 'm'},
		{"size", required_argument, 0, 's'},    {"dir", required_argument, 0, 'd'},
		{"prepare", required_argument, 0, 'p'}, {"dry-run", no_argument, 0, 'D'},
		{0, 0, 0, 0}};
	struct app_run r = {.app = app, .nworkers = 1, .threaded = 1, .size = app->default_size};
	const char *prepare = NULL;
	int workers_given = 0, mode_given = 0, dry_run = 0;
	optind = 3;
	opterr = 0; /* one line of our own instead of getopt's */
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'w':
			r.nworkers = (int)parse_long("--workers", optarg, 1, APP_MAX_WORKERS);
			workers_given = 1;
			break;
		case 'm':
			if (strcmp(optarg, "thread") && strcmp(optarg, "process"))
				die_usage("--mode: '%s' is not thread or process", optarg);
			r.threaded = !strcmp(optarg, "thread");
			mode_given = 1;
			break;
		case 's':
			r.size = parse_long("--size", optarg, app->min_size, app->max_size);
			r.size_given = 1;
			break;
		case 'd': r.dir = optarg; break;
		case 'p': prepare = optarg; break;
		case 'D': dry_run = 1; break;
		default: die_usage("unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("unexpected argument '%s'", argv[optind]);

	if (prepare) {
		if (!app->prepare)
			die_usage("app %s has no input files to --prepare", app->name);
		if (r.dir || workers_given || mode_given)
			die_usage("--prepare only makes the input (with --size); run it with --dir afterwards");
		if (strlen(prepare) > PATH_MAX - 64)
			die_usage("--prepare: a path of %zu bytes is too long", strlen(prepare));
		r.dir = prepare;
		if (dry_run)
			return emit_app_config(&r, 1);
		if (app->prepare(&r) != 0)
			die_failed("%s --prepare %s: %s", app->name, prepare, r.err);
		return 0;
	}
	if (r.dir && strlen(r.dir) > PATH_MAX - 64)
		die_usage("--dir: a path of %zu bytes is too long", strlen(r.dir));
	if (app->uses_dir && !r.dir)
		die_usage("app %s reads files: give --dir DIR (made with 'app %s --prepare DIR')", app->name,
			  app->name);
	if (!app->uses_dir && r.dir)
		die_usage("app %s makes its input in memory and takes no --dir", app->name);
	if (dry_run)
		return emit_app_config(&r, 0);

	r.ctl = app_shared_alloc(&r, sizeof *r.ctl + r.nworkers * sizeof r.ctl->end_ns[0]);
	if (!r.ctl)
		die_failed("mmap of the shared state: %s", strerror(errno));
	uint64_t s0 = mono_ns();
	if (app->setup && app->setup(&r) != 0)
		die_failed("%s: %s", app->name, r.err);
	uint64_t setup_ns = mono_ns() - s0;
	struct app_buf *parts = calloc(r.nworkers, sizeof *parts);
	if (!parts)
		die_failed("out of memory for %d workers", r.nworkers);
	if (r.threaded)
		run_threads(&r, parts);
	else
		run_processes(&r, parts);
	uint64_t end = 0;
	for (int i = 0; i < r.nworkers; i++)
		if (r.ctl->end_ns[i] > end)
			end = r.ctl->end_ns[i];
	uint64_t work_ns = end - r.ctl->t0;

	uint64_t m0 = mono_ns(), checksum = 0;
	if (app->merge(&r, parts, &checksum) != 0)
		die_failed("%s: %s", app->name, r.err);
	uint64_t merge_ns = mono_ns() - m0;

	struct json *j = json_record("app");
	json_str(j, "name", app->name);
	json_int(j, "workers", r.nworkers);
	json_str(j, "mode", r.threaded ? "thread" : "process");
	json_int(j, "size", r.size);
	json_uint(j, "setup_ns", setup_ns);
	json_uint(j, "work_ns", work_ns);
	json_uint(j, "merge_ns", merge_ns);
	json_uint(j, "checksum", checksum);
	json_emit(j);
	return json_output_lost ? EXIT_MEASURE_FAILED : 0;
}

/* ------------------------------------------------- the text apps' words */

/* 2^(i/256) in 32.32 fixed point, i = 0..256: with linear interpolation
 * between entries (relative error < 1e-6) it draws Zipf ranks in integers
 * only, so the text is the same whatever libm or CPU computes it. */
static uint64_t exp2_q32[257];

static void exp2_table_init(void)
{
	for (int i = 0; i <= 256; i++)
		exp2_q32[i] = (uint64_t)llround(ldexp(exp2(i / 256.0), 32));
}

/* A rank in [0, VOCAB_WORDS) with probability about 1/(rank+1) (Zipf, s =
 * 1): rank + 1 = (V+1)^u = 2^(u log2(V+1)) for u uniform in [0, 1). */
static inline uint32_t zipf_rank(uint32_t random)
{
	const uint64_t log2_v = 71337924599ull; /* log2(VOCAB_WORDS + 1) in 32.32 */
	uint64_t t = (uint64_t)((unsigned __int128)random * log2_v >> 32);
	unsigned whole = t >> 32, i = (t >> 24) & 255;
	uint64_t rest = t & 0xffffff;
	uint64_t m = exp2_q32[i] + ((exp2_q32[i + 1] - exp2_q32[i]) * rest >> 24);
	uint64_t r = ((m << whole) >> 32) - 1;
	return r < VOCAB_WORDS ? (uint32_t)r : VOCAB_WORDS - 1;
}

int vocab_init(struct vocab *v)
{
	v->text = malloc((size_t)VOCAB_WORDS * 13);
	v->off = malloc(VOCAB_WORDS * sizeof *v->off);
	v->len = malloc(VOCAB_WORDS);
	if (!v->text || !v->off || !v->len) {
		vocab_free(v);
		return -1;
	}
	if (!exp2_q32[0])
		exp2_table_init();
	size_t at = 0;
	for (uint32_t r = 0; r < VOCAB_WORDS; r++) {
		uint64_t x = app_mix64(0x766f636162ull + r); /* a few collide: harmless */
		unsigned len = 4 + x % 8;                    /* 4..11 letters */
		x = app_mix64(x);
		v->off[r] = at;
		v->len[r] = len;
		for (unsigned k = 0; k < len; k++) {
			if (k % 12 == 11)
				x = app_mix64(x);
			v->text[at++] = 'a' + (x >> (5 * (k % 12))) % 26;
		}
		v->text[at++] = 0;
	}
	return 0;
}

void vocab_free(struct vocab *v)
{
	free(v->text);
	free(v->off);
	free(v->len);
	*v = (struct vocab){0};
}

size_t vocab_text(const struct vocab *v, uint64_t *rng, char *buf, size_t bytes, uint64_t words)
{
	size_t at = 0;
	for (uint64_t i = 0; i < words; i++) {
		uint64_t x = app_mix64((*rng)++);
		uint32_t r = zipf_rank((uint32_t)(x >> 32));
		size_t len = v->len[r];
		if (at + len + 1 > bytes)
			break;
		memcpy(buf + at, v->text + v->off[r], len);
		at += len;
		buf[at++] = (x & 15) == 0 ? '\n' : ' ';
	}
	return at;
}

/* -------------------------------------------------- the word-count table */

static inline uint64_t word_hash(const char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

static inline size_t word_bucket(const struct wordtab *t, uint64_t h)
{
	return (h ^ (h >> 29)) & (t->nbuckets - 1);
}

int wordtab_init(struct wordtab *t)
{
	*t = (struct wordtab){.nbuckets = 1024};
	t->bucket = calloc(t->nbuckets, sizeof *t->bucket);
	return t->bucket ? 0 : -1;
}

void wordtab_free(struct wordtab *t)
{
	for (size_t b = 0; b < t->nbuckets && t->bucket; b++)
		for (struct word *w = t->bucket[b], *next; w; w = next) {
			next = w->next;
			free(w);
		}
	free(t->bucket);
	*t = (struct wordtab){0};
}

static int wordtab_grow(struct wordtab *t)
{
	size_t n = t->nbuckets * 2;
	struct word **nb = calloc(n, sizeof *nb);
	if (!nb)
		return -1;
	struct wordtab bigger = {.bucket = nb, .nbuckets = n};
	for (size_t b = 0; b < t->nbuckets; b++)
		for (struct word *w = t->bucket[b], *next; w; w = next) {
			next = w->next;
			size_t k = word_bucket(&bigger, w->hash);
			w->next = nb[k];
			nb[k] = w;
		}
	free(t->bucket);
	t->bucket = nb;
	t->nbuckets = n;
	return 0;
}

/* The node of word p[0..len), made (one malloc) if it is new. */
static struct word *wordtab_get(struct wordtab *t, const char *p, size_t len, uint64_t h)
{
	struct word **head = &t->bucket[word_bucket(t, h)];
	for (struct word *w = *head; w; w = w->next)
		if (w->hash == h && w->len == len && !memcmp(w->text, p, len))
			return w;
	struct word *w = malloc(sizeof *w + len + 1);
	if (!w)
		return NULL;
	*w = (struct word){.next = *head, .hash = h, .len = len};
	memcpy(w->text, p, len);
	w->text[len] = 0;
	*head = w;
	if (++t->nwords > t->nbuckets && wordtab_grow(t) != 0)
		return NULL;
	return w;
}

int wordtab_scan(struct wordtab *t, const char *p, size_t len, uint32_t doc)
{
	size_t i = 0;
	for (;;) {
		while (i < len && (unsigned char)(p[i] - 'a') >= 26)
			i++;
		if (i == len)
			return 0;
		size_t start = i;
		uint64_t h = 0xcbf29ce484222325ull;
		while (i < len && (unsigned char)(p[i] - 'a') < 26)
			h = (h ^ (unsigned char)p[i++]) * 0x100000001b3ull;
		struct word *w = wordtab_get(t, p + start, i - start, h);
		if (!w)
			return -1;
		w->count++;
		if (w->last_doc != doc + 1) {
			w->last_doc = doc + 1;
			w->docs++;
		}
		t->total++;
	}
}

/* As bytes: u64 total, u64 nwords, then per word u32 len, u32 docs, u64 count, text. */
int wordtab_put(const struct wordtab *t, struct app_buf *out)
{
	uint64_t head[2] = {t->total, t->nwords};
	if (app_buf_put(out, head, sizeof head) != 0)
		return -1;
	for (size_t b = 0; b < t->nbuckets; b++)
		for (const struct word *w = t->bucket[b]; w; w = w->next) {
			struct {
				uint32_t len, docs;
				uint64_t count;
			} rec = {w->len, w->docs, w->count};
			if (app_buf_put(out, &rec, sizeof rec) != 0 || app_buf_put(out, w->text, w->len) != 0)
				return -1;
		}
	return 0;
}

int wordtab_merge(struct wordtab *t, const struct app_buf *part)
{
	const char *p = part->data, *end = part->data + part->len;
	uint64_t head[2];
	if (part->len < sizeof head)
		return -1;
	memcpy(head, p, sizeof head);
	p += sizeof head;
	for (uint64_t i = 0; i < head[1]; i++) {
		struct {
			uint32_t len, docs;
			uint64_t count;
		} rec;
		if ((size_t)(end - p) < sizeof rec)
			return -1;
		memcpy(&rec, p, sizeof rec);
		p += sizeof rec;
		if ((size_t)(end - p) < rec.len)
			return -1;
		struct word *w = wordtab_get(t, p, rec.len, word_hash(p, rec.len));
		if (!w)
			return -1;
		w->count += rec.count;
		w->docs += rec.docs;
		p += rec.len;
	}
	t->total += head[0];
	return p == end ? 0 : -1;
}

uint64_t wordtab_checksum(const struct wordtab *t, int with_docs)
{
	uint64_t sum = 0;
	for (size_t b = 0; b < t->nbuckets; b++)
		for (const struct word *w = t->bucket[b]; w; w = w->next)
			sum += app_mix64(w->hash ^ app_mix64(w->count + (with_docs ? (uint64_t)w->docs << 40 : 0)));
	return app_mix64(sum ^ app_mix64(t->total) ^ ((uint64_t)t->nwords << 32));
}
