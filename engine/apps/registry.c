/* The apps registered with OSLENS_APP(): the linker gathers them in one
 * section, so this is the only place that walks it. */
#include "app.h"

#include <string.h>

extern const struct app *const __start_oslens_apps[];
extern const struct app *const __stop_oslens_apps[];

const struct app *app_find(const char *name)
{
	for (const struct app *const *a = __start_oslens_apps; a < __stop_oslens_apps; a++)
		if (!strcmp((*a)->name, name))
			return *a;
	return NULL;
}

void app_foreach(void (*fn)(const struct app *a))
{
	for (const struct app *const *a = __start_oslens_apps; a < __stop_oslens_apps; a++)
		fn(*a);
}
