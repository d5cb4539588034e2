/* Block I/O through io_uring on `run --target`: each worker keeps `qd`
 * direct reads and writes (option `reads`) of `bs` bytes at aligned
 * offsets, random or in order (io.h), in flight on a ring of its own,
 * driven one of two ways (option `wait`):
 *
 *   wait=0 (default, as fio's io_uring engine does): each free slot is
 *          submitted on an io_uring_enter of its own, the ring is reaped
 *          after it, and only a full queue with nothing completed waits;
 *   wait=1: every pass fills the free slots, submits them and waits for one
 *          completion in a single io_uring_enter: the fewest system calls,
 *          and a sleep whenever nothing has completed yet.
 *
 * and with the kernel's completion work run one of three ways (option
 * `taskrun`, IORING_SETUP_*): 0 by a signal-like interruption of the task,
 * 1 (default) at its next kernel entry (COOP_TASKRUN), 2 only when it asks
 * for completions (DEFER_TASKRUN with SINGLE_ISSUER, as fio 3.33 sets its
 * rings up). A kernel without the asked one gets what it has of it.
 *
 * Which is faster depends on where completions come from. At qd 16 on this
 * project's 2-CPU VM: a loop device (completed by a kworker on another
 * CPU) 330k IOPS with wait=0 against 240k with wait=1, fio 300k; zram
 * (io_uring hands its reads to io-wq threads on the submitting CPU) 240k
 * either way with taskrun=1, 220k with wait=0 and taskrun=2. The engine's
 * loop and bench/uring_loop.c, the same loop bare, agree for each way
 * (bench/io.py). The worker's `uring` record says how its ring was set up
 * and how many enters and waits each I/O took.
 *
 * An operation is one completed I/O. Its latency runs from just before the
 * io_uring_enter that submitted it to the reap that found it done (fio's
 * "lat": submission and completion). At the stop flag or the fixed count,
 * no more is submitted and what is in flight is waited for and counted, so
 * that every I/O issued is an operation and the device's counters agree.
 *
 * With a `rate`, an I/O is submitted only with a token (io.h's bucket,
 * `qd` deep): without one, the worker waits for a completion or for the
 * next token, whichever comes first, in one io_uring_enter with a timeout
 * (IORING_ENTER_EXT_ARG, 5.11), so that a completion is reaped when it
 * comes, not when the next token does.
 *
 * With `poll` (IORING_SETUP_IOPOLL), completions are not taken from the
 * device's interrupt: every io_uring_enter that asks for completions polls
 * the device for them, a wait spinning in the kernel until they are there.
 * Only a device with poll queues (nvme with poll_queues set) completes I/O
 * so; the check before the run asks the kernel with one read, and refuses
 * the rest. A polled ring takes no timeout: paced by a `rate`, a worker
 * with I/Os in flight polls until one completes (the CPU a polling driver
 * spends), and sleeps for its token only with none in flight.
 *
 * With `fsync` N, once N writes are submitted nothing more is until every
 * I/O in flight has completed and the sync is done (io.h's io_sync): an
 * fsync(2) between two passes, not an IORING_OP_FSYNC queued beside the
 * writes (fio's way), which would cover only those already complete.
 *
 * The raw interface (<linux/io_uring.h>), as fio itself uses, so that the
 * engine needs no library at run time: three mappings, two ring indices. */
#include "io.h"
#include "../json.h"

#include <errno.h>
#include <stdio.h>
#include <linux/io_uring.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define QD_MAX 4096
#define POLL_CHECK_NS 200000000ull /* a polled read not done by then: the device does not poll */

#ifndef IORING_SETUP_IOPOLL
#define IORING_SETUP_IOPOLL (1U << 0)
#endif
#ifndef IORING_SETUP_COOP_TASKRUN /* headers older than the kernel */
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif

/* The set-ups `taskrun` asks for, from 2 down: each falls back to the next
 * on a kernel without it (DEFER_TASKRUN: 6.1, COOP_TASKRUN: 5.19). */
static const unsigned SETUP_TRIES[] = {
	IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
	IORING_SETUP_COOP_TASKRUN,
	0,
};
#define TASKRUN_MAX 2

static const unsigned *setup_tries(const struct probe_env *env)
{
	return SETUP_TRIES + TASKRUN_MAX - probe_opt(env, "taskrun");
}

/* IORING_SETUP_IOPOLL where the `poll` option asks for it, else 0. */
static unsigned polled(const struct probe_env *env)
{
	return probe_opt(env, "poll") ? IORING_SETUP_IOPOLL : 0;
}

