/*
 * The auth error table (auth/error.c) against etcd 3.4's own source, as
 * Debian's golang-etcd-server-dev installs it: every code's text must be
 * one of rpctypes' statuses with the same gRPC code, and every error of
 * etcd's auth package that its v3 API maps to a status (toGRPCErrorMap)
 * must have a code. Skips (77) without that source.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/error.h"

#define ETCD_SRC "/usr/share/gocode/src/go.etcd.io/etcd"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	static char buf[1 << 18];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *s = malloc(n + 1);
	if (!s)
		abort();
	memcpy(s, buf, n + 1);
	return s;
}

/* grpc-go's codes, by name. */
static int grpc_code_of(const char *name, size_t len)
{
	static const char *const names[] = { "OK", "Canceled", "Unknown", "InvalidArgument",
		"DeadlineExceeded", "NotFound", "AlreadyExists", "PermissionDenied",
		"ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
		"Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated" };
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strlen(names[i]) == len && !memcmp(names[i], name, len))
			return i;
	return -1;
}

/* The gRPC code of the status in error.go whose text is text (quoted), or
 * -1 when no status has it. */
static int status_code(const char *errors_go, const char *text)
{
	char quoted[256];
	snprintf(quoted, sizeof(quoted), "\"%s\")", text);
	const char *at = strstr(errors_go, quoted);
	if (!at)
		return -1;
	const char *line = at;
	while (line > errors_go && line[-1] != '\n')
		line--;
	const char *codes = strstr(line, "codes.");
	if (!codes || codes > at)
		return -1;
	codes += 6;
	size_t len = strcspn(codes, ",");
	return grpc_code_of(codes, len);
}

int main(void)
{
	char *errors_go = slurp(ETCD_SRC "/etcdserver/api/v3rpc/rpctypes/error.go");
	char *util_go = slurp(ETCD_SRC "/etcdserver/api/v3rpc/util.go");
	int bad = 0, n = 0;

	if (!errors_go || !util_go) {
		printf("SKIP: etcd 3.4's source is not at %s (golang-etcd-server-dev)\n", ETCD_SRC);
		return 77;
	}
	for (int err = -5300; err < -5100; err++) {
		if (!auth_is_error(err))
			continue;
		n++;
		int want = status_code(errors_go, auth_strerror(err));
		if (want < 0 || want != auth_grpc_code(err)) {
			fprintf(stderr, "code %d \"%s\" gRPC %d: etcd has gRPC %d\n", err,
				auth_strerror(err), auth_grpc_code(err), want);
			bad++;
		}
	}
	/* every auth.Err* mapped to an rpctypes.ErrGRPC* has a code of that text */
	for (const char *p = util_go; (p = strstr(p, "\tauth.Err")) != NULL; p++) {
		const char *g = strstr(p, "rpctypes.ErrGRPC"), *eol = strchr(p, '\n');
		if (!g || (eol && g > eol))
			continue;
		char name[64], decl[80];
		size_t len = strcspn(g + 9, ",\n");
		snprintf(name, sizeof(name), "%.*s", (int)len, g + 9);
		snprintf(decl, sizeof(decl), "%s ", name);
		const char *d = strstr(errors_go, decl), *q = d ? strchr(d, '"') : NULL;
		if (!q) {
			fprintf(stderr, "%s: no declaration in error.go\n", name);
			bad++;
			continue;
		}
		size_t tlen = strcspn(q + 1, "\"");
		bool found = false;
		for (int err = -5300; err < -5100 && !found; err++)
			found = auth_is_error(err) && strlen(auth_strerror(err)) == tlen &&
				!memcmp(auth_strerror(err), q + 1, tlen);
		if (!found) {
			fprintf(stderr, "%s \"%.*s\": no auth code has it\n", name, (int)tlen, q + 1);
			bad++;
		}
	}
	free(errors_go);
	free(util_go);
	printf("%d codes checked against etcd's rpctypes\n", n);
	if (bad || n < 16)
		return 1;
	printf("ok\n");
	return 0;
}
