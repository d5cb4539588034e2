#include "mem.h"

#include <stdlib.h>
#include <unistd.h>

void *calloc_touched(size_t n, size_t size)
{
	char *p = calloc(n, size);
	if (!p)
		return NULL;
	size_t bytes = n * size, page = (size_t)sysconf(_SC_PAGESIZE);
	/* volatile: a store the compiler may not drop for writing a zero calloc already promised */
	for (size_t off = 0; off < bytes; off += page)
		((volatile char *)p)[off] = 0;
	if (bytes)
		((volatile char *)p)[bytes - 1] = 0;
	return p;
}
