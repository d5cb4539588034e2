/* open() and close() by path: path walk, dentry and inode reference counts.
 * The shared variant has every worker open one file, so they contend on the
 * same dentry's lockref; the private one gives each worker its own file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../probe.h"

static int open_global_setup(struct probe_env *env)
{
	int files = probe_variant_is(env, "shared") ? 1 : env->nworkers;
	char(*paths)[PATH_MAX] = malloc(sizeof *paths * files);
	if (!paths)
		return -1;
	env->data = paths;
	for (int i = 0; i < files; i++) {
		char name[32];
		snprintf(name, sizeof name, "open.%d", i);
		if (probe_make_file(env, name, 4096, paths[i], PATH_MAX) != 0)
			return -1;
	}
	return 0;
}

static void open_global_teardown(struct probe_env *env)
{
	free(env->data);
}

static int open_setup(struct worker *w)
{
	char(*paths)[PATH_MAX] = w->env->data;
	w->data = paths[probe_variant_is(w->env, "shared") ? 0 : w->index];
	return 0;
}

static inline int open_op(struct worker *w)
{
	int fd = open((const char *)w->data, O_RDONLY);
	if (fd < 0)
		return -1;
	return close(fd);
}
PROBE_LOOP(open_op)

OSLENS_PROBE(open) = {
	.name = "open",
	.summary = "open() and close() of a file by path",
	.subsystem = "vfs/namei",
	.syscalls = "openat,close",
	.variants = {{"private", "each worker opens its own file"}, {"shared", "every worker opens the same file"}},
	.global_setup = open_global_setup,
	.global_teardown = open_global_teardown,
	.setup = open_setup,
	PROBE_OPS(open_op),
};