struct ring {
	int fd;
	unsigned flags;	   /* io_uring_setup's, as the kernel took them */
	unsigned features; /* IORING_FEAT_*, as the kernel has them */
	unsigned *sq_head, *sq_tail, *sq_array, sq_mask;
	unsigned *cq_head, *cq_tail, cq_mask;
	struct io_uring_sqe *sqes;
	struct io_uring_cqe *cqes;
	void *sq_map, *cq_map;
	size_t sq_len, cq_len, sqes_len;
};

struct uring {
	struct ring r;
	int fd, wait;		     /* wait: the `wait` option */
	int polled;		     /* IORING_SETUP_IOPOLL: the `poll` option */
	unsigned qd, nfree;	     /* in flight: qd - nfree */
	uint64_t ios, enters, waits; /* the books of the `uring` record, warm-up included */
	uint64_t reads, writes;
	struct io_pace pace;
	struct io_sync sync;
	size_t bs;
	char *bufs;	     /* qd blocks, one per slot */
	uint64_t *t_submit;  /* per slot: the ticks before the enter that submitted it */
	unsigned *free_slot; /* a stack of the slots not in flight */
	struct io_offsets off;
};

/* GETEVENTS always: with DEFER_TASKRUN it is what runs the deferred
 * completions, also when waiting for none. */
static int ring_enter(int fd, unsigned submit, unsigned wait)
{
	return (int)syscall(__NR_io_uring_enter, fd, submit, wait, IORING_ENTER_GETEVENTS, NULL, 0);
}

/* Waits for one completion until CLOCK_MONOTONIC `until_ns` at the latest
 * (ETIME then, which is no failure). */
static int ring_wait_until(int fd, uint64_t until_ns)
{
	uint64_t now = io_mono_ns(), left = until_ns > now ? until_ns - now : 0;
	struct __kernel_timespec ts = {.tv_sec = (long long)(left / 1000000000ull),
				       .tv_nsec = (long long)(left % 1000000000ull)};
	struct io_uring_getevents_arg arg = {.ts = (unsigned long long)(uintptr_t)&ts};
	int rc = (int)syscall(__NR_io_uring_enter, fd, 0, 1, IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG, &arg,
			      sizeof arg);
	return rc < 0 && errno == ETIME ? 0 : rc;
}

static void ring_unmap(struct ring *r)
{
	if (r->sqes && r->sqes != MAP_FAILED)
		munmap(r->sqes, r->sqes_len);
	if (r->cq_map && r->cq_map != MAP_FAILED && r->cq_map != r->sq_map)
		munmap(r->cq_map, r->cq_len);
	if (r->sq_map && r->sq_map != MAP_FAILED)
		munmap(r->sq_map, r->sq_len);
	if (r->fd >= 0)
		close(r->fd); /* waits for, or cancels, what is still in flight */
}

/* A ring of `entries`, set up with the first of `tries` (0-terminated)
 * that the kernel takes, each with the flags `always` too. */
