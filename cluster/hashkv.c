/* GET /members/hashkv: its JSON and a blocking client (see hashkv.h). */
#include "cluster/hashkv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base/log/errmsg.h"
#include "base/sock/gwsock.h"
#include "cluster/peer_request.h"
#include "cluster/peer_url.h"

/* Nesting a skipped value may have; deeper is refused (Go's limit is far
 * higher, but no HashKV has more than two levels). */
#define HASHKV_JSON_DEPTH 64

/* ---- JSON ---- */

struct hj {
	const uint8_t *p, *end;
};

static void hj_ws(struct hj *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static bool hj_eat(struct hj *j, char c)
{
	hj_ws(j);
	if (j->p < j->end && *j->p == (uint8_t)c) {
		j->p++;
		return true;
	}
	return false;
}

/* A string: its raw bytes (escapes left as they are) in *s, *n. */
static int hj_string(struct hj *j, const uint8_t **s, size_t *n)
{
	if (!hj_eat(j, '"'))
		return -EBADMSG;
	*s = j->p;
	while (j->p < j->end && *j->p != '"') {
		if (*j->p < 0x20)
			return -EBADMSG;
		if (*j->p == '\\') {
			j->p++;
			if (j->p >= j->end)
				return -EBADMSG;
		}
		j->p++;
	}
	if (j->p >= j->end)
		return -EBADMSG;
	*n = (size_t)(j->p - *s);
	j->p++;
	return 0;
}

static bool hj_literal(struct hj *j, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n))
		return false;
	j->p += n;
	return true;
}

/* A JSON number's bytes (not checked for being an integer). */
static int hj_number(struct hj *j, const uint8_t **s, size_t *n)
{
	hj_ws(j);
	*s = j->p;
	if (j->p < j->end && *j->p == '-')
		j->p++;
	if (j->p >= j->end || *j->p < '0' || *j->p > '9')
		return -EBADMSG;
	while (j->p < j->end && ((*j->p >= '0' && *j->p <= '9') || *j->p == '.' || *j->p == 'e' ||
				 *j->p == 'E' || *j->p == '+' || *j->p == '-'))
		j->p++;
	*n = (size_t)(j->p - *s);
	return 0;
}

static int hj_skip(struct hj *j, int depth);

/* The members of an object or the items of an array, skipped. */
static int hj_skip_container(struct hj *j, char close, int depth)
{
	const uint8_t *s;
	size_t n;
	int rc;

	if (depth > HASHKV_JSON_DEPTH)
		return -EBADMSG;
	if (hj_eat(j, close))
		return 0;
	do {
		if (close == '}' && ((rc = hj_string(j, &s, &n)) || !hj_eat(j, ':')))
			return rc ? rc : -EBADMSG;
		if ((rc = hj_skip(j, depth + 1)))
			return rc;
	} while (hj_eat(j, ','));
	return hj_eat(j, close) ? 0 : -EBADMSG;
}

static int hj_skip(struct hj *j, int depth)
{
	const uint8_t *s;
	size_t n;

	hj_ws(j);
	if (j->p >= j->end)
		return -EBADMSG;
	switch (*j->p) {
	case '"':
		return hj_string(j, &s, &n);
	case '{':
		j->p++;
		return hj_skip_container(j, '}', depth);
	case '[':
		j->p++;
		return hj_skip_container(j, ']', depth);
	case 't':
		return hj_literal(j, "true") ? 0 : -EBADMSG;
	case 'f':
		return hj_literal(j, "false") ? 0 : -EBADMSG;
	case 'n':
		return hj_literal(j, "null") ? 0 : -EBADMSG;
	default:
		return hj_number(j, &s, &n);
	}
}

/* An integer value into *out, within [min, max] (as Go's int64 and
 * uint64/uint32 fields take it); null leaves *out as it is. */
static int hj_int(struct hj *j, bool is_signed, uint64_t max, uint64_t *out)
{
	const uint8_t *s;
	size_t n, i = 0;
	uint64_t v = 0;
	bool neg = false;

	hj_ws(j);
	if (hj_literal(j, "null"))
		return 0;
	if (hj_number(j, &s, &n))
		return -EBADMSG;
	if (s[0] == '-') {
		if (!is_signed)
			return -EBADMSG;
		neg = true;
		i = 1;
	}
	if (n - i > 1 && s[i] == '0')
		return -EBADMSG;
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EBADMSG;
		if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return -EBADMSG;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (neg ? v > max + 1 : v > max)
		return -EBADMSG;
	*out = neg ? (uint64_t)0 - v : v;
	return 0;
}

/* Whether a key's raw bytes name w, without regard to case (Go's
 * fallback match of field names). */
