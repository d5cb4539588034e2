/* PHOENIX matrix_multiply: C = A × B for square matrices of small
 * integers, the rows of C divided among the workers. B is held transposed,
 * so that each product is two streams through memory; the matrices fit in
 * the caches only while small. Pure computation: user time that should
 * scale with the workers until they share the memory bandwidth.
 *
 * The checksum is the sum of a hash of every cell with its place, added in
 * any order: the same for any number of workers. */
#include <stdint.h>
#include <stdlib.h>

#include "app.h"

struct matmul {
	int32_t *a;  /* n × n, by rows */
	int32_t *bt; /* B transposed: row j of bt is column j of B */
};

static int matmul_setup(struct app_run *r)
{
	size_t n = (size_t)r->size;
	struct matmul *m = calloc(1, sizeof *m);
	if (!m || !(m->a = malloc(n * n * sizeof *m->a)) || !(m->bt = malloc(n * n * sizeof *m->bt)))
		return app_run_fail(r, "out of memory for two %zu × %zu matrices", n, n);
	for (size_t i = 0; i < n * n; i++) {
		m->a[i] = (int32_t)(app_mix64(0x6d61746d756c61ull + i) & 15);
		m->bt[i] = (int32_t)(app_mix64(0x6d61746d756c62ull + i) & 15);
	}
	r->data = m;
	return 0;
}

static int matmul_work(struct app_worker *w, struct app_buf *out)
{
	const struct app_run *r = w->run;
	const struct matmul *m = r->data;
	const long n = r->size;
	long begin, end;
	app_share(n, r->nworkers, w->index, &begin, &end);
	uint64_t sum = 0;
	for (long i = begin; i < end; i++) {
		const int32_t *row = m->a + i * n;
		for (long j = 0; j < n; j++) {
			const int32_t *col = m->bt + j * n;
			int64_t c = 0;
			for (long k = 0; k < n; k++)
				c += (int64_t)row[k] * col[k];
			sum += app_mix64((uint64_t)(i * n + j) ^ ((uint64_t)c << 32));
		}
	}
	return app_buf_put(out, &sum, sizeof sum) == 0 ? 0 : app_fail(w, "out of memory");
}

static int matmul_merge(struct app_run *r, const struct app_buf *parts, uint64_t *checksum)
{
	uint64_t sum = 0;
	for (int i = 0; i < r->nworkers; i++) {
		if (parts[i].len != sizeof sum)
			return app_run_fail(r, "worker %d returned %zu bytes, not its sum", i, parts[i].len);
		sum += *(const uint64_t *)parts[i].data;
	}
	*checksum = sum;
	return 0;
}

OSLENS_APP(matmul) = {
	.name = "matmul",
	.summary = "PHOENIX matrix_multiply: C = A × B of n × n integer matrices, rows of C divided; pure computation",
	.kind = APP_COMPUTE,
	.size_unit = "rows and columns",
	.default_size = 600,
	.min_size = 1,
	.max_size = 16384,
	.setup = matmul_setup,
	.work = matmul_work,
	.merge = matmul_merge,
};
