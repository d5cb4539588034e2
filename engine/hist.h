/* A log-linear latency histogram (HDR-style): values below 256 exactly, then
 * 128 sub-buckets per power of two, so a bucket is at most 1/128 (0.78 %) of
 * its lower bound wide over the whole 64-bit range. Fixed memory, no
 * allocation and no system call when recording. Values are clock units
 * (TSC ticks or ns); the record says how many ns a unit is. */
#ifndef OSLENS_HIST_H
#define OSLENS_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 7
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS ((64 - HIST_SUB_BITS + 1) * HIST_SUB)

struct hist {
	uint64_t count, sum, min, max;
	uint64_t bucket[HIST_BUCKETS];
};

static inline unsigned hist_index(uint64_t v)
{
	if (v < HIST_SUB)
		return (unsigned)v;
	unsigned shift = 63u - (unsigned)__builtin_clzll(v) - HIST_SUB_BITS;
	return (shift + 1) * HIST_SUB + (unsigned)((v >> shift) - HIST_SUB);
}

static inline void hist_record(struct hist *h, uint64_t v)
{
	h->count++;
	h->sum += v;
	if (v < h->min)
		h->min = v;
	if (v > h->max)
		h->max = v;
	h->bucket[hist_index(v)]++;
}

/* Allocates a histogram with every page already touched, so that recording
 * never takes a page fault inside a timed operation. */
struct hist *hist_new(void);
void hist_reset(struct hist *h);
struct json;
/* Adds the histogram as sparse [[index, count], ...] plus its summary. */
void hist_emit(struct json *j, const char *key, const struct hist *h, double unit_ns);

#endif
