/* What the block I/O probes share (io.c: pread/pwrite, direct or through
 * the page cache; io_uring.c; libaio.c): the target's geometry, its checks,
 * and the shape of each worker's stream of I/Os, as fio's job options give
 * it: where each lands (rw=rand* or sequential), whether it reads or writes
 * (rwmixread=), and how fast it may go (rate_iops=, a token bucket). */
#ifndef OSLENS_PROBES_IO_H
#define OSLENS_PROBES_IO_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "../probe.h"

#define IO_BS_MIN 512
#define IO_BS_MAX (1L << 20)

#define IO_RATE_MIN 100 /* a token at most 10 ms away: the stop flag is seen in time */
#define IO_RATE_MAX 10000000

/* The options every I/O probe takes. */
#define IO_OPTS_COMMON                                                                                            \
	{"bs", 4096, IO_BS_MIN, IO_BS_MAX, "bytes per I/O, a multiple of the logical block size"},                \
		{"span_mb", 0, 0, 1L << 40, "I/Os land in the first span_mb MiB of the target (0: all of it)"},   \
		{"reads", 100, 0, 100, "percent of the I/Os that read, the rest write (fio's rwmixread)"},        \
		{"seq", 0, 0, 1, "1: each worker runs through a slice of its own in order; 0: random blocks"},    \
		{"rate", 0, 0, IO_RATE_MAX, "I/Os per second per worker, a token bucket (0: as fast as it can)"}, \
		{"fsync", 0, 0, 1L << 30, "an fsync after every fsync writes (0: none), outside the timed I/Os"}, \
	{                                                                                                         \
		"datasync", 0, 0, 1, "1: fdatasync rather than fsync"                                             \
	}

static inline uint64_t io_xorshift(uint64_t *state)
{
	uint64_t x = *state;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1Dull; /* xorshift64* */
}

/* Where the I/Os of one worker land, and which way each goes.
 * Random: uniformly random blocks of `bs` bytes over the first `blocks`
 * blocks of the target (as fio's randread with norandommap: a block may
 * come twice, none is skipped on purpose). Sequential: the worker's own
 * slice of the span, block after block, wrapping at its end (fio's
 * offset_increment: jobs never read each other's blocks). */
struct io_offsets {
	uint64_t state; /* offsets */
	uint64_t blocks;
	uint64_t bs;
	int seq;
	uint64_t first, slice, cursor; /* sequential: blocks [first, first + slice) */
	unsigned reads;		       /* percent */
	uint64_t mix_state;	       /* directions: a sequence of its own, so offsets are the same at any mix */
};

static inline off_t io_next_offset(struct io_offsets *o)
{
	if (o->seq) {
		uint64_t b = o->first + o->cursor;
		o->cursor = o->cursor + 1 == o->slice ? 0 : o->cursor + 1;
		return (off_t)(b * o->bs);
	}
	/* scaled to [0, blocks) by a 64x64->128 multiply-high: no modulo in
	 * the loop, and no overflow past 2^32 blocks */
	uint64_t r = io_xorshift(&o->state);
	return (off_t)((uint64_t)(((unsigned __int128)r * o->blocks) >> 64) * o->bs);
}

/* Whether the next I/O reads: always, never, or `reads` percent of the
 * time at random (the branch is not taken at 100 or 0). */
static inline int io_next_is_read(struct io_offsets *o)
{
	if (o->reads >= 100 || o->reads == 0)
		return o->reads != 0;
	return (unsigned)(((unsigned __int128)io_xorshift(&o->mix_state) * 100) >> 64) < o->reads;
}

/* A generator for worker `index` of `nworkers`, as the options of env ask
 * (seq, reads): its own sequence, the same in every run. */
void io_offsets_init(struct io_offsets *o, const struct probe_env *env, int index, uint64_t target_bytes, uint64_t bs);

/* Whether the probe's options have any I/O write. */
static inline int io_writes(const struct probe_env *env)
{
	return probe_opt(env, "reads") < 100;
}

/* fio's rate_iops for one worker, as a token bucket: an I/O may start when
 * a token is there; tokens come every `interval_ns` and the bucket holds
 * `depth` of them, so a worker that was held up (a slow I/O, a preemption)
 * catches up by at most `depth` I/Os and never runs above the rate over
 * any longer stretch. */
struct io_pace {
	uint64_t interval_ns; /* 0: unpaced */
	uint64_t next_ns;     /* CLOCK_MONOTONIC: when the next token is there (0: at the first I/O) */
	uint64_t depth_ns;    /* the bucket, in time: depth × interval */
	uint64_t sleeps;      /* the sleeps taken for a token */
	uint64_t dropped;     /* tokens that overflowed the bucket (the worker fell behind the rate) */
};

/* A pace of `rate` I/Os per second, a bucket of `depth` tokens or of
 * IO_PACE_CATCH_UP_NS of them, whichever is more: a worker held up for a
 * few milliseconds (preempted on a busy machine, a slow I/O) catches up,
 * as fio's rate does, and one held up for longer does not burst past it. */
