/* Synchronous block I/O on `run --target` (fio's psync): one pread or
 * pwrite of `bs` bytes per operation at a block-aligned offset, random or
 * in order, reading `reads` percent of the time, either
 *
 *   direct: O_DIRECT, the block layer and the device, no page cache;
 *   cached: through the page cache. Reads are the VFS path alone (the span
 *           is read once before the run, so every one is a cache hit);
 *           writes dirty the cache and the kernel's writeback takes them
 *           to the device, in the window or after it (each worker syncs
 *           what it wrote at its end, outside the window, so that the
 *           next point starts clean, as fio's end_fsync).
 *
 * `fsync` N: every N writes, an fsync (or fdatasync: `datasync`), io.h's
 * io_sync, before the next I/O and outside its timing, counted in the
 * worker's `io` record. `rate`: the token bucket of io.h, waited on
 * outside the timing too. Each worker opens the target itself, as fio's
 * jobs do. The helpers of io.h live here. */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../json.h"

void io_offsets_init(struct io_offsets *o, const struct probe_env *env, int index, uint64_t target_bytes, uint64_t bs)
{
	memset(o, 0, sizeof *o);
	o->state = 0x9E3779B97F4A7C15ull * (uint64_t)(index + 1) | 1;
	o->mix_state = 0xD1B54A32D192ED03ull * (uint64_t)(index + 1) | 1;
	o->bs = bs;
	o->blocks = target_bytes / bs;
	o->reads = (unsigned)probe_opt(env, "reads");
	o->seq = (int)probe_opt(env, "seq");
	/* sequential: slices of equal size, one per worker; more workers than
	 * blocks share them (io_check refuses a span of less than a block) */
	uint64_t n = (uint64_t)(env->nworkers > 0 ? env->nworkers : 1);
	o->slice = o->blocks >= n ? o->blocks / n : 1;
	o->first = o->blocks >= n ? (uint64_t)index * o->slice : (uint64_t)index % o->blocks;
}

void io_sync_init(struct io_sync *s, const struct probe_env *env)
{
	memset(s, 0, sizeof *s);
	s->every = probe_opt(env, "fsync");
	s->datasync = (int)probe_opt(env, "datasync");
}

int io_sync_run(struct io_sync *s, int fd)
{
	uint64_t t0 = io_mono_ns();
	int rc = s->datasync ? fdatasync(fd) : fsync(fd);
	s->ns += io_mono_ns() - t0;
	s->syncs++;
	s->unsynced = 0;
	return rc;
}

void io_pace_init(struct io_pace *p, long rate, unsigned depth)
{
	memset(p, 0, sizeof *p);
	if (rate <= 0)
		return;
	p->interval_ns = 1000000000ull / (uint64_t)rate;
	p->depth_ns = (depth ? depth : 1) * p->interval_ns;
	if (p->depth_ns < IO_PACE_CATCH_UP_NS)
		p->depth_ns = IO_PACE_CATCH_UP_NS / p->interval_ns * p->interval_ns;
	/* the default slack of a SCHED_OTHER thread's sleeps is 50 µs: at
	 * 20k I/Os per second each sleep would overrun two tokens */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
}

void io_pace_sleep(struct io_pace *p)
{
	struct timespec ts = {.tv_sec = (time_t)(p->next_ns / 1000000000ull),
			      .tv_nsec = (long)(p->next_ns % 1000000000ull)};
	p->sleeps++;
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

int64_t io_target_size(int fd, unsigned *logical)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -1;
	*logical = 512;
	if (S_ISREG(st.st_mode))
		return st.st_size;
	if (!S_ISBLK(st.st_mode)) {
		errno = ENOTBLK;
		return -1;
	}
	uint64_t bytes = 0;
	int lbs = 512;
	if (ioctl(fd, BLKGETSIZE64, &bytes) != 0 || ioctl(fd, BLKSSZGET, &lbs) != 0)
		return -1;
	*logical = (unsigned)lbs;
	return (int64_t)bytes;
}

