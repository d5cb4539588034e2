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

static const char *const kind_names[] = {[APP_COMPUTE] = "compute", [APP_MEMORY] = "memory", [APP_KERNEL] = "kernel"};

/* ------------------------------------------------ shared state, barrier */

/* In MAP_SHARED memory, so that it is the same object for threads and for
 * forked workers; the futexes are therefore never FUTEX_PRIVATE. */
struct app_ctl {
	int ready;     /* threads that wait for go */
	int go;	       /* the start barrier's release */
	int done;      /* threads finished, well or not */
	int failed;    /* the first failure's message is in msg */
	uint64_t t0;   /* CLOCK_MONOTONIC at the release */
	char msg[320]; /* "worker N: " and a worker's err */
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
	if (rc != 0 && __atomic_compare_exchange_n(&c->failed, &expected, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
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
	for (int got;
	     (got = __atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) < n && !__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE);)
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
	int fd; /* read end, -1 at EOF */
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
		fail_children(r, ch, n, "worker %d exited with status %d without its whole result", i, WEXITSTATUS(st));
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

int cmd_app(int argc, char **argv)
{
	struct app_config cfg;
	app_parse_args(argc, argv, &cfg);
	if (cfg.list) {
		app_foreach(emit_app_info);
		return 0;
	}
	const struct app *app = cfg.app;
	struct app_run r = {.app = app,
			    .nworkers = cfg.nworkers,
			    .threaded = cfg.threaded,
			    .size = cfg.size,
			    .size_given = cfg.size_given,
			    .dir = cfg.dir};
	if (cfg.dry_run)
		return emit_app_config(&r, cfg.prepare);
	if (cfg.prepare) {
		if (app->prepare(&r) != 0)
			die_failed("%s --prepare %s: %s", app->name, r.dir, r.err);
		return 0;
	}

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
