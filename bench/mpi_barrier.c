/* The reference for `cluster bsp`'s collective, two ways.
 *
 * Back to back (COMPUTE_US 0): MPI_Barrier (or a one-double MPI_Allreduce)
 * in a tight loop, as osu_barrier / osu_allreduce time it — the mean time
 * per call over N calls after a warm-up, from rank 0.
 *
 * After work (COMPUTE_US > 0): what the harness measures, with nothing else
 * — each step spins COMPUTE_US on the clock, then enters the collective;
 * the figure is the wait of the rank that entered last (its time in the
 * collective is the collective's own cost, nobody being late), median over
 * the steps. Ranks must share CLOCK_MONOTONIC: one host.
 *
 * Each rank runs on one CPU, the one the harness's rank of that number
 * takes (the first of its equal slice of the CPUs the ranks share): left
 * to migrate, a rank of this loop could leave a busy CPU the harness's
 * rank has to stay on, and the two would not measure the same thing.
 *
 * Usage: mpirun -n R mpi_barrier N [barrier|allreduce] [COMPUTE_US] */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void collective(int allreduce)
{
	double one = 1, sum;
	if (allreduce)
		MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	else
		MPI_Barrier(MPI_COMM_WORLD);
}

static int by_value(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	long n = argc > 1 ? atol(argv[1]) : 10000;
	int allreduce = argc > 2 && !strcmp(argv[2], "allreduce");
	long compute_us = argc > 3 ? atol(argv[3]) : 0;
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof set, &set) == 0) {
		int cpus[CPU_SETSIZE], ncpus = 0;
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &set))
				cpus[ncpus++] = c;
		CPU_ZERO(&set);
		CPU_SET(cpus[(long)rank * ncpus / size], &set);
		sched_setaffinity(0, sizeof set, &set);
	}
	for (long i = 0; i < n / 10; i++) /* warm-up */
		collective(allreduce);
	MPI_Barrier(MPI_COMM_WORLD);
	if (!compute_us) {
		double t = MPI_Wtime();
		for (long k = 0; k < n; k++)
			collective(allreduce);
		t = MPI_Wtime() - t;
		if (rank == 0)
			printf("%.1f\n", t / (double)n * 1e9);
		MPI_Finalize();
		return 0;
	}
	uint64_t *enter = calloc((size_t)n, sizeof *enter), *wait = calloc((size_t)n, sizeof *wait);
	for (long k = 0; k < n; k++) {
		uint64_t until = now_ns() + (uint64_t)compute_us * 1000;
		while (now_ns() < until)
			;
		enter[k] = now_ns();
		collective(allreduce);
		wait[k] = now_ns() - enter[k];
	}
	uint64_t *all_enter = rank == 0 ? calloc((size_t)(n * size), sizeof *all_enter) : NULL;
	uint64_t *all_wait = rank == 0 ? calloc((size_t)(n * size), sizeof *all_wait) : NULL;
	MPI_Gather(enter, (int)n, MPI_UINT64_T, all_enter, (int)n, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	MPI_Gather(wait, (int)n, MPI_UINT64_T, all_wait, (int)n, MPI_UINT64_T, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		uint64_t *last = calloc((size_t)n, sizeof *last);
		for (long k = 0; k < n; k++) {
			int r_last = 0;
			for (int r = 1; r < size; r++)
				if (all_enter[r * n + k] > all_enter[r_last * n + k])
					r_last = r;
			last[k] = all_wait[r_last * n + k];
		}
		qsort(last, (size_t)n, sizeof *last, by_value);
		printf("%llu\n", (unsigned long long)last[n / 2]);
	}
	MPI_Finalize();
	return 0;
}
