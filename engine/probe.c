/* The probe registry and the helpers probes share. */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <unistd.h>

extern const struct probe *const __start_oslens_probes[];
extern const struct probe *const __stop_oslens_probes[];

const struct probe *probe_find(const char *name)
{
	for (const struct probe *const *p = __start_oslens_probes; p < __stop_oslens_probes; p++)
		if (!strcmp((*p)->name, name))
			return *p;
	return NULL;
}

void probe_foreach(void (*fn)(const struct probe *p, void *arg), void *arg)
{
	for (const struct probe *const *p = __start_oslens_probes; p < __stop_oslens_probes; p++)
		fn(*p, arg);
}

long probe_opt(const struct probe_env *env, const char *name)
{
	for (int i = 0; i < PROBE_MAX_OPTS && env->probe->opts[i].name; i++)
		if (!strcmp(env->probe->opts[i].name, name))
			return env->opt[i];
	return 0;
}

int probe_variant_is(const struct probe_env *env, const char *name)
{
	return !strcmp(env->probe->variants[env->variant].name, name);
}

int probe_sem_create(struct probe_env *env, int nsems)
{
	if (env->nsems >= PROBE_MAX_SEMS) {
		errno = ENOSPC;
		return -1;
	}
	int id = semget(IPC_PRIVATE, nsems, IPC_CREAT | 0600);
	if (id >= 0)
		env->sem_ids[env->nsems++] = id;
	return id;
}

int probe_make_file(const struct probe_env *env, const char *name, size_t bytes, char *path, size_t len)
{
	snprintf(path, len, "%s/%s", env->tmpdir, name);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	static const char block[65536] = {1};
	size_t done = 0;
	while (done < bytes) {
		size_t n = bytes - done < sizeof block ? bytes - done : sizeof block;
		ssize_t w = write(fd, block, n);
		if (w < 0) {
			int e = errno;
			close(fd);
			errno = e;
			return -1;
		}
		done += (size_t)w;
	}
	return close(fd);
}

void probe_file_path(const struct probe_env *env, const char *prefix, int i, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s.%d", env->tmpdir, prefix, i);
}

int probe_make_files(const struct probe_env *env, const char *prefix, int count, size_t bytes)
{
	for (int i = 0; i < count; i++) {
		char name[64], path[4096];
		snprintf(name, sizeof name, "%s.%d", prefix, i);
		if (probe_make_file(env, name, bytes, path, sizeof path) != 0)
			return -1;
	}
	return 0;
}
