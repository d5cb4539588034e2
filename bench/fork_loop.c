/* The reference for the fork probes: OSMark's forkbench as a plain program —
 * fork(), the child _exit()s, the parent waits — pinned to one CPU, timed
 * with CLOCK_MONOTONIC around the loop. bench/fork.py builds it the way the
 * engine is built (dynamic and static) and prints its address space, the
 * figure fork's cost grows with. Usage: fork_loop N CPU */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void image(int *maps, int *anon_kb)
{
	char buf[4096];
	ssize_t got;
	*maps = 0;
	*anon_kb = -1;
	int fd = open("/proc/self/maps", O_RDONLY);
	while (fd >= 0 && (got = read(fd, buf, sizeof buf)) > 0)
		for (ssize_t i = 0; i < got; i++)
			*maps += buf[i] == '\n';
	close(fd);
	fd = open("/proc/self/smaps_rollup", O_RDONLY);
	got = fd >= 0 ? read(fd, buf, sizeof buf - 1) : 0;
	close(fd);
	buf[got > 0 ? got : 0] = 0;
	const char *at = strstr(buf, "\nAnonymous:");
	if (at)
		*anon_kb = atoi(at + strlen("\nAnonymous:"));
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 2000;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(argc > 2 ? atoi(argv[2]) : 0, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0) {
		perror("sched_setaffinity");
		return 1;
	}
	int maps, anon_kb;
	image(&maps, &anon_kb);
	for (long i = 0; i < n / 10; i++) { /* warm-up */
		pid_t p = fork();
		if (p == 0)
			_exit(0);
		waitpid(p, NULL, 0);
	}
	double a = now_ns();
	for (long i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0)
			_exit(0);
		if (p < 0 || waitpid(p, NULL, 0) < 0) {
			perror("fork");
			return 1;
		}
	}
	printf("%.1f %d %d\n", (now_ns() - a) / (double)n, maps, anon_kb);
	return 0;
}
