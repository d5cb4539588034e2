/* Memory the engine writes while it measures. */
#ifndef OSLENS_MEM_H
#define OSLENS_MEM_H

#include <stddef.h>

/* calloc(n, size) with every page already faulted in, so that writing it
 * while measuring never takes a page fault. (memset after malloc does not
 * do this: the compiler turns the pair into calloc, whose large blocks are
 * fresh, untouched pages.) */
void *calloc_touched(size_t n, size_t size);

#endif
