/* T threads mapping and unmapping in one address space for S seconds:
 * every mmap and munmap takes the process's mmap_lock for writing. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double seconds;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *worker(void *arg)
{
	(void)arg;
	double end = now() + seconds;
	while (now() < end) {
		char *p = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		p[0] = 1;
		munmap(p, 1 << 16);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int t = argc > 1 ? atoi(argv[1]) : 8;
	seconds = argc > 2 ? atof(argv[2]) : 0.5;
	pthread_t th[256];
	if (t > 256)
		t = 256;
	for (int i = 0; i < t; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < t; i++)
		pthread_join(th[i], NULL);
	return 0;
}
