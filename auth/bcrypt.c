/* bcrypt through libxcrypt (see bcrypt.h). */
#include "auth/bcrypt.h"

#include "auth/alloc.h"

#include <crypt.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Go's bcrypt reads at most this many bytes of a password. */
#define BCRYPT_MAX_PW 72

/* bcrypt's base64 alphabet (not RFC 4648's order). */
static bool bcrypt_b64(char c)
{
	return c == '.' || c == '/' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9');
}

bool bcrypt_is_hash(const char *hash, size_t hash_len)
{
	int cost;

	if (hash_len != BCRYPT_HASH_LEN || hash[0] != '$' || hash[1] != '2' ||
	    (hash[2] != 'a' && hash[2] != 'b' && hash[2] != 'y') || hash[3] != '$' ||
	    hash[4] < '0' || hash[4] > '9' || hash[5] < '0' || hash[5] > '9' || hash[6] != '$')
		return false;
	cost = (hash[4] - '0') * 10 + (hash[5] - '0');
	if (cost < BCRYPT_MIN_COST || cost > BCRYPT_MAX_COST)
		return false;
	for (size_t i = 7; i < hash_len; i++)
		if (!bcrypt_b64(hash[i]))
			return false;
	return true;
}

/* The password as a C string, cut at Go's 72 bytes; NULL when out of
 * memory (*einval set when it holds a NUL). */
static char *bcrypt_pw(const char *pw, size_t len, bool *einval)
{
	char *p;

	*einval = memchr(pw, '\0', len) != NULL;
	if (*einval)
		return NULL;
	if (len > BCRYPT_MAX_PW)
		len = BCRYPT_MAX_PW;
	p = auth_alloc(len + 1);
	if (p) {
		memcpy(p, pw, len);
		p[len] = '\0';
	}
	return p;
}

/* crypt_rn of p with setting (a "$2b$" one) into out; 0 or -errno. */
static int bcrypt_run(const char *p, const char *setting, char out[BCRYPT_HASH_SIZE])
{
	struct crypt_data *cd = auth_alloc(sizeof(*cd));
	int rc = 0;

	if (!cd)
		return -ENOMEM;
	memset(cd, 0, sizeof(*cd));
	if (!crypt_rn(p, setting, cd, (int)sizeof(*cd)) || cd->output[0] == '*' ||
	    strlen(cd->output) != BCRYPT_HASH_LEN)
		rc = -EIO;
	else
		memcpy(out, cd->output, BCRYPT_HASH_SIZE);
	explicit_bzero(cd, sizeof(*cd));
	auth_free(cd);
	return rc;
}

int bcrypt_hash(const char *pw, size_t len, int cost, char out[BCRYPT_HASH_SIZE])
{
	char setting[CRYPT_GENSALT_OUTPUT_SIZE];
	bool einval;
	char *p;
	int rc;

	if (cost < BCRYPT_MIN_COST)
		cost = BCRYPT_DEFAULT_COST;
	if (cost > BCRYPT_MAX_COST)
		return -EINVAL;
	p = bcrypt_pw(pw, len, &einval);
	if (!p)
		return einval ? -EINVAL : -ENOMEM;
	/* NULL random bytes: libxcrypt takes them from the kernel */
	if (!crypt_gensalt_rn("$2b$", (unsigned long)cost, NULL, 0, setting, sizeof(setting)))
		rc = -EIO;
	else
		rc = bcrypt_run(p, setting, out);
	explicit_bzero(p, strlen(p));
	auth_free(p);
	if (rc == 0)
		out[2] = 'a'; /* Go's name for the same hash */
	return rc;
}

bool bcrypt_verify(const char *pw, size_t len, const char *hash, size_t hash_len)
{
	char setting[BCRYPT_HASH_SIZE], got[BCRYPT_HASH_SIZE];
	unsigned char diff = 0;
	bool einval;
	char *p;
	int rc;

	if (!bcrypt_is_hash(hash, hash_len))
		return false;
	memcpy(setting, hash, BCRYPT_HASH_LEN);
	setting[BCRYPT_HASH_LEN] = '\0';
	setting[2] = 'b';
	p = bcrypt_pw(pw, len, &einval);
	if (!p)
		return false;
	rc = bcrypt_run(p, setting, got);
	explicit_bzero(p, strlen(p));
	auth_free(p);
	if (rc)
		return false;
	/* in constant time, as Go compares */
	for (size_t i = 3; i < BCRYPT_HASH_LEN; i++)
		diff |= (unsigned char)(got[i] ^ hash[i]);
	return diff == 0;
}
