/* GET /members/hashkv: its JSON and a blocking client (see hashkv.h). */
#include "cluster/hashkv.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/http/http.h"
#include "base/sock/gwsock.h"
#include "base/log/errmsg.h"
#include "cluster/peer_url.h"
#include "base/tls/tls.h"

/* Nesting a skipped value may have; deeper is refused (Go's limit is far
 * higher, but no HashKV has more than two levels). */
#define HASHKV_JSON_DEPTH 64
/* The largest answer read: a HashKVResponse is under 200 bytes, an error
 * text a line. */
#define HASHKV_MAX_ANSWER (64u * 1024u)

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

int hashkv_http_response(const void *buf, size_t len, int *status, const uint8_t **body,
			 size_t *body_len)
{
	struct http_head h;

	if (http_parse_response(buf, len, HTTP_MAX_HEAD, &h))
		return -EBADMSG;
	*status = h.status;
	*body = (const uint8_t *)buf + h.head_len;
	*body_len = len - h.head_len;
	if (h.has_length) {
		if (h.content_length > *body_len)
			return -EBADMSG;
		*body_len = (size_t)h.content_length;
	}
	return 0;
}

/* ---- the client ---- */

static int64_t hashkv_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for fd to be ready for events until deadline: 0 or -ETIMEDOUT. */
static int hashkv_wait(int fd, short events, int64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int64_t left;
	int n;

	do {
		left = deadline - hashkv_now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, (int)left);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return n ? 0 : -ETIMEDOUT;
}

/* A connected, non-blocking socket to u. */
static int hashkv_dial(const struct peer_url *u, int64_t deadline, int *out)
{
	struct sockaddr_storage ss;
	socklen_t sl, el = sizeof(int);
	int fd, rc, err = 0;

	rc = peer_url_sockaddr(u, &ss, &sl);
	if (rc)
		return rc;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0) {
		if (errno != EINPROGRESS) {
			rc = -errno;
			goto out_close;
		}
		rc = hashkv_wait(fd, POLLOUT, deadline);
		if (rc)
			goto out_close;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
			rc = err ? -err : -errno;
			goto out_close;
		}
	}
	*out = fd;
	return 0;
out_close:
	close(fd);
	return rc;
}

/* Writes all of buf on a plain socket before the deadline. */
static int hashkv_send(int fd, const char *buf, size_t len, int64_t deadline)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			int rc = hashkv_wait(fd, POLLOUT, deadline);
			if (rc)
				return rc;
			continue;
		}
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads the whole answer (the request asked the server to close after
 * it) into buf; its length, or a negative errno. */
static ssize_t hashkv_recv(int fd, struct tls_conn *tc, uint8_t *buf, size_t cap, int64_t deadline)
{
	size_t got = 0;

	for (;;) {
		ssize_t n;
		short ev = POLLIN;
		if (got == cap)
			return -EMSGSIZE;
		if (tc) {
			n = tls_conn_read(tc, buf + got, cap - got);
			if (n == -EAGAIN && (tls_conn_want(tc) & TLS_WANT_WRITE))
				ev = POLLOUT;
			if (n == -ECONNRESET)
				n = 0; /* Go's server may close without close_notify */
		} else {
			n = recv(fd, buf + got, cap - got, 0);
			if (n < 0)
				n = errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
		}
		if (n == 0)
			return (ssize_t)got;
		if (n == -EAGAIN) {
			int rc = hashkv_wait(fd, ev, deadline);
			if (rc)
				return rc;
			continue;
		}
		if (n < 0)
			return n;
		got += (size_t)n;
	}
}

/* Sends the request on a connected socket (through tc when not NULL)
 * and reads the answer. */
static enum hashkv_outcome hashkv_exchange(int fd, struct tls_conn *tc, const char *host,
					   int64_t rev, int64_t deadline,
					   struct hashkv_resp *out, char *err, size_t cap, int *rcp)
{
	static uint8_t answer[HASHKV_MAX_ANSWER];
	char body[64], req[512];
	const uint8_t *ab;
	size_t alen;
	ssize_t got;
	int n, blen, status, rc;