static int ring_setup(struct ring *r, unsigned entries, const unsigned *tries, unsigned always)
{
	struct io_uring_params p;
	memset(r, 0, sizeof *r);
	do {
		memset(&p, 0, sizeof p);
		p.flags = *tries | always;
		r->fd = (int)syscall(__NR_io_uring_setup, entries, &p);
	} while (r->fd < 0 && errno == EINVAL && *tries++);
	if (r->fd < 0)
		return -1;
	r->flags = p.flags;
	r->features = p.features;
	r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if (p.features & IORING_FEAT_SINGLE_MMAP)
		r->sq_len = r->cq_len = r->sq_len > r->cq_len ? r->sq_len : r->cq_len;
	r->sq_map = mmap(NULL, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
	if (r->sq_map == MAP_FAILED)
		return -1;
	r->cq_map = p.features & IORING_FEAT_SINGLE_MMAP ? r->sq_map
							 : mmap(NULL, r->cq_len, PROT_READ | PROT_WRITE,
								MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
	if (r->cq_map == MAP_FAILED)
		return -1;
	r->sqes_len = p.sq_entries * sizeof(struct io_uring_sqe);
	r->sqes = mmap(NULL, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
	if (r->sqes == MAP_FAILED)
		return -1;
	char *sq = r->sq_map, *cq = r->cq_map;
	r->sq_head = (unsigned *)(sq + p.sq_off.head);
	r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
	r->sq_mask = *(unsigned *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned *)(sq + p.sq_off.array);
	r->cq_head = (unsigned *)(cq + p.cq_off.head);
	r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
	r->cq_mask = *(unsigned *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	/* sqe i always goes in ring entry i (as liburing does): set once, not per I/O */
	for (unsigned i = 0; i < p.sq_entries; i++)
		r->sq_array[i] = i;
	return 0;
}

static void uring_teardown(struct worker *w)
{
	struct uring *u = w->data;
	if (!u)
		return;
	ring_unmap(&u->r);
	if (u->fd >= 0)
		close(u->fd);
	free(u->bufs);
	free(u->t_submit);
	free(u->free_slot);
	free(u);
}

static int uring_setup(struct worker *w)
{
	const struct probe_env *env = w->env;
	struct uring *u = calloc(1, sizeof *u);
	if (!u)
		return -1;
	w->data = u;
	u->r.fd = -1;
	u->wait = (int)probe_opt(env, "wait");
	u->polled = polled(env) != 0;
	u->qd = (unsigned)probe_opt(env, "qd");
	u->bs = (size_t)probe_opt(env, "bs");
	u->fd = io_open(env, io_writes(env), 1);
	unsigned logical;
	int64_t bytes = u->fd < 0 ? -1 : io_target_size(u->fd, &logical);
	u->t_submit = calloc(u->qd, sizeof *u->t_submit);
	u->free_slot = calloc(u->qd, sizeof *u->free_slot);
	if (bytes < 0 || !u->t_submit || !u->free_slot || !(u->bufs = io_buffer(u->qd * u->bs, w->index)) ||
	    ring_setup(&u->r, u->qd, setup_tries(env), polled(env)) != 0) {
		int e = errno;
		uring_teardown(w);
		w->data = NULL;
		errno = e;
		return -1;
	}
	io_offsets_init(&u->off, env, w->index, io_span(env, (uint64_t)bytes), u->bs);
	io_pace_init(&u->pace, probe_opt(env, "rate"), u->qd);
	io_sync_init(&u->sync, env);
	for (unsigned i = 0; i < u->qd; i++)
		u->free_slot[u->nfree++] = i;
	return 0;
}

/* Fills the sqe of the free slot on top of the stack, and pops it. */
static inline void uring_prep(struct uring *u)
{
	struct ring *r = &u->r;
	unsigned slot = u->free_slot[--u->nfree];
	unsigned tail = *r->sq_tail, idx = tail & r->sq_mask;
	struct io_uring_sqe *sqe = &r->sqes[idx];
	memset(sqe, 0, sizeof *sqe);
	if (io_next_is_read(&u->off)) {
		sqe->opcode = IORING_OP_READ;
		u->reads++;
	} else {
		sqe->opcode = IORING_OP_WRITE;
		u->writes++;
		u->sync.unsynced++;
	}
	sqe->fd = u->fd;
	sqe->addr = (unsigned long)(u->bufs + (size_t)slot * u->bs);
	sqe->len = (unsigned)u->bs;
	sqe->off = (unsigned long long)io_next_offset(&u->off);
	sqe->user_data = slot;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

/* Every completion there is; -1 with errno at a failed or short I/O. */
static inline int uring_reap(struct uring *u, struct hist *h, uint64_t *done, volatile uint64_t *ops)
{
	struct ring *r = &u->r;
	unsigned head = *r->cq_head, tail = __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
	uint64_t now = h && head != tail ? ticks_end() : 0;
	int rc = 0;
	for (; head != tail; head++) {
		const struct io_uring_cqe *c = &r->cqes[head & r->cq_mask];
		unsigned slot = (unsigned)c->user_data;
		if (__builtin_expect(c->res != (int)u->bs, 0)) {
			errno = c->res < 0 ? -c->res : EIO;
			rc = -1;
		} else if (h) {
			hist_record(h, now - u->t_submit[slot]);
		}
		u->free_slot[u->nfree++] = slot;
		*ops = ++*done;
	}
	__atomic_store_n(r->cq_head, head, __ATOMIC_RELEASE);
	return rc;
}

/* Submits what the ring holds, waiting for `wait` completions. */
static inline int uring_enter(struct uring *u, unsigned wait)
{
	unsigned pending = *u->r.sq_tail - __atomic_load_n(u->r.sq_head, __ATOMIC_ACQUIRE);
	u->enters++;
	u->waits += wait != 0;
	return ring_enter(u->r.fd, pending, wait);
}

static inline int cq_empty(const struct uring *u)
{
	return *u->r.cq_head == __atomic_load_n(u->r.cq_tail, __ATOMIC_ACQUIRE);
}

/* Keeps qd I/Os in flight until the limit or the stop flag, then drains.
 * Always inlined: each wrapper gets a copy with h constant, without the
 * per-pass tests of it (as PROBE_LOOP gives the other probes). */
static inline __attribute__((always_inline)) uint64_t uring_run(struct worker *w, const struct loop *l, struct hist *h,
								int *err)
{
	struct uring *u = w->data;
	const volatile int *stop = l->stop;
	uint64_t submitted = 0, done = 0;
	int ret = 0;
	for (;;) {
		unsigned n = 0;
		/* tokens for this pass: as many as there are slots when unpaced */
		uint64_t tokens = u->pace.interval_ns ? io_pace_tokens(&u->pace, io_mono_ns()) : UINT64_MAX;
		if (!*stop && !*err)
			while (u->nfree && submitted < l->limit && tokens && !io_sync_due(&u->sync)) {
				tokens--;
				if (u->pace.interval_ns)
					io_pace_take(&u->pace);
				uring_prep(u);
				submitted++;
				if (u->wait) {
					n++;
					continue;
				}
				/* the slot just popped sits at free_slot[nfree] */
				if (h)
					u->t_submit[u->free_slot[u->nfree]] = ticks_begin();
				if ((ret = uring_enter(u, 0)) < 0 && errno != EINTR)
					goto failed;
			}
		unsigned inflight = u->qd - u->nfree;
		int draining = *stop || submitted >= l->limit || *err;
		/* a sync due waits for what is in flight (this pass's too), then syncs */
		int syncing = !draining && io_sync_due(&u->sync);
		if (!inflight && draining)
			break;
		if (!inflight && syncing) {
			if (io_sync_run(&u->sync, u->fd) != 0)
				*err = errno;
			continue;
		}
		if (!tokens && u->nfree && !draining && !syncing) {
			/* held by the rate: submit what this pass filled, then wait
			 * for a completion or the next token (the timeout) */
			if (n && h) {
				uint64_t t = ticks_begin();
				for (unsigned i = u->nfree; i < u->nfree + n; i++)
					u->t_submit[u->free_slot[i]] = t;
			}
			if (n && (ret = uring_enter(u, 0)) < 0 && errno != EINTR)
				goto failed;
			if (!inflight) {
				io_pace_sleep(&u->pace);
				continue;
			}
			u->enters++;
			u->waits++;
			/* a polled ring takes no timeout: it polls until the
			 * completion, spinning as a polling driver does */
			ret = u->polled ? ring_enter(u->r.fd, 0, 1) : ring_wait_until(u->r.fd, u->pace.next_ns);
		} else if (u->wait || draining || syncing) {
			if (h && n) {
				/* this pass's slots, popped off the stack and not
				 * yet pushed back (only the reap below pushes) */
				uint64_t t = ticks_begin();
				for (unsigned i = u->nfree; i < u->nfree + n; i++)
					u->t_submit[u->free_slot[i]] = t;
			}
			/* what the kernel has not consumed yet, this pass's and
			 * any an interrupted enter left; while draining, wait
			 * for them all */
			ret = uring_enter(u, draining || syncing ? inflight : 1);
		} else if (cq_empty(u)) {
			ret = uring_enter(u, 1); /* full, and nothing has completed */
		}
		if (__builtin_expect(ret < 0, 0) && errno != EINTR)
			goto failed;
		if (uring_reap(u, h, &done, l->ops) != 0 && !*err)
			*err = errno;
	}
	u->ios += done;
	return done;
failed:
	*err = errno; /* close() of the ring, in teardown, cancels the rest */
	u->ios += done;
	return done;
}

IO_QUEUED_LOOPS(uring_run)

/* How the ring was driven: the set-up the kernel took, and the enters and
 * waits per I/O (warm-up included: a ratio of the steady loop). */
static int uring_emit(struct worker *w, struct json *j)
{
	const struct uring *u = w->data;
	json_arr(j, "setup");
	if (u->r.flags & IORING_SETUP_IOPOLL)
		json_str(j, NULL, "IOPOLL");
	if (u->r.flags & IORING_SETUP_COOP_TASKRUN)
		json_str(j, NULL, "COOP_TASKRUN");
	if (u->r.flags & IORING_SETUP_SINGLE_ISSUER)
		json_str(j, NULL, "SINGLE_ISSUER");
	if (u->r.flags & IORING_SETUP_DEFER_TASKRUN)
		json_str(j, NULL, "DEFER_TASKRUN");
	json_end(j);
	json_int(j, "wait", u->wait);
	json_uint(j, "ios", u->ios);
	json_uint(j, "enters", u->enters);
	json_uint(j, "waits", u->waits);
	io_emit_books(j, u->reads, u->writes, &u->pace, &u->sync);
	return 0;
}

/* A polled ring's one read of a block at offset 0: 0, or -1 with why the
 * device completes no I/O by polling (the kernel's answer, -EOPNOTSUPP,
 * where it has no poll queues). */
static int poll_one_read(struct ring *r, const struct probe_env *env, char *why, size_t len)
{
	size_t bs = (size_t)probe_opt(env, "bs");
	int fd = io_open(env, 0, 1);
	void *buf = fd >= 0 ? io_buffer(bs, 0) : NULL;
	int rc = -1, done = 1;
	if (buf) {
		struct io_uring_sqe *sqe = &r->sqes[0];
		memset(sqe, 0, sizeof *sqe);
		sqe->opcode = IORING_OP_READ;
		sqe->fd = fd;
		sqe->addr = (unsigned long)buf;
		sqe->len = (unsigned)bs;
		__atomic_store_n(r->sq_tail, *r->sq_tail + 1, __ATOMIC_RELEASE);
		/* on a device without poll queues the read is never found by
		 * polling (6.18 here: enter returns at once and no completion
		 * comes; or -EOPNOTSUPP; before 6.11 the kernel quietly took the
		 * read by interrupt, which only the disk's queue/io_poll, read
		 * by oslens first, tells): ask until POLL_CHECK_NS have passed */
		int n = ring_enter(r->fd, 1, 1);
		unsigned head = *r->cq_head;
		uint64_t until = io_mono_ns() + POLL_CHECK_NS;
		while (n >= 0 && head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE) && io_mono_ns() < until)
			n = ring_enter(r->fd, 0, 1);
		done = head != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE);
		if (n < 0)
			snprintf(why, len, "a polled read: %s", strerror(errno));
		else if (!done || r->cqes[head & r->cq_mask].res == -EOPNOTSUPP)
			snprintf(why, len,
				 "the device completes no I/O by polling (it has no poll queues: nvme's "
				 "poll_queues gives them)");
		else if (r->cqes[head & r->cq_mask].res != (int)bs)
			snprintf(why, len, "a polled read: %s", strerror(-r->cqes[head & r->cq_mask].res));
		else
			rc = 0;
	} else {
		snprintf(why, len, "%s: %s", fd < 0 ? "cannot open it for direct I/O" : "no memory for a block",
			 strerror(errno));
	}
	if (done) /* a read still in flight may land in it after the ring is gone: left to the exit */
		free(buf);
	if (fd >= 0)
		close(fd);
	return rc;
}

static int uring_check_target(const struct probe_env *env, char *why, size_t len)
{
	if (io_check(env, io_writes(env), 1, why, len) != 0)
		return -1;
	struct ring r;
	int rc = ring_setup(&r, (unsigned)probe_opt(env, "qd"), setup_tries(env), polled(env));
	if (rc != 0)
		snprintf(why, len, "cannot set up an io_uring of %ld entries%s: %s%s", probe_opt(env, "qd"),
			 polled(env) ? ", polled" : "", strerror(errno),
			 errno == EPERM ? " (kernel.io_uring_disabled?)" : "");
	else if (probe_opt(env, "rate") && !polled(env) && !(r.features & IORING_FEAT_EXT_ARG)) {
		snprintf(why, len, "a rate needs io_uring waits with a timeout (IORING_FEAT_EXT_ARG, Linux 5.11)");
		rc = -1;
	} else if (polled(env))
		rc = poll_one_read(&r, env, why, len);
	ring_unmap(&r);
	return rc;
}

OSLENS_PROBE(io_uring) = {
	.name = "io-uring",
	.summary = "direct reads and writes of bs bytes at aligned offsets of --target, qd in flight on io_uring",
	.subsystem = "block",
	.syscalls = "io_uring_enter",
	.variants = {{"direct", "IORING_OP_READ and IORING_OP_WRITE, O_DIRECT"}},
	.opts = {IO_OPTS_COMMON,
		 {"qd", 1, 1, QD_MAX, "I/Os each worker keeps in flight"},
		 {"wait", 0, 0, 1,
		  "0: an enter per I/O, waiting only when full (fio's); 1: submit all, wait in one enter"},
		 {"taskrun", 1, 0, TASKRUN_MAX,
		  "completions run 0: by interruption; 1: COOP_TASKRUN; 2: DEFER_TASKRUN"},
		 {"poll", 0, 0, 1, "1: IORING_SETUP_IOPOLL, completions polled from a device with poll queues"}},
	.needs_target = 1,
	.check_target = uring_check_target,
	.setup = uring_setup,
	.teardown = uring_teardown,
	IO_QUEUED_OPS(uring_run),
	.emit = uring_emit,
	.emit_type = "uring",
};
