/* fork() and execve() of a program that exits at once, parent waits: the
 * full cost of starting a process. The target is the statically linked
 * engine's `true` command, so no ld.so or shared library mapping is timed,
 * only the kernel's exec (binfmt load, new mm) and a minimal libc start:
 * between execve and exit_group the target issues the few calls of static
 * glibc's start-up (brk for TLS, arch_prctl, rseq, ...) and nothing else. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../probe.h"

static int exec_global_setup(struct probe_env *env)
{
	static const char suffix[] = "-static";
	char *path = malloc(PATH_MAX + sizeof suffix);
	if (!path)
		return -1;
	ssize_t n = readlink("/proc/self/exe", path, PATH_MAX - 1);
	if (n < 0) {
		free(path);
		return -1;
	}
	path[n] = 0;
	if ((size_t)n < sizeof suffix - 1 || strcmp(path + n - (sizeof suffix - 1), suffix))
		strcat(path, suffix);
	if (access(path, X_OK) != 0) {
		free(path);
		errno = ENOENT;
		return -1;
	}
	env->data = path;
	return 0;
}

static void exec_global_teardown(struct probe_env *env)
{
	free(env->data);
}

static inline int exec_op(struct worker *w)
{
	char *path = w->env->data;
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		execv(path, (char *[]){path, "true", NULL});
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		errno = ENOEXEC; /* the child could not exec, or the target failed */
		return -1;
	}
	return 0;
}
PROBE_LOOP(exec_op)

OSLENS_PROBE(fork_exec) = {
	.name = "fork-exec",
	.summary = "fork(), the child execs a static program that exits at once, parent waits",
	.subsystem = "process/exec",
	.syscalls = "clone,set_robust_list,execve,brk,brk,arch_prctl,set_tid_address,set_robust_list,"
		    "rseq,prlimit64,readlink,getrandom,brk,brk,brk,mprotect,exit_group,wait4",
	.variants = {{"default", "exec oslens-engine-static true"}},
	.processes_per_worker = 1,
	.global_setup = exec_global_setup,
	.global_teardown = exec_global_teardown,
	PROBE_OPS(exec_op),
};
