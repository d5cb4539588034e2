/* PHOENIX pca: the covariance matrix of the rows of a matrix of small
 * integers — first every row's sum (the workers share the rows, then meet
 * at a barrier), then the covariance of every pair of rows, the pairs dealt
 * out row by row in turn so that the triangle's long and short rows spread
 * evenly. Computation over data that outgrows the caches as rows grow.
 *
 * Covariances are kept exact, as n²·cov = n·Σxy − Σx·Σy in integers; the
 * checksum adds a hash of each with its place, in any order: the same for
 * any number of workers. */
#include <stdint.h>
#include <stdlib.h>

#include "app.h"

#define COLUMNS 1024

struct pca {
	uint8_t *m;   /* rows × COLUMNS */
	int64_t *sum; /* per row, shared: each worker fills its rows' */
};

static int pca_setup(struct app_run *r)
{
	size_t rows = (size_t)r->size;
	struct pca *p = calloc(1, sizeof *p);
	if (!p || !(p->m = malloc(rows * COLUMNS)))
		return app_run_fail(r, "out of memory for a %zu × %d matrix", rows, COLUMNS);
	p->sum = app_shared_alloc(r, rows * sizeof *p->sum);
	if (!p->sum)
		return app_run_fail(r, "out of shared memory for %zu row sums", rows);
	for (size_t i = 0; i < rows * COLUMNS; i++)
		p->m[i] = (uint8_t)app_mix64(0x706361ull + i);
	r->data = p;
	return 0;
}

static int pca_work(struct app_worker *w, struct app_buf *out)
{
	const struct app_run *r = w->run;
	const struct pca *p = r->data;
	const long rows = r->size;
	long begin, end;
	app_share(rows, r->nworkers, w->index, &begin, &end);
	for (long i = begin; i < end; i++) {
		int64_t s = 0;
		for (int k = 0; k < COLUMNS; k++)
			s += p->m[i * COLUMNS + k];
		p->sum[i] = s;
	}
	app_barrier(w); /* every row's sum is known from here */
	uint64_t h = 0;
	for (long i = w->index; i < rows; i += r->nworkers) {
		const uint8_t *x = p->m + i * COLUMNS;
		for (long j = i; j < rows; j++) {
			const uint8_t *y = p->m + j * COLUMNS;
			int64_t xy = 0;
			for (int k = 0; k < COLUMNS; k++)
				xy += (int64_t)x[k] * y[k];
			int64_t cov = COLUMNS * xy - p->sum[i] * p->sum[j]; /* n² × their covariance */
			h += app_mix64((uint64_t)(i * rows + j) ^ ((uint64_t)cov << 20));
		}
	}
	return app_buf_put(out, &h, sizeof h) == 0 ? 0 : app_fail(w, "out of memory");
}

static int pca_merge(struct app_run *r, const struct app_buf *parts, uint64_t *checksum)
{
	uint64_t h = 0;
	for (int i = 0; i < r->nworkers; i++) {
		if (parts[i].len != sizeof h)
			return app_run_fail(r, "worker %d returned %zu bytes, not its sum", i, parts[i].len);
		h += *(const uint64_t *)parts[i].data;
	}
	*checksum = h;
	return 0;
}

OSLENS_APP(pca) = {
	.name = "pca",
	.summary = "PHOENIX pca: row sums, a barrier, then the covariance of every pair of rows of a rows × 1024 "
		   "byte matrix; computation",
	.kind = APP_COMPUTE,
	.size_unit = "rows",
	.default_size = 512,
	.min_size = 1,
	.max_size = 65536,
	.setup = pca_setup,
	.work = pca_work,
	.merge = pca_merge,
};