static bool hj_key_is(const uint8_t *k, size_t n, const char *w)
{
	return n == strlen(w) && strncasecmp((const char *)k, w, n) == 0;
}

/* What an object's keys are read into. */
typedef int (*hj_member_fn)(struct hj *j, const uint8_t *key, size_t n, void *arg, int depth);

/* An object (or null), each member handed to fn, which reads its value
 * or returns 1 to have it skipped. */
static int hj_object(struct hj *j, hj_member_fn fn, void *arg, int depth)
{
	const uint8_t *k;
	size_t n;
	int rc;

	hj_ws(j);
	if (hj_literal(j, "null"))
		return 0;
	if (depth > HASHKV_JSON_DEPTH || !hj_eat(j, '{'))
		return -EBADMSG;
	if (hj_eat(j, '}'))
		return 0;
	do {
		if ((rc = hj_string(j, &k, &n)) || !hj_eat(j, ':'))
			return rc ? rc : -EBADMSG;
		rc = fn(j, k, n, arg, depth);
		if (rc == 1)
			rc = hj_skip(j, depth + 1);
		if (rc)
			return rc;
	} while (hj_eat(j, ','));
	return hj_eat(j, '}') ? 0 : -EBADMSG;
}

/* The whole of p[0..len) is one value read by fn's object. */
static int hj_document(const void *p, size_t len, hj_member_fn fn, void *arg)
{
	struct hj j = { p, (const uint8_t *)p + len };
	int rc = hj_object(&j, fn, arg, 0);

	if (rc)
		return rc;
	hj_ws(&j);
	return j.p == j.end ? 0 : -EBADMSG;
}

static int hj_request_member(struct hj *j, const uint8_t *key, size_t n, void *arg, int depth)
{
	(void)depth;
	if (hj_key_is(key, n, "revision"))
		return hj_int(j, true, INT64_MAX, arg);
	return 1;
}

int hashkv_request_decode(const void *p, size_t len, int64_t *rev)
{
	uint64_t v = 0;
	int rc = hj_document(p, len, hj_request_member, &v);

	if (rc == 0)
		*rev = (int64_t)v;
	return rc;
}

static int hj_header_member(struct hj *j, const uint8_t *key, size_t n, void *arg, int depth)
{
	struct hashkv_resp *r = arg;
	uint64_t v;
	int rc;

	(void)depth;
	if (hj_key_is(key, n, "member_id"))
		return hj_int(j, false, UINT64_MAX, &r->member_id);
	if (hj_key_is(key, n, "revision")) {
		v = (uint64_t)r->revision;
		rc = hj_int(j, true, INT64_MAX, &v);
		r->revision = (int64_t)v;
		return rc;
	}
	return 1;
}

static int hj_response_member(struct hj *j, const uint8_t *key, size_t n, void *arg, int depth)
{
	struct hashkv_resp *r = arg;
	uint64_t v;
	int rc;

	if (hj_key_is(key, n, "header"))
		return hj_object(j, hj_header_member, r, depth + 1);
	if (hj_key_is(key, n, "hash")) {
		v = r->hash;
		rc = hj_int(j, false, UINT32_MAX, &v);
		r->hash = (uint32_t)v;
		return rc;
	}
	if (hj_key_is(key, n, "compact_revision")) {
		v = (uint64_t)r->compact_revision;
		rc = hj_int(j, true, INT64_MAX, &v);
		r->compact_revision = (int64_t)v;
		return rc;
	}
	return 1;
}

int hashkv_response_decode(const void *p, size_t len, struct hashkv_resp *out)
{
	memset(out, 0, sizeof(*out));
	return hj_document(p, len, hj_response_member, out);
}

int hashkv_request_encode(char *buf, size_t cap, int64_t rev)
{
	int n = rev ? snprintf(buf, cap, "{\"revision\":%" PRId64 "}", rev) :
		      snprintf(buf, cap, "{}");

	return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}

int hashkv_response_encode(char *buf, size_t cap, const struct hashkv_resp *r)
{
	char hdr[48] = "", hash[32] = "", crev[48] = "";
	int n;

	/* omitempty: zero fields are left out, and a header with nothing
	 * set is "{}" */
	if (r->revision)
		snprintf(hdr, sizeof(hdr), "\"revision\":%" PRId64, r->revision);
	if (r->hash)
		snprintf(hash, sizeof(hash), ",\"hash\":%" PRIu32, r->hash);
	if (r->compact_revision)
		snprintf(crev, sizeof(crev), ",\"compact_revision\":%" PRId64, r->compact_revision);
	n = snprintf(buf, cap, "{\"header\":{%s}%s%s}", hdr, hash, crev);
	return n < 0 || (size_t)n >= cap ? -ENOSPC : n;
}

