/* PHOENIX kmeans: cluster points in 3-D around K centres, a fixed number of
 * iterations. Each iteration every worker assigns its slice of the points to
 * the nearest centre and sums them per cluster; after a barrier every worker
 * adds up all the partial sums (the same numbers in the same order, so all
 * agree) and moves the centres. Pure computation: no system call between
 * barriers, so its time should be user time and scale with the workers.
 *
 * Integer coordinates and sums make the result exact, hence the same for
 * any number of workers (floating-point sums would depend on the split). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"

#define CLUSTERS 16
#define ITERATIONS 40
#define COORD_BITS 14 /* a squared distance in 3-D then fits an int32 */

struct partial {
	int64_t sum[CLUSTERS][3];
	int64_t count[CLUSTERS];
} __attribute__((aligned(64)));

struct kmeans {
	int32_t (*point)[3];
	/* [iteration parity][worker]: a worker overwrites its parity-p slot two
	 * iterations after writing it, and everyone read it before the barrier
	 * in between, so one barrier per iteration is enough. */
	struct partial *part;
};

struct centres {
	int32_t c[3][CLUSTERS]; /* by coordinate, so the distance loop vectorises */
	int64_t count[CLUSTERS];
};

static int kmeans_setup(struct app_run *r)
{
	struct kmeans *k = calloc(1, sizeof *k);
	if (!k || !(k->point = malloc(r->size * sizeof *k->point)))
		return app_run_fail(r, "out of memory for %ld points", r->size);
	k->part = app_shared_alloc(r, 2 * r->nworkers * sizeof *k->part);
	if (!k->part)
		return app_run_fail(r, "out of shared memory for %d workers", r->nworkers);
	/* Points scattered around CLUSTERS hidden centres, so the clustering has
	 * something to find. */
	const int32_t max = (1 << COORD_BITS) - 1;
	for (long i = 0; i < r->size; i++) {
		uint64_t x = app_mix64(0x6b6d65616e73ull + i);
		uint64_t centre = app_mix64(0x63656e747265ull + x % CLUSTERS);
		for (int d = 0; d < 3; d++) {
			int32_t c = 2048 + (centre >> (16 * d)) % (max - 4096);
			int32_t noise = (int32_t)((x >> (8 + 16 * d)) & 4095) - 2048;
			int32_t v = c + noise;
			k->point[i][d] = v < 0 ? 0 : v > max ? max : v;
		}
	}
	r->data = k;
	return 0;
}

static inline int nearest(const struct centres *c, const int32_t p[3])
{
	int32_t dist[CLUSTERS];
	for (int k = 0; k < CLUSTERS; k++) {
		int32_t dx = p[0] - c->c[0][k], dy = p[1] - c->c[1][k], dz = p[2] - c->c[2][k];
		dist[k] = dx * dx + dy * dy + dz * dz;
	}
	int best = 0;
	for (int k = 1; k < CLUSTERS; k++)
		if (dist[k] < dist[best])
			best = k;
	return best;
}

static int kmeans_work(struct app_worker *w, struct app_buf *out)
{
	const struct app_run *r = w->run;
	const struct kmeans *k = r->data;
	const int n = r->nworkers;
	long begin, end;
	app_share(r->size, n, w->index, &begin, &end);
	struct centres c = {0};
	for (int j = 0; j < CLUSTERS; j++) /* the first points start as centres */
		for (int d = 0; d < 3; d++)
			c.c[d][j] = k->point[j][d];

	for (int it = 0; it < ITERATIONS; it++) {
		struct partial *mine = &k->part[(it & 1) * n + w->index];
		memset(mine, 0, sizeof *mine);
		for (long i = begin; i < end; i++) {
			int best = nearest(&c, k->point[i]);
			mine->sum[best][0] += k->point[i][0];
			mine->sum[best][1] += k->point[i][1];
			mine->sum[best][2] += k->point[i][2];
			mine->count[best]++;
		}
		app_barrier(w);
		const struct partial *all = &k->part[(it & 1) * n];
		for (int j = 0; j < CLUSTERS; j++) {
			int64_t sum[3] = {0}, count = 0;
			for (int q = 0; q < n; q++) {
				for (int d = 0; d < 3; d++)
					sum[d] += all[q].sum[j][d];
				count += all[q].count[j];
			}
			c.count[j] = count;
			if (count) /* an empty cluster keeps its centre */
				for (int d = 0; d < 3; d++)
					c.c[d][j] = (int32_t)(sum[d] / count);
		}
	}
	return app_buf_put(out, &c, sizeof c) == 0 ? 0 : app_fail(w, "out of memory");
}

/* Every worker computed the same centres; that they agree is checked, as a
 * barrier that let one through early would make them differ. */
static int kmeans_merge(struct app_run *r, const struct app_buf *parts, uint64_t *checksum)
{
	struct centres c;
	for (int i = 0; i < r->nworkers; i++)
		if (parts[i].len != sizeof c || memcmp(parts[i].data, parts[0].data, sizeof c))
			return app_run_fail(r, "worker %d ended with other centres than worker 0", i);
	memcpy(&c, parts[0].data, sizeof c);
	uint64_t h = 0;
	int64_t total = 0;
	for (int j = 0; j < CLUSTERS; j++) {
		total += c.count[j];
		h = app_mix64(h ^ (uint64_t)c.count[j]);
		for (int d = 0; d < 3; d++)
			h = app_mix64(h ^ (uint64_t)c.c[d][j]);
	}
	if (total != r->size)
		return app_run_fail(r, "the clusters hold %lld points, not %ld", (long long)total, r->size);
	*checksum = h;
	return 0;
}

OSLENS_APP(kmeans) = {
	.name = "kmeans",
	.summary = "PHOENIX k-means: 16 clusters of 3-D points, 40 iterations; pure user-space computation",
	.kind = APP_COMPUTE,
	.size_unit = "points",
	.default_size = 1000000,
	.min_size = CLUSTERS,
	.max_size = 1L << 27,
	.setup = kmeans_setup,
	.work = kmeans_work,
	.merge = kmeans_merge,
};
