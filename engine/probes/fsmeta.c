/* File metadata without data transfer (LEBench, the OS/hardware co-design
 * study's per-syscall table): descriptor flags, inode attributes by
 * descriptor and by path, directory listing. Every worker has descriptors of
 * its own; stat and getdents64 share one file or directory between workers. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../probe.h"

/* glibc (2.33+) implements fstat() and stat() with newfstatat; on x86-64 the
 * calls the probes are named after are made directly. */
#ifdef __x86_64__
#define FSTAT_CALL "fstat"
#define STAT_CALL "stat"
#define do_fstat(fd, st) syscall(SYS_fstat, fd, st)
#define do_stat(path, st) syscall(SYS_stat, path, st)
#else
#define FSTAT_CALL "newfstatat"
#define STAT_CALL "newfstatat"
#define do_fstat(fd, st) fstat(fd, st)
#define do_stat(path, st) stat(path, st)
#endif

static void fd_teardown(struct worker *w)
{
	close((int)(intptr_t)w->data);
}

static int fcntl_setup(struct worker *w)
{
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	w->data = (void *)(intptr_t)fd;
	return fd < 0 ? -1 : 0;
}

static inline int fcntl_op(struct worker *w)
{
	return fcntl((int)(intptr_t)w->data, F_GETFL) < 0 ? -1 : 0;
}
PROBE_LOOP(fcntl_op)

OSLENS_PROBE(fcntl) = {
	.name = "fcntl",
	.summary = "fcntl(F_GETFL) on a private descriptor: descriptor lookup and nothing else",
	.subsystem = "vfs/fdtable",
	.syscalls = "fcntl",
	.variants = {{"default", "each worker queries its own descriptor"}},
	.setup = fcntl_setup,
	.teardown = fd_teardown,
	PROBE_OPS(fcntl_op),
};

static int file_global_setup(struct probe_env *env)
{
	char *path = malloc(PATH_MAX);
	if (!path)
		return -1;
	env->data = path;
	return probe_make_file(env, "fsmeta", 4096, path, PATH_MAX);
}

static void file_global_teardown(struct probe_env *env)
{
	free(env->data);
}

static int fstat_setup(struct worker *w)
{
	int fd = open((const char *)w->env->data, O_RDONLY | O_CLOEXEC);
	w->data = (void *)(intptr_t)fd;
	return fd < 0 ? -1 : 0;
}

static inline int fstat_op(struct worker *w)
{
	struct stat st;
	return (int)do_fstat((int)(intptr_t)w->data, &st);
}
PROBE_LOOP(fstat_op)

OSLENS_PROBE(fstat) = {
	.name = "fstat",
	.summary = "fstat() of a regular file through a private descriptor",
	.subsystem = "vfs/stat",
	.syscalls = FSTAT_CALL,
	.variants = {{"default", "each worker has its own descriptor of one shared file"}},
	.global_setup = file_global_setup,
	.global_teardown = file_global_teardown,
	.setup = fstat_setup,
	.teardown = fd_teardown,
	PROBE_OPS(fstat_op),
};

static inline int stat_op(struct worker *w)
{
	struct stat st;
	return (int)do_stat((const char *)w->env->data, &st);
}
PROBE_LOOP(stat_op)

OSLENS_PROBE(stat) = {
	.name = "stat",
	.summary = "stat() of a regular file by its full path: path walk plus inode attributes",
	.subsystem = "vfs/namei",
	.syscalls = STAT_CALL,
	.variants = {{"default", "every worker stats the same file"}},
	.global_setup = file_global_setup,
	.global_teardown = file_global_teardown,
	PROBE_OPS(stat_op),
};

struct dir_worker {
	int fd;
	size_t len;    /* buffer size: room for the whole directory */
	ssize_t bytes; /* what one getdents64 of the whole directory returns */
	char buf[];
};

static int dir_global_setup(struct probe_env *env)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/dir", env->tmpdir);
	if (mkdir(path, 0700) != 0 && errno != EEXIST) /* reps share tmpdir */
		return -1;
	for (long i = 0; i < probe_opt(env, "entries"); i++) {
		char name[32];
		snprintf(name, sizeof name, "dir/%ld", i);
		if (probe_make_file(env, name, 0, path, sizeof path) != 0)
			return -1;
	}
	return 0;
}

static int dir_setup(struct worker *w)
{
	/* Names of at most 7 characters: 32-byte records, 64 is ample. */
	size_t len = 64 * ((size_t)probe_opt(w->env, "entries") + 2);
	struct dir_worker *d = malloc(sizeof *d + len);
	if (!d)
		return -1;
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/dir", w->env->tmpdir);
	d->len = len;
	d->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->fd < 0) {
		free(d);
		return -1;
	}
	/* One call must return the whole directory, the next one nothing. */
	ssize_t rest = 0;
	if ((d->bytes = getdents64(d->fd, d->buf, len)) <= 0 || (rest = getdents64(d->fd, d->buf, len)) != 0) {
		int e = d->bytes < 0 || rest < 0 ? errno : EOVERFLOW;
		close(d->fd);
		free(d);
		errno = e;
		return -1;
	}
	w->data = d;
	return 0;
}

static void dir_teardown(struct worker *w)
{
	struct dir_worker *d = w->data;
	close(d->fd);
	free(d);
}

static inline int getdents_op(struct worker *w)
{
	struct dir_worker *d = w->data;
	if (lseek(d->fd, 0, SEEK_SET) != 0)
		return -1;
	ssize_t n = getdents64(d->fd, d->buf, d->len);
	if (n == d->bytes)
		return 0;
	if (n >= 0)
		errno = EIO;
	return -1;
}
PROBE_LOOP(getdents_op)

OSLENS_PROBE(getdents64) = {
	.name = "getdents64",
	.summary = "rewind a directory with lseek() and read all its entries with one getdents64()",
	.subsystem = "vfs/readdir",
	.syscalls = "lseek,getdents64",
	.variants = {{"default", "each worker reads the same directory through its own descriptor"}},
	.opts = {{"entries", 64, 1, 1 << 18, "files in the directory (plus . and ..)"}},
	.global_setup = dir_global_setup,
	.setup = dir_setup,
	.teardown = dir_teardown,
	PROBE_OPS(getdents_op),
};