#define IO_PACE_CATCH_UP_NS 10000000ull
void io_pace_init(struct io_pace *p, long rate, unsigned depth);

static inline uint64_t io_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The tokens there now (at most the bucket's), none taken. */
static inline uint64_t io_pace_tokens(struct io_pace *p, uint64_t now)
{
	if (!p->next_ns)
		p->next_ns = now;
	if (now < p->next_ns)
		return 0;
	if (now - p->next_ns >= p->depth_ns) { /* the bucket overflowed */
		uint64_t over = now - p->next_ns - p->depth_ns + p->interval_ns;
		p->dropped += over / p->interval_ns;
		p->next_ns += over / p->interval_ns * p->interval_ns;
	}
	return (now - p->next_ns) / p->interval_ns + 1;
}

static inline void io_pace_take(struct io_pace *p)
{
	p->next_ns += p->interval_ns;
}

/* Sleeps until the next token is there (a signal may end it sooner: the
 * caller looks again). */
void io_pace_sleep(struct io_pace *p);

/* Waits for a token and takes it: at once when unpaced. */
static inline void io_pace_wait(struct io_pace *p)
{
	if (!p->interval_ns)
		return;
	while (!io_pace_tokens(p, io_mono_ns()))
		io_pace_sleep(p);
	io_pace_take(p);
}

/* `fsync` N (fio's fsync=/fdatasync=): once N writes have been issued
 * since the last sync, nothing more is issued until the sync is done. A
 * queued engine first waits for every I/O in flight, as fio's libaio
 * engine does, so that the sync covers the N writes: an fsync orders
 * nothing against writes still in flight. The sync itself is a system
 * call, timed and counted apart from the I/Os (their latencies do not hold
 * it), as fio reports syncs apart. */
struct io_sync {
	long every;	    /* the `fsync` option: writes per sync (0: none) */
	int datasync;	    /* fdatasync rather than fsync */
	long unsynced;	    /* writes issued since the last sync */
	uint64_t syncs, ns; /* the books of the worker's record, warm-up included */
};

void io_sync_init(struct io_sync *s, const struct probe_env *env);

static inline int io_sync_due(const struct io_sync *s)
{
	return s->every && s->unsynced >= s->every;
}

/* The sync of fd, timed; -1 with errno. */
int io_sync_run(struct io_sync *s, int fd);

/* The target's size in bytes (a block device's or a regular file's), or -1
 * with errno; *logical: the device's logical block size (512 for a file). */
int64_t io_target_size(int fd, unsigned *logical);

/* The bytes the I/Os span: the option span_mb, at most the target. */
uint64_t io_span(const struct probe_env *env, uint64_t target_bytes);

/* Opens the target for a worker: read-only or read-write, direct or
 * through the page cache. */
int io_open(const struct probe_env *env, int writing, int direct);

/* The checks every I/O probe makes of its target before a run: a block
 * device or a regular file, large enough for one block, bs a multiple of
 * its logical block size, direct I/O accepted (one read of a block: reads
 * are harmless), and for writes, writable and, for a block device, not
 * held by anyone (mounted, swap, a device mapper: the kernel's O_EXCL). */
int io_check(const struct probe_env *env, int writing, int direct, char *why, size_t len);

/* A buffer of n bytes aligned for direct I/O, filled with bytes that do not
 * repeat, so that a compressing device (zram) stores what it is written
 * as it would real data, not as a same-filled page. NULL with errno. */
void *io_buffer(size_t n, int index);

/* The loops of a queued engine (io_uring.c, libaio.c) around its
 * always-inlined `run(w, l, h, err)`: a copy with h constant for each of
 * `loop` and `timed`, and `one`, an I/O submitted and waited for (warm-up):
 * nothing stays in flight. */
#define IO_QUEUED_LOOPS(run)                                                                          \
	static uint64_t run##_loop(struct worker *w, const struct loop *l, int *err)                  \
	{                                                                                             \
		return run(w, l, NULL, err);                                                          \
	}                                                                                             \
	static uint64_t run##_timed(struct worker *w, const struct loop *l, struct hist *h, int *err) \
	{                                                                                             \
		return run(w, l, h, err);                                                             \
	}                                                                                             \
	static int run##_one(struct worker *w)                                                        \
	{                                                                                             \
		static const int no_stop;                                                             \
		uint64_t one = 0;                                                                     \
		int err = 0;                                                                          \
		const struct loop l = {.limit = 1, .stop = &no_stop, .ops = &one};                    \
		run(w, &l, NULL, &err);                                                               \
		return err ? (errno = err, -1) : 0;                                                   \
	}
#define IO_QUEUED_OPS(run) .op = run##_one, .loop = run##_loop, .timed = run##_timed

/* The `reads`, `writes`, pacing and sync fields every I/O probe's record has. */
struct json;
void io_emit_books(struct json *j, uint64_t reads, uint64_t writes, const struct io_pace *pace,
		   const struct io_sync *sync);

#endif
