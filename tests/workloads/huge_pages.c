/* Touches N transparent huge pages once each (madvise(MADV_HUGEPAGE) on a
 * 2 MiB-aligned range): where THP is on, N faults that each zero 2 MiB. */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGE (2UL << 20)

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 16;
	char *p = mmap(NULL, (n + 1) * HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	char *aligned = (char *)(((uintptr_t)p + HUGE - 1) & ~(HUGE - 1));
	if (madvise(aligned, n * HUGE, MADV_HUGEPAGE) != 0)
		return 1;
	for (long i = 0; i < n; i++)
		aligned[i * HUGE] = 1;
	return 0;
}
