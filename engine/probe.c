/* The probe registry and the helpers probes share. */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/random.h>
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

/* The ledger: what this engine makes that outlives it, one line per object
 * written before the object exists, in $OSLENS_RUNTIME/engine.PID.START (the
 * runtime entry of the oslens that started it), so that an oslens finding
 * this engine dead removes what it left even after a SIGKILL of the whole
 * group. No ledger without $OSLENS_RUNTIME. */
static int ledger_fd = -2;

unsigned long long probe_self_start(void)
{
	char buf[1024];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

static int ledger(void)
{
	if (ledger_fd == -2) {
		const char *dir = getenv("OSLENS_RUNTIME");
		char path[4096];
		ledger_fd = -1;
		if (dir && *dir) {
			snprintf(path, sizeof path, "%s/engine.%d.%llu", dir, (int)getpid(), probe_self_start());
			ledger_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		}
	}
	return ledger_fd;
}

int probe_own(const char *fmt, ...)
{
	if (ledger() < 0)
		return -1;
	char line[4200];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof line)
		return -1;
	return write(ledger_fd, line, (size_t)n) == n ? 0 : -1; /* one write: a line is whole or absent */
}

/* With a ledger, a set gets a random key written there first, so that one
 * made in the instant before a SIGKILL is still found (by its key in
 * /proc/sysvipc/sem); a key another set holds is withdrawn. */
static int sem_get(int nsems)
{
	if (ledger() < 0)
		return semget(IPC_PRIVATE, nsems, IPC_CREAT | 0600);
	for (int tries = 0; tries < 64; tries++) {
		key_t key = IPC_PRIVATE;
		while (key == IPC_PRIVATE)
			if (getrandom(&key, sizeof key, 0) != sizeof key)
				return -1;
		key &= 0x7fffffff;
		if (key == IPC_PRIVATE || probe_own("sem_key %d\n", (int)key) != 0)
			continue;
		int id = semget(key, nsems, IPC_CREAT | IPC_EXCL | 0600);
		int e = errno;
		probe_own(id >= 0 ? "sem %d %d\n" : "sem_key_unused %d\n", (int)key, id);
		if (id >= 0 || e != EEXIST) {
			errno = e;
			return id;
		}
	}
	errno = EEXIST;
	return -1;
}

int probe_sem_create(struct probe_env *env, int nsems)
{
	if (env->nsems == env->sem_cap) {
		int cap = env->sem_cap ? 2 * env->sem_cap : 16;
		int *ids = realloc(env->sem_ids, (size_t)cap * sizeof *ids);
		if (!ids)
			return -1;
		env->sem_ids = ids;
		env->sem_cap = cap;
	}
	int id = sem_get(nsems);
	if (id >= 0)
		env->sem_ids[env->nsems++] = id;
	return id;
}

void probe_partner_watch(struct worker *w, pid_t pid)
{
	for (int i = 0; w->partners && i < PROBE_PARTNERS_MAX; i++)
		if (__atomic_load_n(&w->partners[i], __ATOMIC_RELAXED) == 0) {
			__atomic_store_n(&w->partners[i], pid, __ATOMIC_RELEASE);
			return;
		}
	/* more than PROBE_PARTNERS_MAX: unwatched, as before there was a watch */
}

void probe_partner_let_go(struct worker *w, pid_t pid)
{
	for (int i = 0; w->partners && i < PROBE_PARTNERS_MAX; i++)
		if (__atomic_load_n(&w->partners[i], __ATOMIC_RELAXED) == pid)
			__atomic_store_n(&w->partners[i], 0, __ATOMIC_RELEASE);
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