uint64_t io_span(const struct probe_env *env, uint64_t target_bytes)
{
	uint64_t span = (uint64_t)probe_opt(env, "span_mb") << 20;
	return span && span < target_bytes ? span : target_bytes;
}

int io_open(const struct probe_env *env, int writing, int direct)
{
	return open(env->target, (writing ? O_RDWR : O_RDONLY) | (direct ? O_DIRECT : 0) | O_CLOEXEC);
}

int io_check(const struct probe_env *env, int writing, int direct, char *why, size_t len)
{
	long bs = probe_opt(env, "bs"), rate = probe_opt(env, "rate");
	struct stat st;
	if (rate > 0 && rate < IO_RATE_MIN) {
		/* a worker waits for its token outside the stop flag's reach */
		snprintf(why, len, "rate %ld: under %d I/Os per second per worker", rate, IO_RATE_MIN);
		return -1;
	}
	if (stat(env->target, &st) != 0) {
		snprintf(why, len, "%s", strerror(errno));
		return -1;
	}
	if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode)) {
		snprintf(why, len, "neither a block device nor a regular file");
		return -1;
	}
	int fd = io_open(env, 0, direct);
	if (fd < 0) {
		snprintf(why, len, "cannot open it%s: %s", direct ? " for direct I/O" : "", strerror(errno));
		return -1;
	}
	unsigned logical;
	int64_t bytes = io_target_size(fd, &logical);
	void *buf = bytes >= 0 ? io_buffer((size_t)bs, 0) : NULL;
	int rc = -1;
	if (bytes < 0)
		snprintf(why, len, "cannot read its size: %s", strerror(errno));
	else if ((int64_t)io_span(env, (uint64_t)bytes) < bs)
		snprintf(why, len, "%lld bytes, less than one block of %ld", (long long)io_span(env, (uint64_t)bytes),
			 bs);
	else if (direct && bs % logical)
		snprintf(why, len, "bs %ld is not a multiple of its logical block size %u", bs, logical);
	else if (!buf)
		snprintf(why, len, "no memory for a block: %s", strerror(errno));
	else if (pread(fd, buf, (size_t)bs, 0) != bs)
		snprintf(why, len, "a read of %ld bytes at offset 0 failed%s: %s", bs, direct ? " (direct I/O)" : "",
			 strerror(errno ? errno : EIO));
	else
		rc = 0;
	free(buf);
	close(fd);
	if (rc != 0 || !writing)
		return rc;
	if (access(env->target, W_OK) != 0) {
		snprintf(why, len, "not writable: %s", strerror(errno));
		return -1;
	}
	if (S_ISBLK(st.st_mode)) {
		/* O_EXCL on a block device fails with EBUSY while a filesystem,
		 * swap or a device mapper holds it: the kernel's own answer */
		fd = open(env->target, O_RDWR | O_EXCL | O_CLOEXEC);
		if (fd < 0) {
			snprintf(why, len, "cannot open it for writing%s: %s",
				 errno == EBUSY ? " (mounted, swap or held by another device)" : "", strerror(errno));
			return -1;
		}
		close(fd);
	}
	return 0;
}

void *io_buffer(size_t n, int index)
{
	void *buf;
	int e = posix_memalign(&buf, 4096, n);
	if (e) {
		errno = e;
		return NULL;
	}
	uint64_t x = 0x243F6A8885A308D3ull ^ (uint64_t)index;
	for (size_t i = 0; i + 8 <= n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy((char *)buf + i, &x, 8);
	}
	return buf;
}

struct io {
	int fd;
	int cached;
	size_t bs;
	void *buf;
	struct io_offsets off;
	struct io_pace pace;
	struct io_sync sync;
	uint64_t reads, writes; /* the books of the `io` record, warm-up included */
};

static int io_check_target(const struct probe_env *env, char *why, size_t len)
{
	return io_check(env, io_writes(env), !probe_variant_is(env, "cached"), why, len);
}

static void io_teardown(struct worker *w)
{
	struct io *io = w->data;
	if (!io)
		return;
	if (io->fd >= 0) {
		if (io->cached && io->writes)
			fsync(io->fd); /* what writeback has not taken yet, before the next point */
		close(io->fd);
	}
	free(io->buf);
	free(io);
}

