/*
 * jwttool: auth/jwt.c from the command line, for tests/integration/
 * jwt_interop.sh to hold cetcd's tokens against other implementations.
 *
 *   jwttool sign METHOD PRIV_PEM_FILE USER REVISION EXP
 *       prints the token cetcd signs (HS methods: the file's bytes are
 *       the secret)
 *   jwttool verify METHOD KEY_FILE TOKEN NOW
 *       KEY_FILE is a public key (or, for HS methods, the secret); prints
 *       "USER REVISION EXP" and exits 0, or prints the error and exits 1
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/alloc.h"
#include "auth/jwt.h"
#include "base/log/errmsg.h"

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = malloc(1 << 20);

	if (!f || !buf) {
		fprintf(stderr, "jwttool: cannot read %s\n", path);
		exit(2);
	}
	*len = fread(buf, 1, 1 << 20, f);
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	struct auth_jwt_key *k = NULL;
	size_t len;
	int m, rc;

	if (argc != 7 && argc != 6) {
		fprintf(stderr, "usage: jwttool sign METHOD PRIV USER REVISION EXP\n"
				"       jwttool verify METHOD PUB TOKEN NOW\n");
		return 2;
	}
	m = auth_jwt_method_parse(argv[2], strlen(argv[2]));
	if (m < 0) {
		fprintf(stderr, "jwttool: unknown method %s\n", argv[2]);
		return 2;
	}
	char *pem = read_file(argv[3], &len);
	bool sign = strcmp(argv[1], "sign") == 0 && argc == 7;
	bool hs = m >= AUTH_JWT_HS256;
	rc = auth_jwt_key_new((enum auth_jwt_method)m, sign || hs ? NULL : pem, len,
			      sign || hs ? pem : NULL, len, &k);
	if (rc) {
		fprintf(stderr, "jwttool: %s\n", errmsg_get(rc));
		return 2;
	}
	if (sign) {
		char *tok;
		rc = auth_jwt_sign(k, argv[4], strlen(argv[4]), strtoull(argv[5], NULL, 10),
				   strtoll(argv[6], NULL, 10), &tok, &len);
		if (rc) {
			fprintf(stderr, "jwttool: %s\n", errmsg_get(rc));
			return 1;
		}
		printf("%s\n", tok);
		auth_free(tok);
	} else {
		struct auth_jwt_claims c;
		rc = auth_jwt_verify(k, argv[4], strlen(argv[4]), strtoll(argv[5], NULL, 10), &c);
		if (rc) {
			printf("error: %s\n", errmsg_get(rc));
			return 1;
		}
		printf("%s %llu %lld\n", c.username, (unsigned long long)c.revision, (long long)c.exp);
		auth_jwt_claims_free(&c);
	}
	auth_jwt_key_free(k);
	free(pem);
	return 0;
}
