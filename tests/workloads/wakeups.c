/* Pairs of threads passing a token through pipes: every pass wakes the other
 * thread, on whichever CPU it sleeps, taking that CPU's run queue lock. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static long rounds;

static void *player(void *arg)
{
	int *fds = arg; /* read end, write end */
	char c = 0;
	for (long i = 0; i < rounds; i++) {
		if (read(fds[0], &c, 1) != 1 || write(fds[1], &c, 1) != 1)
			break;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int pairs = argc > 1 ? atoi(argv[1]) : 4;
	rounds = argc > 2 ? atol(argv[2]) : 20000;
	pthread_t *t = calloc(2 * pairs, sizeof *t);
	int(*fds)[4] = calloc(2 * pairs, sizeof *fds);
	for (int p = 0; p < pairs; p++) {
		int a[2], b[2];
		if (pipe(a) || pipe(b))
			return 1;
		int *x = fds[2 * p], *y = fds[2 * p + 1];
		x[0] = a[0];
		x[1] = b[1];
		y[0] = b[0];
		y[1] = a[1];
		pthread_create(&t[2 * p], NULL, player, x);
		pthread_create(&t[2 * p + 1], NULL, player, y);
		char c = 0;
		if (write(a[1], &c, 1) != 1)
			return 1;
	}
	for (int i = 0; i < 2 * pairs; i++)
		pthread_join(t[i], NULL);
	return 0;
}
