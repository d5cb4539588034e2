/* PHOENIX linear_regression: fit y = a x + b over a stream of (x, y) byte
 * pairs. Each worker sums x, y, x², y² and xy over its slice; the master
 * adds the sums. One pass over memory with almost no arithmetic: its time
 * is the memory bandwidth the workers share, the kernel entered only when
 * the input's pages were first touched (in set-up, untimed).
 *
 * Integer sums make the result exact, the same for any number of workers. */
#include <stdint.h>
#include <stdlib.h>

#include "app.h"

struct sums {
	uint64_t n, x, y, xx, yy, xy;
};

static int linreg_setup(struct app_run *r)
{
	uint8_t(*p)[2] = malloc((size_t)r->size * sizeof *p);
	if (!p)
		return app_run_fail(r, "out of memory for %ld points", r->size);
	/* y = 3x/4 + 20, with noise, clipped to a byte: something to fit */
	for (long i = 0; i < r->size; i++) {
		uint64_t h = app_mix64(0x6c696e726567ull + (uint64_t)i);
		int x = (int)(h & 255), noise = (int)((h >> 8) & 31) - 16, y = 3 * x / 4 + 20 + noise;
		p[i][0] = (uint8_t)x;
		p[i][1] = (uint8_t)(y < 0 ? 0 : y > 255 ? 255 : y);
	}
	r->data = p;
	return 0;
}

static int linreg_work(struct app_worker *w, struct app_buf *out)
{
	const struct app_run *r = w->run;
	const uint8_t(*p)[2] = r->data;
	long begin, end;
	app_share(r->size, r->nworkers, w->index, &begin, &end);
	struct sums s = {.n = (uint64_t)(end - begin)};
	for (long i = begin; i < end; i++) {
		uint64_t x = p[i][0], y = p[i][1];
		s.x += x;
		s.y += y;
		s.xx += x * x;
		s.yy += y * y;
		s.xy += x * y;
	}
	return app_buf_put(out, &s, sizeof s) == 0 ? 0 : app_fail(w, "out of memory");
}

static int linreg_merge(struct app_run *r, const struct app_buf *parts, uint64_t *checksum)
{
	struct sums all = {0};
	for (int i = 0; i < r->nworkers; i++) {
		const struct sums *s = (const struct sums *)parts[i].data;
		if (parts[i].len != sizeof *s)
			return app_run_fail(r, "worker %d returned %zu bytes, not its sums", i, parts[i].len);
		all.n += s->n;
		all.x += s->x;
		all.y += s->y;
		all.xx += s->xx;
		all.yy += s->yy;
		all.xy += s->xy;
	}
	if (all.n != (uint64_t)r->size)
		return app_run_fail(r, "summed %llu points, not %ld", (unsigned long long)all.n, r->size);
	const uint64_t v[] = {all.n, all.x, all.y, all.xx, all.yy, all.xy};
	uint64_t h = 0;
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		h = app_mix64(h ^ v[i]);
	*checksum = h;
	return 0;
}

OSLENS_APP(linreg) = {
	.name = "linreg",
	.summary = "PHOENIX linear_regression: sums over a stream of (x, y) byte pairs; bound by memory bandwidth",
	.kind = APP_MEMORY,
	.size_unit = "points",
	.default_size = 1L << 26,
	.min_size = 1,
	.max_size = 1L << 31,
	.setup = linreg_setup,
	.work = linreg_work,
	.merge = linreg_merge,
};
