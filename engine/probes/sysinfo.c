/* Cheap queries of process and system state (LEBench, the OS/hardware
 * co-design study's per-syscall table): each is little more than the entry
 * and exit of the kernel plus one copy to user memory. */
#include <errno.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "../probe.h"

static int clock_global_setup(struct probe_env *env)
{
	env->data = (void *)(long)probe_variant_is(env, "syscall");
	return 0;
}

static inline int clock_op(struct worker *w)
{
	struct timespec ts;
	if (w->env->data)
		return (int)syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return clock_gettime(CLOCK_MONOTONIC, &ts);
}
PROBE_LOOP(clock_op)

/* One syscalls field per probe: it names the call the syscall variant
 * issues; the vdso variant issues none (unless the clocksource has no vDSO
 * mode, when libc falls back to the same system call). */
OSLENS_PROBE(clock_gettime) = {
	.name = "clock_gettime",
	.summary = "clock_gettime(CLOCK_MONOTONIC): through the vDSO (no system call) or as a real system call",
	.subsystem = "time",
	.syscalls = "clock_gettime",
	.variants = {{"vdso", "libc's clock_gettime through the vDSO: issues no system call", ""},
		     {"syscall", "syscall(SYS_clock_gettime): enters the kernel"}},
	.global_setup = clock_global_setup,
	PROBE_OPS(clock_op),
};

static inline int uname_op(struct worker *w)
{
	(void)w;
	struct utsname u;
	return uname(&u);
}
PROBE_LOOP(uname_op)

OSLENS_PROBE(uname) = {
	.name = "uname",
	.summary = "uname(): copy the UTS namespace's system names to user memory",
	.subsystem = "kernel/uts",
	.syscalls = "uname",
	.variants = {{"default", "one call per operation"}},
	PROBE_OPS(uname_op),
};

/* glibc's getrlimit() issues prlimit64; the call itself is made directly
 * where the architecture still has it, so the probe measures what it names. */
#ifdef SYS_getrlimit
#define RLIMIT_CALL "getrlimit"
#define get_nofile(rl) syscall(SYS_getrlimit, RLIMIT_NOFILE, rl)
#else
#define RLIMIT_CALL "prlimit64"
#define get_nofile(rl) syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, rl)
#endif

static inline int getrlimit_op(struct worker *w)
{
	(void)w;
	struct rlimit rl;
	return (int)get_nofile(&rl);
}
PROBE_LOOP(getrlimit_op)

OSLENS_PROBE(getrlimit) = {
	.name = "getrlimit",
	.summary = "getrlimit(RLIMIT_NOFILE) as a direct system call (glibc's wrapper would issue prlimit64)",
	.subsystem = "kernel/sys",
	.syscalls = RLIMIT_CALL,
	.variants = {{"default", "one call per operation"}},
	PROBE_OPS(getrlimit_op),
};

static inline int sched_yield_op(struct worker *w)
{
	(void)w;
	return sched_yield();
}
PROBE_LOOP(sched_yield_op)

OSLENS_PROBE(sched_yield) = {
	.name = "sched_yield",
	.summary = "sched_yield() alone on its CPU: nothing to yield to, it returns at once (scheduler entry cost)",
	.subsystem = "sched",
	.syscalls = "sched_yield",
	.variants = {{"default", "one call per operation, no other runnable task on the CPU"}},
	PROBE_OPS(sched_yield_op),
};

/* getpid(): the null system call of the co-design study's table (glibc no
 * longer caches it; the call is issued directly all the same). */
static inline int getpid_op(struct worker *w)
{
	(void)w;
	return syscall(SYS_getpid) > 0 ? 0 : -1;
}
PROBE_LOOP(getpid_op)

OSLENS_PROBE(getpid) = {
	.name = "getpid",
	.summary = "getpid() as a direct system call: the kernel's entry and exit and one field read",
	.subsystem = "syscall",
	.syscalls = "getpid",
	.variants = {{"default", "one call per operation"}},
	PROBE_OPS(getpid_op),
};

#ifdef SYS_time
static int time_global_setup(struct probe_env *env)
{
	env->data = (void *)(long)probe_variant_is(env, "syscall");
	return 0;
}

/* time(): x86-64 keeps it as a system call beside the vDSO's copy. */
static inline int time_op(struct worker *w)
{
	time_t t;
	if (w->env->data)
		return syscall(SYS_time, &t) < 0 ? -1 : 0;
	return time(&t) == (time_t)-1 ? -1 : 0;
}
PROBE_LOOP(time_op)

OSLENS_PROBE(time) = {
	.name = "time",
	.summary = "time(): through the vDSO (no system call) or as a real system call",
	.subsystem = "time",
	.syscalls = "time",
	.variants = {{"vdso", "libc's time() through the vDSO: issues no system call", ""},
		     {"syscall", "syscall(SYS_time): enters the kernel"}},
	.global_setup = time_global_setup,
	PROBE_OPS(time_op),
};
#endif
