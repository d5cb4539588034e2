/* The master watches the partner processes of two-task probes (sem's and
 * pingpong's other end, forked by a worker): a worker blocked in a semop or
 * a FUTEX_WAIT on a partner that died would wait for ever and never see
 * the stop flag. The workers name their partners in their slots
 * (probe_partner_watch); here each is followed by a pidfd, all polled in
 * one system call per check, so nothing is added to a worker's loop. */
#include "partners.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "textfile.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

struct partner_watch {
	int n; /* nworkers * PROBE_PARTNERS_MAX */
	pid_t *pid;
	int *fd; /* -1: none (not watched, or no pidfd: /proc is read) */
	struct pollfd *poll;
};

struct partner_watch *partners_new(int nworkers)
{
	struct partner_watch *pw = calloc(1, sizeof *pw);
	if (!pw)
		return NULL;
	pw->n = nworkers * PROBE_PARTNERS_MAX;
	pw->pid = calloc(pw->n, sizeof *pw->pid);
	pw->fd = malloc(pw->n * sizeof *pw->fd);
	pw->poll = calloc(pw->n, sizeof *pw->poll);
	if (!pw->pid || !pw->fd || !pw->poll) {
		partners_free(pw);
		return NULL;
	}
	for (int i = 0; i < pw->n; i++)
		pw->fd[i] = -1;
	return pw;
}

void partners_reset(struct partner_watch *pw)
{
	for (int i = 0; pw && i < pw->n; i++) {
		if (pw->fd[i] >= 0)
			close(pw->fd[i]);
		pw->fd[i] = -1;
		pw->pid[i] = 0;
	}
}

void partners_free(struct partner_watch *pw)
{
	if (!pw)
		return;
	if (pw->fd)
		partners_reset(pw);
	free(pw->pid);
	free(pw->fd);
	free(pw->poll);
	free(pw);
}

static volatile int *slot_entry(struct shm *shm, int i)
{
	return &shm->slot[i / PROBE_PARTNERS_MAX].c.partners[i % PROBE_PARTNERS_MAX];
}

/* The partner's /proc/PID/stat, from after its name: NULL if it is gone. */
static char *stat_after_name(pid_t pid, char **text)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	*text = read_text_file(path, 0);
	return *text ? strrchr(*text, ')') : NULL;
}

/* Where there is no pidfd (before Linux 5.3): a zombie, or no process. */
static int ended_by_proc(pid_t pid)
{
	char *text, *st = stat_after_name(pid, &text);
	int ended = !st || st[1] == '\0' || st[2] == 'Z' || st[2] == 'X';
	free(text);
	return ended;
}

/* How it ended, from the zombie's exit_code (field 52 of its stat). */
static void describe_end(pid_t pid, char *buf, size_t len)
{
	char *text, *p = stat_after_name(pid, &text);
	for (int field = 2; p && field < 52; field++)
		p = strchr(p + 1, ' ');
	int status;
	if (!p || sscanf(p + 1, "%d", &status) != 1)
		snprintf(buf, len, "ended");
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	free(text);
}

/* Entry i's partner ended while its worker still named it (a partner the
 * worker lets go is no longer named before it is told to end). */
static const char *ended(struct partner_watch *pw, struct shm *shm, int i, int *worker)
{
	static char why[200];
	if (__atomic_load_n(slot_entry(shm, i), __ATOMIC_ACQUIRE) != pw->pid[i])
		return NULL;
	/* a worker that died first took its partner with it (PDEATHSIG): the
	 * worker's death is the news, and the master's wait reports it */
	siginfo_t si;
	memset(&si, 0, sizeof si);
	pid_t wpid = shm->slot[i / PROBE_PARTNERS_MAX].c.pid;
	if (wpid > 0 && waitid(P_PID, (id_t)wpid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == wpid)
		return NULL;
	char how[96];
	describe_end(pw->pid[i], how, sizeof how);
	snprintf(why, sizeof why, "its partner process (pid %d) %s", (int)pw->pid[i], how);
	*worker = i / PROBE_PARTNERS_MAX;
	/* the worker waits on it for ever: it cannot stop politely */
	if (wpid > 0)
		kill(wpid, SIGKILL);
	return why;
}

const char *partners_check(struct partner_watch *pw, struct shm *shm, int *worker)
{
	const char *why;
	int npoll = 0;
	for (int i = 0; i < pw->n; i++) {
		pid_t pid = __atomic_load_n(slot_entry(shm, i), __ATOMIC_ACQUIRE);
		if (pid != pw->pid[i]) { /* newly named, or let go */
			if (pw->fd[i] >= 0)
				close(pw->fd[i]);
			pw->pid[i] = pid;
			pw->fd[i] = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
		}
		if (pid <= 0)
			continue;
		if (pw->fd[i] >= 0)
			pw->poll[npoll++] = (struct pollfd){.fd = pw->fd[i], .events = POLLIN};
		else if (ended_by_proc(pid) && (why = ended(pw, shm, i, worker)))
			return why;
	}
	if (!npoll || poll(pw->poll, npoll, 0) <= 0)
		return NULL;
	for (int k = 0; k < npoll; k++)
		for (int i = 0; pw->poll[k].revents && i < pw->n; i++)
			if (pw->fd[i] == pw->poll[k].fd && (why = ended(pw, shm, i, worker)))
				return why;
	return NULL;
}
