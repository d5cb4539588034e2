/* Block I/O through Linux native AIO on `run --target` (fio's libaio
 * engine): each worker keeps `qd` direct reads and writes (option `reads`)
 * of `bs` bytes at aligned offsets, random or in order (io.h), in flight
 * on an AIO context of its own, driven as fio drives it by default
 * (iodepth_batch_submit=1, iodepth_batch_complete_min=1): an io_submit per
 * I/O while a slot is free, and an io_getevents that waits for at least
 * one completion, and takes all there are, once the queue is full.
 *
 * An operation is one completed I/O; its latency runs from just before the
 * io_submit that submitted it to the io_getevents that returned it (fio's
 * "lat"). At the stop flag or the fixed count nothing more is submitted and
 * what is in flight is waited for and counted, as io_uring.c does. With a
 * `rate` (io.h's bucket, `qd` deep) a worker without a token waits for a
 * completion or the next token, whichever comes first (io_getevents'
 * timeout). With `fsync` N, once N writes are submitted nothing more is
 * until every I/O in flight has completed and the sync is done (io.h's
 * io_sync, as fio's libaio engine serialises its syncs).
 *
 * The system calls themselves (<linux/aio_abi.h>), not libaio's wrappers
 * around them: the engine needs no library at run time, and the calls
 * made are the ones fio's libaio engine makes. */
#include "io.h"
#include "../json.h"

#include <errno.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define QD_MAX 4096

struct aio {
	aio_context_t ctx;
	int fd;
	unsigned qd, nfree; /* in flight: qd - nfree */
	size_t bs;
	char *bufs;
	struct iocb *iocbs;	     /* one per slot */
	struct io_event *events;     /* qd */
	uint64_t *t_submit;	     /* per slot: the ticks before its io_submit */
	unsigned *free_slot;	     /* a stack of the slots not in flight */
	uint64_t submits, getevents; /* the books of the `aio` record, warm-up included */
	uint64_t reads, writes;
	struct io_offsets off;
	struct io_pace pace;
	struct io_sync sync;
};

static long aio_getevents(struct aio *a, long min, const struct timespec *timeout)
{
	a->getevents++;
	return syscall(__NR_io_getevents, a->ctx, min, (long)a->qd, a->events, timeout);
}

static void aio_teardown(struct worker *w)
{
	struct aio *a = w->data;
	if (!a)
		return;
	if (a->ctx)
		syscall(__NR_io_destroy, a->ctx); /* waits for what is still in flight */
	if (a->fd >= 0)
		close(a->fd);
	free(a->bufs);
	free(a->iocbs);
	free(a->events);
	free(a->t_submit);
	free(a->free_slot);
	free(a);
}

static int aio_setup(struct worker *w)
{
	const struct probe_env *env = w->env;
	struct aio *a = calloc(1, sizeof *a);
	if (!a)
		return -1;
	w->data = a;
	a->qd = (unsigned)probe_opt(env, "qd");
	a->bs = (size_t)probe_opt(env, "bs");
	a->fd = io_open(env, io_writes(env), 1);
	unsigned logical;
	int64_t bytes = a->fd < 0 ? -1 : io_target_size(a->fd, &logical);
	a->iocbs = calloc(a->qd, sizeof *a->iocbs);
	a->events = calloc(a->qd, sizeof *a->events);
	a->t_submit = calloc(a->qd, sizeof *a->t_submit);
	a->free_slot = calloc(a->qd, sizeof *a->free_slot);
	if (bytes < 0 || !a->iocbs || !a->events || !a->t_submit || !a->free_slot ||
	    !(a->bufs = io_buffer(a->qd * a->bs, w->index)) || syscall(__NR_io_setup, a->qd, &a->ctx) != 0) {
		int e = errno;
		aio_teardown(w);
		w->data = NULL;
		errno = e;
		return -1;
	}
	io_offsets_init(&a->off, env, w->index, io_span(env, (uint64_t)bytes), a->bs);
	io_pace_init(&a->pace, probe_opt(env, "rate"), a->qd);
	io_sync_init(&a->sync, env);
	for (unsigned i = 0; i < a->qd; i++)
		a->free_slot[a->nfree++] = i;
	return 0;
}

/* Fills the iocb of the free slot on top of the stack, pops it and
 * submits it. */
static inline int aio_submit_one(struct aio *a, struct hist *h)
{
	unsigned slot = a->free_slot[--a->nfree];
	struct iocb *cb = &a->iocbs[slot];
	memset(cb, 0, sizeof *cb);
	if (io_next_is_read(&a->off)) {
		cb->aio_lio_opcode = IOCB_CMD_PREAD;
		a->reads++;
	} else {
		cb->aio_lio_opcode = IOCB_CMD_PWRITE;
		a->writes++;
		a->sync.unsynced++;
	}
	cb->aio_fildes = (uint32_t)a->fd;
	cb->aio_buf = (uint64_t)(uintptr_t)(a->bufs + (size_t)slot * a->bs);
	cb->aio_nbytes = a->bs;
	cb->aio_offset = (int64_t)io_next_offset(&a->off);
	cb->aio_data = slot;
	if (h)
		a->t_submit[slot] = ticks_begin();
	a->submits++;
	struct iocb *one = cb;
	long rc;
	do
		rc = syscall(__NR_io_submit, a->ctx, 1L, &one);
	while (rc < 0 && errno == EINTR);
	if (rc == 1)
		return 0;
	a->free_slot[a->nfree++] = slot; /* not in flight */
	if (rc == 0)
		errno = EIO;
	return -1;
}

