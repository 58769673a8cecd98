/*
 * proto/registry.c: name lookups over the generated descriptor tables.
 */
#include "proto/registry.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "proto/tables.h"

/*
 * proto_<kind>_count, _at and _find for one descriptor kind. Messages,
 * enums and services are distinct C types of the same shape (each has a
 * full name), and the tables follow one naming scheme (tables.h), so one
 * definition serves all three.
 */
#define PROTO_LOOKUPS(kind, type)                                              \
	size_t proto_##kind##_count(void)                                      \
	{                                                                      \
		return proto_tables_##kind##_count;                            \
	}                                                                      \
                                                                               \
	const type *proto_##kind##_at(size_t i)                                \
	{                                                                      \
		return i < proto_tables_##kind##_count ? proto_tables_##kind##s[i] \
						       : NULL;                 \
	}                                                                      \
                                                                               \
	const type *proto_##kind##_find(const char *full_name)                 \
	{                                                                      \
		for (size_t i = 0; i < proto_tables_##kind##_count; i++)       \
			if (strcmp(proto_tables_##kind##s[i]->name, full_name) == 0) \
				return proto_tables_##kind##s[i];              \
		return NULL;                                                   \
	}

PROTO_LOOKUPS(message, ProtobufCMessageDescriptor)
PROTO_LOOKUPS(enum, ProtobufCEnumDescriptor)
PROTO_LOOKUPS(service, ProtobufCServiceDescriptor)

/* True if the NUL-terminated name equals the len bytes at s (which may
 * hold anything, NULs included). */
static bool name_equals(const char *name, const char *s, size_t len)
{
	return strlen(name) == len && memcmp(name, s, len) == 0;
}

int proto_method_find(const char *path, size_t len,
                      const ProtobufCServiceDescriptor **service,
                      const ProtobufCMethodDescriptor **method)
{
	const char *slash;
	size_t svc_len, meth_len;

	/* "/" service "/" method, both parts non-empty, nothing else. */
	if (path == NULL || len < 4 || path[0] != '/')
		return -EINVAL;
	slash = memchr(path + 1, '/', len - 1);
	if (slash == NULL)
		return -EINVAL;
	svc_len = (size_t)(slash - (path + 1));
	meth_len = len - svc_len - 2;
	if (svc_len == 0 || meth_len == 0 || memchr(slash + 1, '/', meth_len) != NULL)
		return -EINVAL;

	for (size_t i = 0; i < proto_tables_service_count; i++) {
		const ProtobufCServiceDescriptor *s = proto_tables_services[i];

		if (!name_equals(s->name, path + 1, svc_len))
			continue;
		for (unsigned m = 0; m < s->n_methods; m++) {
			if (!name_equals(s->methods[m].name, slash + 1, meth_len))
				continue;
			if (service != NULL)
				*service = s;
			if (method != NULL)
				*method = &s->methods[m];
			return 0;
		}
		return -ENOENT;
	}
	return -ENOENT;
}
