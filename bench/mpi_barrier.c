/* The reference for `cluster bsp`'s collective: MPI_Barrier (or a one-double
 * MPI_Allreduce) in a tight loop, as osu_barrier / osu_allreduce time it —
 * the mean time per call over N calls after a warm-up, from rank 0.
 * Usage: mpirun -n R mpi_barrier N [allreduce] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	long n = argc > 1 ? atol(argv[1]) : 10000;
	int allreduce = argc > 2 && !strcmp(argv[2], "allreduce"), rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	double one = 1, sum;
	for (long i = 0; i < n + n / 10; i++) {
		if (i == n / 10) {
			MPI_Barrier(MPI_COMM_WORLD);
			double t = MPI_Wtime();
			for (long k = 0; k < n; k++) {
				if (allreduce)
					MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
				else
					MPI_Barrier(MPI_COMM_WORLD);
			}
			t = MPI_Wtime() - t;
			if (rank == 0)
				printf("%.1f\n", t / (double)n * 1e9);
			break;
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	MPI_Finalize();
	return 0;
}
