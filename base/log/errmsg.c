/* The one error slot (see errmsg.h). */
#include "base/log/errmsg.h"

#include <stdio.h>
#include <string.h>

struct errmsg_slot {
	int code;                /* the code text was recorded with; 0: none */
	char text[ERRMSG_MAX];
};

static _Thread_local struct errmsg_slot errmsg_slot;

int errmsg_vset(int rc, const char *fmt, va_list ap)
{
	char text[ERRMSG_MAX];

	/* Formatted aside first: an argument may be the slot's own text
	 * (errmsg_set(rc, "...: %s", errmsg_get(rc)) adds context). */
	vsnprintf(text, sizeof(text), fmt, ap);
	memcpy(errmsg_slot.text, text, sizeof(text));
	errmsg_slot.code = rc;
	return rc;
}

int errmsg_set(int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	errmsg_vset(rc, fmt, ap);
	va_end(ap);
	return rc;
}

const char *errmsg_get(int rc)
{
	if (rc != 0 && errmsg_slot.code == rc)
		return errmsg_slot.text;
	return strerror(rc < 0 ? -rc : rc);
}