	blen = hashkv_request_encode(body, sizeof(body), rev);
	n = snprintf(req, sizeof(req),
		     "GET " HASHKV_PATH " HTTP/1.1\r\nHost: %s\r\nUser-Agent: cetcd\r\n"
		     "Content-Length: %d\r\nContent-Type: application/json\r\n"
		     "Connection: close\r\n\r\n%s",
		     host, blen, body);
	if (blen < 0 || n < 0 || (size_t)n >= sizeof(req)) {
		snprintf(err, cap, "request too long");
		return HASHKV_FAILED;
	}
	if (tc) {
		int left = (int)(deadline - hashkv_now_ms());
		rc = tls_conn_write_all_timed(tc, req, (size_t)n, left > 0 ? left : 1);
	} else {
		rc = hashkv_send(fd, req, (size_t)n, deadline);
	}
	got = rc ? rc : hashkv_recv(fd, tc, answer, sizeof(answer), deadline);
	if (got < 0) {
		*rcp = (int)got;
		return HASHKV_FAILED;
	}
	if (hashkv_http_response(answer, (size_t)got, &status, &ab, &alen)) {
		snprintf(err, cap, "malformed HTTP response");
		return HASHKV_FAILED;
	}
	return hashkv_answer(status, ab, alen, out, err, cap);
}

/* The text of a failure to reach url, as Go's client words it. */
static void hashkv_error(char *err, size_t cap, const char *url, int rc)
{
	snprintf(err, cap, "Get \"%s" HASHKV_PATH "\": %s", url,
		 rc == -ETIMEDOUT ? "context deadline exceeded" : errmsg_get(rc));
}

enum hashkv_outcome hashkv_fetch(const char *url, int64_t rev, struct tls_ctx *tls,
				 int timeout_ms, struct hashkv_resp *out, char *err, size_t cap)
{
	int64_t deadline = hashkv_now_ms() + timeout_ms;
	struct peer_url u;
	struct tls_conn *tc = NULL;
	char host[300];
	int fd = -1, rc = 0;
	enum hashkv_outcome oc = HASHKV_FAILED;

	if (peer_url_parse(url, &u)) {
		snprintf(err, cap, "parse \"%s\": invalid URL", url);
		return HASHKV_FAILED;
	}
	if (u.tls && !tls) {
		snprintf(err, cap, "a TLS peer URL without peer TLS");
		return HASHKV_FAILED;
	}
	snprintf(host, sizeof(host), "%s%s%s", u.unix_socket ? "localhost" : u.host,
		 u.unix_socket ? "" : ":", u.unix_socket ? "" : u.port);
	rc = hashkv_dial(&u, deadline, &fd);
	if (!rc && u.tls) {
		int left = (int)(deadline - hashkv_now_ms());
		rc = tls_conn_new(tls, fd, u.unix_socket ? NULL : u.host, &tc);
		if (!rc)
			rc = tls_conn_handshake_timed(tc, left > 0 ? left : 1);
	}
	if (!rc)
		oc = hashkv_exchange(fd, tc, host, rev, deadline, out, err, cap, &rc);
	if (rc)
		hashkv_error(err, cap, url, rc);
	tls_conn_free(tc);
	if (fd >= 0)
		close(fd);
	return oc;
}

enum hashkv_outcome hashkv_fetch_local(const struct gwsock_addr *a, int64_t rev, int timeout_ms,
				       struct hashkv_resp *out, char *err, size_t cap)
{
	int64_t deadline = hashkv_now_ms() + timeout_ms;
	int fd, rc = gwsock_connect(a, &fd);
	enum hashkv_outcome oc = HASHKV_FAILED;

	if (!rc) {
		oc = hashkv_exchange(fd, NULL, "localhost", rev, deadline, out, err, cap, &rc);
		close(fd);
	}
	if (rc)
		hashkv_error(err, cap, "the local gateway", rc);
	return oc;
}
