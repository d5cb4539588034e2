/* Pure user-mode work: no system call, no fault, after start-up. */
#include <stdint.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000000;
	volatile uint64_t x = 1;
	for (uint64_t i = 0; i < n; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return (int)(x & 0);
}
