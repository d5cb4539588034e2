#include "hist.h"
#include "json.h"
#include "mem.h"

#include <stdlib.h>
#include <string.h>

struct hist *hist_new(void)
{
	struct hist *h = calloc_touched(1, sizeof *h);
	if (h)
		h->min = UINT64_MAX;
	return h;
}

void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof *h);
	h->min = UINT64_MAX;
}

void hist_emit(struct json *j, const char *key, const struct hist *h, double unit_ns)
{
	json_obj(j, key);
	json_num(j, "unit_ns", unit_ns);
	json_int(j, "sub_bucket_bits", HIST_SUB_BITS);
	json_uint(j, "count", h->count);
	json_uint(j, "sum", h->sum);
	json_uint(j, "min", h->count ? h->min : 0);
	json_uint(j, "max", h->max);
	json_arr(j, "buckets");
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		if (h->bucket[i]) {
			json_arr(j, NULL);
			json_uint(j, NULL, i);
			json_uint(j, NULL, h->bucket[i]);
			json_end(j);
		}
	json_end(j);
	json_end(j);
}