/* ---- the answer ---- */

static bool hashkv_contains(const void *body, size_t len, const char *w)
{
	return memmem(body, len, w, strlen(w)) != NULL;
}

enum hashkv_outcome hashkv_answer(int status, const void *body, size_t len,
				  struct hashkv_resp *out, char *err, size_t cap)
{
	if (status == 400 && hashkv_contains(body, len, HASHKV_ERR_COMPACTED)) {
		snprintf(err, cap, "etcdserver: " HASHKV_ERR_COMPACTED);
		return HASHKV_COMPACTED;
	}
	if (status == 400 && hashkv_contains(body, len, HASHKV_ERR_FUTURE_REV)) {
		snprintf(err, cap, "etcdserver: " HASHKV_ERR_FUTURE_REV);
		return HASHKV_FUTURE_REV;
	}
	if (status != 200) {
		snprintf(err, cap, "unknown error: %.*s", (int)(len > 200 ? 200 : len),
			 (const char *)body);
		return HASHKV_FAILED;
	}
	if (hashkv_response_decode(body, len, out)) {
		snprintf(err, cap, "cannot decode the HashKV answer");
		return HASHKV_FAILED;
	}
	return HASHKV_OK;
}

/* ---- the client ---- */

/* The text of a failure to reach url, as Go's client words it. */
static void hashkv_error(char *err, size_t cap, const char *url, int rc)
{
	snprintf(err, cap, "Get \"%s" HASHKV_PATH "\": %s", url,
		 rc == -ETIMEDOUT ? "context deadline exceeded" : errmsg_get(rc));
}

/* The request: a GET whose body is the HashKVRequest, as etcd's
 * getPeerHashKVHTTP sends it. body: room for the JSON. */
static struct peer_request hashkv_request(char *body, size_t cap, int64_t rev)
{
	int blen = hashkv_request_encode(body, cap, rev);

	return (struct peer_request){ .method = "GET", .path = HASHKV_PATH, .user_agent = "cetcd",
				      .content_type = "application/json", .body = body,
				      .body_len = blen > 0 ? (size_t)blen : 0,
				      .max_body = HASHKV_MAX_ANSWER };
}

/* What a request that ended with rc at stage, or its answer a, comes to
 * (url names the member in the texts). */
static enum hashkv_outcome hashkv_outcome_of(int rc, enum peer_request_stage stage,
					     struct peer_answer *a, const char *url,
					     struct hashkv_resp *out, char *err, size_t cap)
{
	enum hashkv_outcome oc;

	if (rc == 0) {
		oc = hashkv_answer(a->status, a->body, a->len, out, err, cap);
		peer_answer_free(a);
		return oc;
	}
	if (stage == PEER_REQUEST_ANSWER && rc != -EMSGSIZE)
		snprintf(err, cap, "malformed HTTP response");
	else if (stage == PEER_REQUEST_HEAD)
		snprintf(err, cap, "request too long");
	else
		hashkv_error(err, cap, url, rc);
	return HASHKV_FAILED;
}

enum hashkv_outcome hashkv_fetch(const char *url, int64_t rev, struct tls_ctx *tls,
				 int timeout_ms, struct hashkv_resp *out, char *err, size_t cap)
{
	enum peer_request_stage stage;
	struct peer_request rq;
	struct peer_answer a;
	struct peer_url u;
	char body[64];
	int rc;

	if (peer_url_parse(url, &u)) {
		snprintf(err, cap, "parse \"%s\": invalid URL", url);
		return HASHKV_FAILED;
	}
	if (u.tls && !tls) {
		snprintf(err, cap, "a TLS peer URL without peer TLS");
		return HASHKV_FAILED;
	}
	rq = hashkv_request(body, sizeof(body), rev);
	rc = peer_request_url(&u, tls, &rq, timeout_ms, &a, &stage);
	return hashkv_outcome_of(rc, stage, &a, url, out, err, cap);
}

enum hashkv_outcome hashkv_fetch_local(const struct gwsock_addr *ga, int64_t rev, int timeout_ms,
				       struct hashkv_resp *out, char *err, size_t cap)
{
	enum peer_request_stage stage = PEER_REQUEST_CONNECT;
	struct peer_request rq;
	struct peer_answer a;
	char body[64];
	int fd, rc = gwsock_connect(ga, &fd);

	if (!rc) {
		rq = hashkv_request(body, sizeof(body), rev);
		rc = peer_request_fd(fd, "localhost", &rq, timeout_ms, &a, &stage);
		close(fd);
	}
	return hashkv_outcome_of(rc, stage, &a, "the local gateway", out, err, cap);
}
