/* Signals (LEBench, the OS/hardware co-design study's per-syscall table):
 * changing a disposition, querying the mask, and a full delivery to self.
 * Dispositions belong to the process: in thread mode workers share them, so
 * the first worker to install a handler saves the old disposition and the
 * last to leave puts it back. Masks and the pending queue used here are per
 * thread. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../probe.h"

static __thread volatile sig_atomic_t delivered;

static void on_signal(int sig)
{
	(void)sig;
	delivered++;
}

static const struct sigaction handler = {.sa_handler = on_signal};

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static int holders[NSIG];
static struct sigaction saved[NSIG];

static int hold(int sig)
{
	int rc = 0;
	pthread_mutex_lock(&hold_lock);
	if (holders[sig] == 0)
		rc = sigaction(sig, &handler, &saved[sig]);
	if (rc == 0)
		holders[sig]++;
	pthread_mutex_unlock(&hold_lock);
	return rc;
}

static void release(int sig)
{
	pthread_mutex_lock(&hold_lock);
	if (--holders[sig] == 0)
		sigaction(sig, &saved[sig], NULL);
	pthread_mutex_unlock(&hold_lock);
}

static int sigaction_setup(struct worker *w)
{
	(void)w;
	return hold(SIGUSR2);
}

static void sigaction_teardown(struct worker *w)
{
	(void)w;
	release(SIGUSR2);
}

static inline int sigaction_op(struct worker *w)
{
	(void)w;
	return sigaction(SIGUSR2, &handler, NULL);
}
PROBE_LOOP(sigaction_op)

OSLENS_PROBE(rt_sigaction) = {
	.name = "rt_sigaction",
	.summary = "sigaction(): install the handler SIGUSR2 already has (sighand lock, no delivery)",
	.subsystem = "signal",
	.syscalls = "rt_sigaction",
	.variants = {{"default", "every worker re-installs the same handler; process-wide in thread mode"}},
	.setup = sigaction_setup,
	.teardown = sigaction_teardown,
	PROBE_OPS(sigaction_op),
};

static inline int sigprocmask_op(struct worker *w)
{
	(void)w;
	static const sigset_t none;
	sigset_t old;
	return pthread_sigmask(SIG_BLOCK, &none, &old) ? -1 : 0;
}
PROBE_LOOP(sigprocmask_op)

OSLENS_PROBE(rt_sigprocmask) = {
	.name = "rt_sigprocmask",
	.summary = "sigprocmask(SIG_BLOCK) of an empty set: reads the thread's mask, changes nothing",
	.subsystem = "signal",
	.syscalls = "rt_sigprocmask",
	.variants = {{"default", "one query per operation"}},
	PROBE_OPS(sigprocmask_op),
};

struct kill_worker {
	pid_t pid, tid;
};

static int kill_setup(struct worker *w)
{
	struct kill_worker *k = malloc(sizeof *k);
	if (!k)
		return -1;
	k->pid = getpid();
	k->tid = gettid();
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	int rc = pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	if (rc || hold(SIGUSR1) != 0) {
		errno = rc ? rc : errno;
		free(k);
		return -1;
	}
	w->data = k;
	return 0;
}

static void kill_teardown(struct worker *w)
{
	release(SIGUSR1);
	free(w->data);
}

/* The signal is delivered on the way out of tgkill, so by its return the
 * handler has run and rt_sigreturn has come back. */
static inline int kill_op(struct worker *w)
{
	const struct kill_worker *k = w->data;
	sig_atomic_t before = delivered;
	if (syscall(SYS_tgkill, k->pid, k->tid, SIGUSR1) != 0)
		return -1;
	if (delivered != before + 1) {
		errno = ENOMSG; /* no handler ran */
		return -1;
	}
	return 0;
}
PROBE_LOOP(kill_op)

OSLENS_PROBE(signal) = {
	.name = "signal",
	.summary = "send SIGUSR1 to the calling thread with tgkill(), run a handler, return (rt_sigreturn)",
	.subsystem = "signal",
	.syscalls = "tgkill,rt_sigreturn",
	.variants = {{"default", "each worker signals itself; the handler is process-wide"}},
	.setup = kill_setup,
	.teardown = kill_teardown,
	PROBE_OPS(kill_op),
};