/* What io_getevents returned: slots freed, latencies recorded; -1 with
 * errno at a failed or short I/O. */
static inline int aio_reap(struct aio *a, long n, struct hist *h, uint64_t *done, volatile uint64_t *ops)
{
	uint64_t now = h && n > 0 ? ticks_end() : 0;
	int rc = 0;
	for (long i = 0; i < n; i++) {
		const struct io_event *e = &a->events[i];
		unsigned slot = (unsigned)e->data;
		if (__builtin_expect(e->res != (int64_t)a->bs, 0)) {
			errno = e->res < 0 ? (int)-e->res : EIO;
			rc = -1;
		} else if (h) {
			hist_record(h, now - a->t_submit[slot]);
		}
		a->free_slot[a->nfree++] = slot;
		*ops = ++*done;
	}
	return rc;
}

static inline __attribute__((always_inline)) uint64_t aio_run(struct worker *w, const struct loop *l, struct hist *h,
							      int *err)
{
	struct aio *a = w->data;
	const volatile int *stop = l->stop;
	uint64_t submitted = 0, done = 0;
	for (;;) {
		uint64_t tokens = a->pace.interval_ns ? io_pace_tokens(&a->pace, io_mono_ns()) : UINT64_MAX;
		if (!*stop && !*err)
			while (a->nfree && submitted < l->limit && tokens && !io_sync_due(&a->sync)) {
				tokens--;
				if (a->pace.interval_ns)
					io_pace_take(&a->pace);
				if (aio_submit_one(a, h) != 0) {
					*err = errno;
					break;
				}
				submitted++;
			}
		unsigned inflight = a->qd - a->nfree;
		int draining = *stop || submitted >= l->limit || *err;
		int syncing = !draining && io_sync_due(&a->sync); /* waits for what is in flight, then syncs */
		if (!inflight && draining)
			break;
		if (!inflight && syncing) {
			if (io_sync_run(&a->sync, a->fd) != 0)
				*err = errno;
			continue;
		}
		long n;
		if (draining || syncing || !a->nfree) {
			n = aio_getevents(a, draining || syncing ? inflight : 1, NULL);
		} else if (!inflight) {
			io_pace_sleep(&a->pace); /* held by the rate, nothing to wait for */
			continue;
		} else {
			/* held by the rate: a completion or the next token */
			uint64_t now = io_mono_ns(), left = a->pace.next_ns > now ? a->pace.next_ns - now : 0;
			struct timespec ts = {.tv_sec = (time_t)(left / 1000000000ull),
					      .tv_nsec = (long)(left % 1000000000ull)};
			n = aio_getevents(a, 1, &ts);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			*err = errno; /* io_destroy, in teardown, waits for the rest */
			break;
		}
		if (aio_reap(a, n, h, &done, l->ops) != 0 && !*err)
			*err = errno;
	}
	return done;
}

IO_QUEUED_LOOPS(aio_run)

/* How the context was driven: system calls per I/O, and the directions
 * and pacing (warm-up included). */
static int aio_emit(struct worker *w, struct json *j)
{
	const struct aio *a = w->data;
	json_uint(j, "submits", a->submits);
	json_uint(j, "getevents", a->getevents);
	io_emit_books(j, a->reads, a->writes, &a->pace, &a->sync);
	return 0;
}

static int aio_check_target(const struct probe_env *env, char *why, size_t len)
{
	if (io_check(env, io_writes(env), 1, why, len) != 0)
		return -1;
	aio_context_t ctx = 0;
	if (syscall(__NR_io_setup, (unsigned)probe_opt(env, "qd"), &ctx) != 0) {
		snprintf(why, len, "cannot set up an AIO context of %ld requests: %s%s", probe_opt(env, "qd"),
			 strerror(errno), errno == EAGAIN ? " (fs.aio-max-nr reached)" : "");
		return -1;
	}
	syscall(__NR_io_destroy, ctx);
	return 0;
}

OSLENS_PROBE(libaio) = {
	.name = "libaio",
	.summary = "direct reads and writes of bs bytes at aligned offsets of --target, qd in flight on Linux AIO",
	.subsystem = "block",
	.syscalls = "io_submit,io_getevents",
	.variants = {{"direct", "IOCB_CMD_PREAD and IOCB_CMD_PWRITE, O_DIRECT"}},
	.opts = {IO_OPTS_COMMON, {"qd", 1, 1, QD_MAX, "I/Os each worker keeps in flight"}},
	.needs_target = 1,
	.check_target = aio_check_target,
	.setup = aio_setup,
	.teardown = aio_teardown,
	IO_QUEUED_OPS(aio_run),
	.emit = aio_emit,
	.emit_type = "aio",
};
