/* Synchronous block I/O on `run --target`: one pread or pwrite of `bs`
 * bytes at a random block-aligned offset per operation, with O_DIRECT (the
 * block layer and the device, no page cache), or pread through the page
 * cache (the VFS path alone: the span is read once before the run, so
 * every operation is a cache hit). Each worker opens the target itself, as
 * fio's jobs do. The helpers of io.h live here too. */
#include "io.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

void io_offsets_init(struct io_offsets *o, int index, uint64_t target_bytes, uint64_t bs)
{
	o->state = 0x9E3779B97F4A7C15ull * (uint64_t)(index + 1) | 1;
	o->bs = bs;
	o->blocks = target_bytes / bs;
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
	long bs = probe_opt(env, "bs");
	struct stat st;
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
	int writing;
	size_t bs;
	void *buf;
	struct io_offsets off;
};

static int io_check_target(const struct probe_env *env, char *why, size_t len)
{
	return io_check(env, probe_variant_is(env, "pwrite"), !probe_variant_is(env, "cached"), why, len);
}

static void io_teardown(struct worker *w)
{
	struct io *io = w->data;
	if (!io)
		return;
	if (io->fd >= 0)
		close(io->fd);
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
	io->writing = probe_variant_is(env, "pwrite");
	io->fd = io_open(env, io->writing, !probe_variant_is(env, "cached"));
	unsigned logical;
	int64_t bytes = io->fd < 0 ? -1 : io_target_size(io->fd, &logical);
	if (bytes < 0 || !(io->buf = io_buffer(io->bs, w->index)))
		goto fail;
	io_offsets_init(&io->off, w->index, io_span(env, (uint64_t)bytes), io->bs);
	if (probe_variant_is(env, "cached")) {
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

/* The variants share one op: the branch on the direction predicts
 * perfectly, and pread/pwrite's cost is microseconds. */
static inline int io_op(struct worker *w)
{
	struct io *io = w->data;
	off_t at = io_next_offset(&io->off);
	return io_done(io->writing ? pwrite(io->fd, io->buf, io->bs, at) : pread(io->fd, io->buf, io->bs, at), io->bs);
}
PROBE_LOOP(io_op)

OSLENS_PROBE(io) = {
	.name = "io",
	.summary = "pread/pwrite of bs bytes at random aligned offsets of --target, direct or from the page cache",
	.subsystem = "block",
	.syscalls = "pread64",
	.variants = {{"pread", "pread() with O_DIRECT: the block layer and the device"},
		     {"pwrite", "pwrite() with O_DIRECT", "pwrite64"},
		     {"cached", "pread() through the page cache, every block read once before: the VFS path"}},
	IO_OPTS,
	.needs_target = 1,
	.check_target = io_check_target,
	.setup = io_setup,
	.teardown = io_teardown,
	PROBE_OPS(io_op),
};
