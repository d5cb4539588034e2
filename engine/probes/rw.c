/* LEBench read/write: 1 byte or 4 KiB through a pipe or a cached file, each
 * private to the worker. prep keeps every operation on the non-blocking path
 * (the pipe never empty for read nor full for write, the file offset inside
 * the file) and does the refill, drain or lseek outside the timed window.
 * In thread mode the shared descriptor table makes read and write of a file
 * take a file reference and its (uncontended) f_pos_lock; processes skip both. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../probe.h"

#define CHUNK 65536 /* a default pipe's capacity: refill or drain it in one call */

struct rw {
	char *buf;
	int fd, peer;	     /* the descriptor the op uses; the pipe's other end or -1 */
	size_t size, step;   /* bytes per op; what one op adds to level (mod 2^64) */
	size_t level, bound; /* bytes in the pipe or file offset; capacity or file size */
};

static int rw_is_pipe(const struct probe_env *env)
{
	return !strncmp(env->probe->variants[env->variant].name, "pipe", 4);
}

static int rw_make_files(struct probe_env *env, size_t bytes)
{
	if (rw_is_pipe(env))
		return 0;
	return probe_make_files(env, env->probe->name, env->nworkers, bytes);
}

static int rw_global_setup(struct probe_env *env)
{
	return rw_make_files(env, (size_t)probe_opt(env, "file_kb") << 10);
}

static int pread_global_setup(struct probe_env *env)
{
	return rw_make_files(env, 4096);
}

static void rw_teardown(struct worker *w)
{
	struct rw *r = w->data;
	if (r->fd >= 0)
		close(r->fd);
	if (r->peer >= 0)
		close(r->peer);
	free(r->buf);
	free(r);
}

static int rw_setup(struct worker *w, int writing)
{
	const struct probe_env *env = w->env;
	struct rw *r = calloc(1, sizeof *r);
	if (!r)
		return -1;
	w->data = r;
	r->fd = r->peer = -1;
	r->size = r->step = strstr(env->probe->variants[env->variant].name, "4k") ? 4096 : 1;
	int e = posix_memalign((void **)&r->buf, 4096, CHUNK);
	if (e) {
		r->buf = NULL;
		errno = e;
		goto fail;
	}
	memset(r->buf, 1, CHUNK); /* fault the buffer in now, not in the first ops */
	if (rw_is_pipe(env)) {
		/* Non-blocking only so that a miscount fails with EAGAIN instead of
		 * hanging the run: prep never lets an op find the pipe empty or full. */
		int p[2];
		if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
			goto fail;
		r->fd = writing ? p[1] : p[0];
		r->peer = writing ? p[0] : p[1];
		int cap = fcntl(p[0], F_GETPIPE_SZ);
		if (cap < 0)
			goto fail;
		r->bound = (size_t)cap;
		if (!writing)
			r->step = -r->size;
	} else {
		char path[PATH_MAX];
		probe_file_path(env, env->probe->name, w->index, path, sizeof path);
		if ((r->fd = open(path, (writing ? O_WRONLY : O_RDONLY) | O_CLOEXEC)) < 0)
			goto fail;
		r->bound = probe_opt(env, "file_kb") ? (size_t)probe_opt(env, "file_kb") << 10 : 4096;
	}
	return 0;
fail:
	e = errno;
	rw_teardown(w);
	errno = e;
	return -1;
}

static int read_setup(struct worker *w)
{
	return rw_setup(w, 0);
}
static int write_setup(struct worker *w)
{
	return rw_setup(w, 1);
}

static int rw_rewind(struct rw *r)
{
	if (r->level + r->size <= r->bound)
		return 0;
	if (lseek(r->fd, 0, SEEK_SET) != 0)
		return -1;
	r->level = 0;
	return 0;
}

static int short_io(ssize_t n, int err)
{
	if (n >= 0)
		errno = err;
	return -1;
}

static int read_prep(struct worker *w)
{
	struct rw *r = w->data;
	if (r->peer < 0)
		return rw_rewind(r);
	if (r->level >= r->size)
		return 0;
	ssize_t n = write(r->peer, r->buf, CHUNK);
	if (n < (ssize_t)r->size)
		return short_io(n, EAGAIN);
	r->level += (size_t)n;
	return 0;
}

static int write_prep(struct worker *w)
{
	struct rw *r = w->data;
	if (r->peer < 0)
		return rw_rewind(r);
	while (r->level + r->size > r->bound) {
		ssize_t n = read(r->peer, r->buf, CHUNK);
		if (n <= 0 || (size_t)n > r->level)
			return short_io(n, EIO);
		r->level -= (size_t)n;
	}
	return 0;
}

static inline int read_op(struct worker *w)
{
	struct rw *r = w->data;
	ssize_t n = read(r->fd, r->buf, r->size);
	if (__builtin_expect(n != (ssize_t)r->size, 0))
		return short_io(n, ENODATA);
	r->level += r->step;
	return 0;
}
PROBE_LOOP_PREP(read_op, read_prep)

static inline int write_op(struct worker *w)
{
	struct rw *r = w->data;
	ssize_t n = write(r->fd, r->buf, r->size);
	if (__builtin_expect(n != (ssize_t)r->size, 0))
		return short_io(n, ENOSPC);
	r->level += r->step;
	return 0;
}
PROBE_LOOP_PREP(write_op, write_prep)

static inline int pread_op(struct worker *w)
{
	struct rw *r = w->data;
	ssize_t n = pread(r->fd, r->buf, r->size, 0);
	return __builtin_expect(n != (ssize_t)r->size, 0) ? short_io(n, ENODATA) : 0;
}
PROBE_LOOP(pread_op)

#define RW_VARIANTS(verb, prep)                                                           \
	.variants = {{"pipe-1", verb " 1 byte, on a pipe (" prep ")"},                    \
		     {"pipe-4k", verb " 4 KiB, on a pipe (" prep ")"},                    \
		     {"file-1", verb " 1 byte at the file offset (lseek to 0 in prep)"},  \
		     {"file-4k", verb " 4 KiB at the file offset (lseek to 0 in prep)"}}, \
	.opts = {{"file_kb", 1024, 4, 1L << 22, "file variants: file size; the offset wraps to 0 here"}}

OSLENS_PROBE(read) = {
	.name = "read",
	.summary = "read() of 1 byte or 4 KiB from a pipe or a cached file private to the worker (LEBench)",
	.subsystem = "vfs/rw",
	.syscalls = "read",
	RW_VARIANTS("read", "refilled in prep, never empty"),
	.global_setup = rw_global_setup,
	.setup = read_setup,
	.teardown = rw_teardown,
	PROBE_OPS(read_op),
};

OSLENS_PROBE(write) = {
	.name = "write",
	.summary = "write() of 1 byte or 4 KiB into a pipe or a cached file private to the worker (LEBench)",
	.subsystem = "vfs/rw",
	.syscalls = "write",
	RW_VARIANTS("write", "drained in prep, never full"),
	.global_setup = rw_global_setup,
	.setup = write_setup,
	.teardown = rw_teardown,
	PROBE_OPS(write_op),
};

OSLENS_PROBE(pread) = {
	.name = "pread",
	.summary = "pread() at offset 0 of a cached 4 KiB file private to the worker",
	.subsystem = "vfs/rw",
	.syscalls = "pread64",
	.variants = {{"1", "1 byte"}, {"4k", "4 KiB, the whole file"}},
	.global_setup = pread_global_setup,
	.setup = read_setup,
	.teardown = rw_teardown,
	PROBE_OPS(pread_op),
};
