/* The reference the engine's getppid probe is compared with: the same call in
 * a bare loop, pinned to one CPU, timed with CLOCK_MONOTONIC around the loop. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 5000000;
	int cpu = argc > 2 ? atoi(argv[2]) : 0;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0) {
		perror("sched_setaffinity");
		return 1;
	}
	for (long i = 0; i < n / 10; i++) /* warm-up */
		getppid();
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		getppid();
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	printf("%.3f\n", ns / (double)n);
	return 0;
}
