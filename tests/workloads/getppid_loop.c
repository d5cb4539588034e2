/* Exactly N getppid system calls (through syscall(2), which no libc caches). */
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	for (long i = 0; i < n; i++)
		syscall(SYS_getppid);
	return 0;
}