static inline int io_done(ssize_t n, size_t want)
{
	if (__builtin_expect(n == (ssize_t)want, 1))
		return 0;
	if (n >= 0)
		errno = EIO; /* short: the target shrank under us */
	return -1;
}

static int io_setup(struct worker *w)
{
	const struct probe_env *env = w->env;
	struct io *io = calloc(1, sizeof *io);
	if (!io)
		return -1;
	w->data = io;
	io->bs = (size_t)probe_opt(env, "bs");
	io->cached = probe_variant_is(env, "cached");
	io_sync_init(&io->sync, env);
	io->fd = io_open(env, io_writes(env), !io->cached);
	unsigned logical;
	int64_t bytes = io->fd < 0 ? -1 : io_target_size(io->fd, &logical);
	if (bytes < 0 || !(io->buf = io_buffer(io->bs, w->index)))
		goto fail;
	io_offsets_init(&io->off, env, w->index, io_span(env, (uint64_t)bytes), io->bs);
	io_pace_init(&io->pace, probe_opt(env, "rate"), 1);
	if (io->cached && io->off.reads) {
		/* every block this worker may read into the page cache now, so
		 * that the timed reads are all hits (a cache of the size of the
		 * span is the user's to provide: --target's size) */
		for (uint64_t b = 0; b < io->off.blocks; b++)
			if (io_done(pread(io->fd, io->buf, io->bs, (off_t)(b * io->bs)), io->bs) != 0)
				goto fail;
	}
	return 0;
fail:;
	int e = errno;
	io_teardown(w);
	w->data = NULL;
	errno = e;
	return -1;
}

/* Before each I/O, outside the timed window: the sync that N writes are
 * due, and the token the rate asks for. */
static inline int io_prep(struct worker *w)
{
	struct io *io = w->data;
	if (io_sync_due(&io->sync) && io_sync_run(&io->sync, io->fd) != 0)
		return -1;
	io_pace_wait(&io->pace);
	return 0;
}

/* Every direction and engine shares one op: the branches predict
 * perfectly at a fixed direction, and pread/pwrite's cost is microseconds. */
static inline int io_op(struct worker *w)
{
	struct io *io = w->data;
	off_t at = io_next_offset(&io->off);
	if (io_next_is_read(&io->off)) {
		io->reads++;
		return io_done(pread(io->fd, io->buf, io->bs, at), io->bs);
	}
	io->writes++;
	io->sync.unsynced++;
	return io_done(pwrite(io->fd, io->buf, io->bs, at), io->bs);
}
PROBE_LOOP_PREP(io_op, io_prep)

/* Which way the I/Os went, the syncs and the pacing (warm-up included). */
static int io_emit(struct worker *w, struct json *j)
{
	const struct io *io = w->data;
	io_emit_books(j, io->reads, io->writes, &io->pace, &io->sync);
	return 0;
}

void io_emit_books(struct json *j, uint64_t reads, uint64_t writes, const struct io_pace *pace,
		   const struct io_sync *sync)
{
	json_uint(j, "reads", reads);
	json_uint(j, "writes", writes);
	json_uint(j, "pace_sleeps", pace->sleeps);
	json_uint(j, "pace_dropped", pace->dropped);
	json_uint(j, "syncs", sync->syncs);
	json_uint(j, "sync_ns", sync->ns);
}

OSLENS_PROBE(io) = {
	.name = "io",
	.summary = "pread/pwrite of bs bytes at aligned offsets of --target, random or in order, direct or cached",
	.subsystem = "block",
	.syscalls = "pread64,pwrite64",
	.variants = {{"direct", "O_DIRECT: the block layer and the device"},
		     {"cached", "through the page cache: reads all hits (every block read once before), writes "
				"taken to the device by writeback"}},
	.opts = {IO_OPTS_COMMON},
	.needs_target = 1,
	.check_target = io_check_target,
	.setup = io_setup,
	.teardown = io_teardown,
	PROBE_OPS(io_op),
	.emit = io_emit,
	.emit_type = "io",
};
