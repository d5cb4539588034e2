/* Command-line helpers shared by every command (see args.h). */
#include "args.h"
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void die_usage(const char *fmt, ...)
{
	va_list ap;

	fputs("oslens-engine: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(EXIT_USAGE);
}

long parse_long(const char *opt, const char *s, long min, long max)
{
	char *end;

	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		die_usage("%s: '%s' is not a whole number from %ld to %ld", opt, s, min, max);
	return v;
}

double parse_seconds(const char *opt, const char *s, int allow_zero)
{
	char *end;

	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0 || (!allow_zero && v == 0) || v > ARGS_MAX_SECONDS)
		die_usage("%s: '%s' is not a %s number of seconds up to %g", opt, s,
			  allow_zero ? "non-negative" : "positive", ARGS_MAX_SECONDS);
	return v;
}

struct arg_limit {
	const char *command, *option, *unit;
	double min, max;
};

/* min is the smallest value accepted; a positive duration has min 0 and
 * excludes it (the parsers say so in their message); --sample-period also
 * takes 0, no sample (to measure what they cost). */
static const struct arg_limit limits[] = {
	/* a command's together: one object each */
	{"run", "--duration", "s", 0, ARGS_MAX_SECONDS},
	{"run", "--warmup", "s", 0, ARGS_MAX_SECONDS},
	{"run", "--interval", "s", 0, ARGS_MAX_SECONDS},
	{"run", "--time-limit", "s", 0, ARGS_MAX_SECONDS},
	{"run", "--ops", "count", 1, (double)RUN_MAX_OPS},
	{"run", "--reps", "count", 1, RUN_MAX_REPS},
	{"run", "--workers", "count", 1, RUN_MAX_WORKERS},
	{"run", "samples", "count", 1, RUN_MAX_SAMPLES},
	{"run", "--sample-period", "ns", RUN_MIN_SAMPLE_PERIOD_NS, RUN_MAX_SAMPLE_PERIOD_NS},
	{"app", "--workers", "count", 1, APP_MAX_WORKERS},
	{"profile", "--duration", "s", 0, ARGS_MAX_SECONDS},
	{"profile", "--time-limit", "s", 0, ARGS_MAX_SECONDS},
};

void args_emit_limits(void)
{
	struct json *j = json_record("limits");
	const char *open = NULL;

	for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
		const struct arg_limit *l = &limits[i];
		if (!open || strcmp(open, l->command)) {
			if (open)
				json_end(j);
			json_obj(j, l->command);
			open = l->command;
		}
		json_obj(j, l->option);
		json_num(j, "min", l->min);
		json_num(j, "max", l->max);
		json_str(j, "unit", l->unit);
		json_end(j);
	}
	if (open)
		json_end(j);
	json_emit(j);
}
