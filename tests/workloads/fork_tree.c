/* K children, each making M getppid calls: only a profile that follows
 * the process tree sees K*M of them. */
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 10;
	long m = argc > 2 ? atol(argv[2]) : 10000;
	for (int c = 0; c < k; c++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			for (long i = 0; i < m; i++)
				syscall(SYS_getppid);
			_exit(0);
		}
	}
	int status, failed = 0;
	while (wait(&status) > 0)
		failed |= !WIFEXITED(status) || WEXITSTATUS(status);
	return failed;
}
