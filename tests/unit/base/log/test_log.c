/*
 * Unit tests for base/log/log.c: every line is one valid JSON object shaped
 * like etcd's zap lines (level, ts, logger, caller, msg, then the fields,
 * in that order), strings are escaped as zap escapes them (and decode back
 * to the original, invalid UTF-8 aside), levels filter, fields of every
 * kind encode, long lines work, and lines of concurrent threads never mix.
 *
 * The lines are checked with a small strict JSON parser below rather than
 * by string matching alone.
 */
#include "shm_testlib.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>

#include "base/hex/hex.h"
#include "base/log/log.h"

#define CHECK_STREQ(a, b)                                                    \
	do {                                                                 \
		const char *check_a_ = (a), *check_b_ = (b);                 \
		if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_)) {  \
			fprintf(stderr, "%s:%d: check failed: %s == %s "     \
				"(\"%s\" != \"%s\")\n", __FILE__, __LINE__,  \
				#a, #b, check_a_ ? check_a_ : "(null)",      \
				check_b_ ? check_b_ : "(null)");             \
			exit(1);                                             \
		}                                                            \
	} while (0)

/* ---- a strict JSON parser (RFC 8259) keeping a flat top-level object ---- */

#define J_MAX_KEYS 32

struct jobj {
	int n;
	char key[J_MAX_KEYS][64];
	char *val[J_MAX_KEYS];    /* decoded string, or the literal text */
	size_t val_len[J_MAX_KEYS];
	bool is_str[J_MAX_KEYS];
};

struct jp {
	const char *p, *end;
	bool ok;
};

static void jp_ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static void jp_put_utf8(char **out, uint32_t cp)
{
	char *o = *out;
	if (cp < 0x80) {
		*o++ = (char)cp;
	} else if (cp < 0x800) {
		*o++ = (char)(0xc0 | cp >> 6);
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*o++ = (char)(0xe0 | cp >> 12);
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*o++ = (char)(0xf0 | cp >> 18);
		*o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
		*o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	}
	*out = o;
}

static int jp_hex4(struct jp *j, uint32_t *v)
{
	*v = 0;
	if (j->end - j->p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int d = hex_digit((unsigned char)*j->p++);
		if (d < 0)
			return -1;
		*v = *v << 4 | (uint32_t)d;
	}
	return 0;
}

/* Raw UTF-8 in a JSON string must be valid; returns its length or 0. */
static size_t jp_utf8(const unsigned char *s, size_t len)
{
	size_t n;
	uint32_t cp;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* Parses a string at j->p (on the quote); decodes into a malloc'd buffer
 * if out is not NULL. */
static void jp_string(struct jp *j, char **out, size_t *out_len)
{
	char *buf = malloc((size_t)(j->end - j->p) * 2 + 8), *o = buf;
	CHECK(buf);
	j->p++;
	for (;;) {
		if (j->p >= j->end)
			goto bad;
		unsigned char c = (unsigned char)*j->p;
		if (c == '"') {
			j->p++;
			break;
		}
		if (c < 0x20)
			goto bad;
		if (c == '\\') {
			j->p++;
			if (j->p >= j->end)
				goto bad;
			char e = *j->p++;
			uint32_t cp, lo;
			switch (e) {
			case '"': *o++ = '"'; break;
			case '\\': *o++ = '\\'; break;
			case '/': *o++ = '/'; break;
			case 'b': *o++ = '\b'; break;
			case 'f': *o++ = '\f'; break;
			case 'n': *o++ = '\n'; break;
			case 'r': *o++ = '\r'; break;
			case 't': *o++ = '\t'; break;
			case 'u':
				if (jp_hex4(j, &cp))
					goto bad;
				if (cp >= 0xd800 && cp <= 0xdbff) {
					if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u')
						goto bad;
					j->p += 2;
					if (jp_hex4(j, &lo) || lo < 0xdc00 || lo > 0xdfff)
						goto bad;
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				} else if (cp >= 0xdc00 && cp <= 0xdfff) {
					goto bad;
				}
				jp_put_utf8(&o, cp);
				break;
			default:
				goto bad;
			}
			continue;
		}
		if (c >= 0x80) {
			size_t n = jp_utf8((const unsigned char *)j->p, (size_t)(j->end - j->p));
			if (!n)
				goto bad;
			memcpy(o, j->p, n);
			o += n;
			j->p += n;
			continue;
		}
		*o++ = (char)c;
		j->p++;
	}
	*o = '\0';
	if (out) {
		*out = buf;
		*out_len = (size_t)(o - buf);
	} else {
		free(buf);
	}
	return;
bad:
	free(buf);
	j->ok = false;
}

static void jp_value(struct jp *j, int depth);

/* One or more digits; false (and the parse failed) if there are none. */
static bool jp_digits(struct jp *j)
{
	const char *s = j->p;
	while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
		j->p++;
	if (j->p == s)
		j->ok = false;
	return j->ok;
}

static void jp_number(struct jp *j)
{
	if (j->p < j->end && *j->p == '-')
		j->p++;
	if (j->p < j->end && *j->p == '0')
		j->p++;
	else if (j->p >= j->end || *j->p < '1' || *j->p > '9' || !jp_digits(j))
		goto bad;
	if (j->p < j->end && *j->p == '.') {
		j->p++;
		if (!jp_digits(j))
			return;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		jp_digits(j);
	}
	return;
bad:
	j->ok = false;
}

static void jp_value(struct jp *j, int depth)
{
	jp_ws(j);
	if (j->p >= j->end || depth > 16) {
		j->ok = false;
		return;
	}
	switch (*j->p) {
	case '"':
		jp_string(j, NULL, NULL);
		return;
	case '{':
	case '[': {
		char close = *j->p == '{' ? '}' : ']';
		bool obj = close == '}';
		j->p++;
		jp_ws(j);
		if (j->p < j->end && *j->p == close) {
			j->p++;
			return;
		}
		for (;;) {
			if (obj) {
				jp_ws(j);
				if (j->p >= j->end || *j->p != '"') {
					j->ok = false;
					return;
				}
				jp_string(j, NULL, NULL);
				jp_ws(j);
				if (!j->ok || j->p >= j->end || *j->p != ':') {
					j->ok = false;
					return;
				}
				j->p++;
			}
			jp_value(j, depth + 1);
			jp_ws(j);
			if (!j->ok || j->p >= j->end) {
				j->ok = false;
				return;
			}
			if (*j->p == close) {
				j->p++;
				return;
			}
			if (*j->p != ',') {
				j->ok = false;
				return;
			}
			j->p++;
		}
	}
	case 't':
	case 'f':
	case 'n': {
		const char *lits[] = { "true", "false", "null" };
		for (int i = 0; i < 3; i++) {
			size_t n = strlen(lits[i]);
			if ((size_t)(j->end - j->p) >= n && memcmp(j->p, lits[i], n) == 0) {
				j->p += n;
				return;
			}
		}
		j->ok = false;
		return;
	}
	default:
		jp_number(j);
	}
}

static void jobj_free(struct jobj *o)
{
	for (int i = 0; i < o->n; i++)
		free(o->val[i]);
	o->n = 0;
}

/* Parses one line (without its newline) as a flat object. Returns false if
 * it is not exactly one valid JSON object. */
static bool jobj_parse(const char *line, size_t len, struct jobj *o)
{
	struct jp j = { .p = line, .end = line + len, .ok = true };
	memset(o, 0, sizeof(*o));
	jp_ws(&j);
	if (j.p >= j.end || *j.p != '{')
		return false;
	j.p++;
	jp_ws(&j);
	if (j.p < j.end && *j.p == '}') {
		j.p++;
		goto tail;
	}
	for (;;) {
		char *key;
		size_t klen;
		jp_ws(&j);
		if (j.p >= j.end || *j.p != '"' || o->n >= J_MAX_KEYS)
			goto bad;
		jp_string(&j, &key, &klen);
		if (!j.ok)
			goto bad;
		snprintf(o->key[o->n], sizeof(o->key[0]), "%s", key);
		free(key);
		jp_ws(&j);
		if (j.p >= j.end || *j.p != ':')
			goto bad;
		j.p++;
		jp_ws(&j);
		if (j.p < j.end && *j.p == '"') {
			jp_string(&j, &o->val[o->n], &o->val_len[o->n]);
			o->is_str[o->n] = true;
		} else {
			const char *s = j.p;
			jp_value(&j, 1);
			o->val[o->n] = strndup(s, (size_t)(j.p - s));
			o->val_len[o->n] = (size_t)(j.p - s);
		}
		o->n++; /* counted before the check, so that jobj_free frees it */
		if (!j.ok)
			goto bad;
		jp_ws(&j);
		if (j.p < j.end && *j.p == ',') {
			j.p++;
			continue;
		}
		if (j.p < j.end && *j.p == '}') {
			j.p++;
			break;
		}
		goto bad;
	}
tail:
	jp_ws(&j);
	if (j.p == j.end)
		return true;
bad:
	jobj_free(o);
	return false;
}

static const char *jget(const struct jobj *o, const char *key)
{
	for (int i = 0; i < o->n; i++)
		if (strcmp(o->key[i], key) == 0)
			return o->val[i];
	return NULL;
}

static size_t jlen(const struct jobj *o, const char *key)
{
	for (int i = 0; i < o->n; i++)
		if (strcmp(o->key[i], key) == 0)
			return o->val_len[i];
	return 0;
}

/* ---- capture ---- */

static char cap_path[512];
static int cap_fd = -1;

static void cap_reset(void)
{
	if (cap_fd >= 0)
		close(cap_fd);
	cap_fd = open(cap_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(cap_fd >= 0);
	log_set_fd(cap_fd);
}

/* Everything logged since cap_reset, NUL-terminated; caller frees. */
static char *cap_read(size_t *len)
{
	off_t size = lseek(cap_fd, 0, SEEK_END);
	char *buf = malloc((size_t)size + 1);
	CHECK(buf);
	CHECK_EQ(pread(cap_fd, buf, (size_t)size, 0), size);
	buf[size] = '\0';
	*len = (size_t)size;
	return buf;
}

/* The one line logged since cap_reset, parsed. */
static void cap_one(struct jobj *o)
{
	size_t len;
	char *buf = cap_read(&len);
	CHECK(len > 0 && buf[len - 1] == '\n');
	CHECK(memchr(buf, '\n', len) == buf + len - 1); /* exactly one line */
	if (!jobj_parse(buf, len - 1, o)) {
		fprintf(stderr, "not a JSON object: %s", buf);
		exit(1);
	}
	free(buf);
}

/* ---- tests ---- */

static void test_shape(void)
{
	struct jobj o;
	int line;

	log_set_level(LOG_LEVEL_INFO);
	log_set_name(NULL);
	cap_reset();
	line = __LINE__ + 1;
	log_info("attached", LOG_U64("slot", 3), LOG_STR("peer", "raftd"));
	cap_one(&o);
	/* zap's key order: level, ts, caller, msg, then the fields */
	CHECK_EQ(o.n, 6);
	CHECK_STREQ(o.key[0], "level");
	CHECK_STREQ(o.key[1], "ts");
	CHECK_STREQ(o.key[2], "caller");
	CHECK_STREQ(o.key[3], "msg");
	CHECK_STREQ(o.key[4], "slot");
	CHECK_STREQ(o.key[5], "peer");
	CHECK_STREQ(jget(&o, "level"), "info");
	CHECK_STREQ(jget(&o, "msg"), "attached");
	CHECK_STREQ(jget(&o, "slot"), "3");
	CHECK(!o.is_str[4]);
	CHECK_STREQ(jget(&o, "peer"), "raftd");
	char want[64];
	snprintf(want, sizeof(want), "log/test_log.c:%d", line);
	CHECK_STREQ(jget(&o, "caller"), want);
	/* ISO 8601 with milliseconds and zone, as zap's ISO8601TimeEncoder */
	const char *ts = jget(&o, "ts");
	CHECK(strlen(ts) == 24 || strlen(ts) == 28);
	for (int i = 0; i < 23; i++) {
		const char *shape = "dddd-dd-ddTdd:dd:dd.ddd";
		if (shape[i] == 'd')
			CHECK(ts[i] >= '0' && ts[i] <= '9');
		else
			CHECK_EQ(ts[i], shape[i]);
	}
	CHECK(strcmp(ts + 23, "Z") == 0 || ts[23] == '+' || ts[23] == '-');
	jobj_free(&o);

	/* a name adds zap's "logger" key after ts; a message without fields */
	log_set_name("gatewayd-1");
	cap_reset();
	log_warn("no fields");
	cap_one(&o);
	CHECK_EQ(o.n, 5);
	CHECK_STREQ(o.key[2], "logger");
	CHECK_STREQ(jget(&o, "logger"), "gatewayd-1");
	CHECK_STREQ(jget(&o, "level"), "warn");
	jobj_free(&o);
	log_set_name("");
	cap_reset();
	log_error("unnamed again");
	cap_one(&o);
	CHECK(jget(&o, "logger") == NULL);
	CHECK_STREQ(jget(&o, "level"), "error");
	jobj_free(&o);
}

static void test_levels(void)
{
	const char *names[] = { "debug", "info", "warn", "error", "dpanic", "panic", "fatal" };
	enum log_level l;
	size_t len;
	char *buf;

	for (int i = 0; i < 7; i++) {
		CHECK_EQ(log_level_parse(names[i], &l), 0);
		CHECK_EQ(l, i);
		CHECK_STREQ(log_level_name(l), names[i]);
	}
	CHECK_EQ(log_level_parse("verbose", &l), -EINVAL);
	CHECK_EQ(log_level_parse("INFO", &l), -EINVAL);

	cap_reset();
	log_set_level(LOG_LEVEL_WARN);
	CHECK(!log_enabled(LOG_LEVEL_INFO));
	CHECK(log_enabled(LOG_LEVEL_ERROR));
	log_debug("hidden");
	log_info("hidden");
	log_warn("shown");
	log_error("shown");
	LOG_AT(LOG_LEVEL_FATAL, "shown", LOG_BOOL("b", true));
	buf = cap_read(&len);
	CHECK(strstr(buf, "hidden") == NULL);
	int lines = 0;
	for (char *p = buf; (p = strchr(p, '\n')); p++)
		lines++;
	CHECK_EQ(lines, 3);
	CHECK(strstr(buf, "\"level\":\"fatal\"") != NULL);
	free(buf);

	cap_reset();
	log_set_level(LOG_LEVEL_DEBUG);
	log_debug("now shown");
	buf = cap_read(&len);
	CHECK(strstr(buf, "\"level\":\"debug\"") != NULL);
	free(buf);
	log_set_level(LOG_LEVEL_INFO);
	CHECK_EQ(log_get_level(), LOG_LEVEL_INFO);
}

static void test_kinds(void)
{
	struct jobj o;
	const char raw[] = { 'a', 0, 'b' };

	cap_reset();
	log_info("kinds", LOG_U64("u", UINT64_MAX), LOG_I64("i", INT64_MIN),
		 LOG_BOOL("t", true), LOG_BOOL("f", false), LOG_F64("x", 1.5),
		 LOG_F64("third", 1.0 / 3), LOG_F64("nan", NAN), LOG_F64("inf", -INFINITY),
		 LOG_ERRNO(-ENOENT), LOG_STR("null", NULL), LOG_BYTES("raw", raw, sizeof(raw)));
	cap_one(&o);
	CHECK_STREQ(jget(&o, "u"), "18446744073709551615");
	CHECK_STREQ(jget(&o, "i"), "-9223372036854775808");
	CHECK_STREQ(jget(&o, "t"), "true");
	CHECK_STREQ(jget(&o, "f"), "false");
	CHECK_STREQ(jget(&o, "x"), "1.5");
	CHECK(strtod(jget(&o, "third"), NULL) == 1.0 / 3); /* round-trips exactly */
	CHECK_STREQ(jget(&o, "nan"), "NaN");
	CHECK_STREQ(jget(&o, "inf"), "-Inf");
	CHECK_STREQ(jget(&o, "error"), "No such file or directory");
	CHECK_STREQ(jget(&o, "null"), "null");
	CHECK_EQ(jlen(&o, "raw"), 3);
	CHECK(memcmp(jget(&o, "raw"), raw, 3) == 0);
	jobj_free(&o);

	/* a code that is no errno still says something */
	cap_reset();
	log_info("odd", LOG_ERRNO(-100000));
	cap_one(&o);
	CHECK_STREQ(jget(&o, "error"), "error code -100000");
	jobj_free(&o);
}

/* One string through the logger: must come back decoded as want. */
static void roundtrip(const char *s, size_t len, const char *want, size_t want_len)
{
	struct jobj o;
	cap_reset();
	log_info("escape", LOG_BYTES("s", s, len));
	cap_one(&o);
	if (jlen(&o, "s") != want_len || memcmp(jget(&o, "s"), want, want_len) != 0) {
		fprintf(stderr, "escaping %zu bytes did not round-trip\n", len);
		exit(1);
	}
	jobj_free(&o);
}

static void test_escaping(void)
{
	char out[256];
	size_t n;

	/* zap's escapes */
	n = log_json_escape(out, sizeof(out), "a\"b\\c\nd\re\tf", 11);
	CHECK_EQ(n, 16);
	CHECK(memcmp(out, "a\\\"b\\\\c\\nd\\re\\tf", n) == 0);
	n = log_json_escape(out, sizeof(out), "\x01\x1f\x7f/", 4);
	CHECK(n == 14 && memcmp(out, "\\u0001\\u001f\x7f/", n) == 0);
	/* valid UTF-8 passes through; invalid bytes become U+FFFD */
	const char *utf8 = "h\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e";
	n = log_json_escape(out, sizeof(out), utf8, strlen(utf8));
	CHECK(n == strlen(utf8) && memcmp(out, utf8, n) == 0);
	const char bad[] = "\xff|\x80|\xc0\xaf|\xed\xa0\x80|\xe2\x82|\xf4\x90\x80\x80";
	n = log_json_escape(out, sizeof(out), bad, sizeof(bad) - 1);
	out[n] = '\0';
	/* each maximal invalid byte is replaced one by one, as Go decodes */
	CHECK_STREQ(out, "\xef\xbf\xbd|\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|"
			 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|"
			 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
	/* a short buffer: the needed length is still returned, nothing
	 * written past cap */
	memset(out, 'Z', sizeof(out));
	n = log_json_escape(out, 3, "\"\"\"", 3);
	CHECK_EQ(n, 6);
	CHECK_EQ(out[3], 'Z');

	/* through whole lines: every byte value decodes back to itself,
	 * except invalid UTF-8 */
	char all[128];
	for (int i = 0; i < 128; i++)
		all[i] = (char)i;
	roundtrip(all, sizeof(all), all, sizeof(all));
	roundtrip(utf8, strlen(utf8), utf8, strlen(utf8));
	roundtrip("\xff", 1, "\xef\xbf\xbd", 3);
	roundtrip("", 0, "", 0);

	/* keys and the message are escaped too */
	struct jobj o;
	cap_reset();
	log_info("quote \" and \\ and \n", LOG_STR("k\"ey", "v"));
	cap_one(&o);
	CHECK_STREQ(jget(&o, "msg"), "quote \" and \\ and \n");
	CHECK_STREQ(jget(&o, "k\"ey"), "v");
	jobj_free(&o);

	/* random bytes: always one valid line */
	uint64_t x = 0x1234567;
	for (int round = 0; round < 200; round++) {
		char rnd[97];
		for (size_t i = 0; i < sizeof(rnd); i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			rnd[i] = (char)(x >> 56);
		}
		cap_reset();
		log_info("random", LOG_BYTES("b", rnd, sizeof(rnd)));
		cap_one(&o);
		jobj_free(&o);
	}
}

static void test_long_line(void)
{
	size_t big = 200000;
	char *s = malloc(big + 1);
	struct jobj o;

	CHECK(s);
	for (size_t i = 0; i < big; i++)
		s[i] = (char)('a' + i % 26);
	s[big] = '\0';
	s[1000] = '"';
	cap_reset();
	log_info("long", LOG_STR("s", s), LOG_U64("after", 7));
	cap_one(&o);
	CHECK_EQ(jlen(&o, "s"), big);
	CHECK(memcmp(jget(&o, "s"), s, big) == 0);
	CHECK_STREQ(jget(&o, "after"), "7");
	jobj_free(&o);
	free(s);
}

#define THREADS 4
#define LINES_PER_THREAD 500

static void *writer(void *arg)
{
	uintptr_t id = (uintptr_t)arg;
	char pad[300];
	memset(pad, 'p', sizeof(pad) - 1);
	pad[sizeof(pad) - 1] = '\0';
	for (int i = 0; i < LINES_PER_THREAD; i++)
		log_info("concurrent", LOG_U64("thread", id), LOG_I64("i", i), LOG_STR("pad", pad));
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[THREADS];
	int seen[THREADS] = { 0 };
	size_t len;
	char *buf;

	cap_reset();
	for (uintptr_t i = 0; i < THREADS; i++)
		CHECK_EQ(pthread_create(&t[i], NULL, writer, (void *)i), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	buf = cap_read(&len);
	int lines = 0;
	for (char *p = buf, *nl; (nl = memchr(p, '\n', len - (size_t)(p - buf))); p = nl + 1) {
		struct jobj o;
		CHECK(jobj_parse(p, (size_t)(nl - p), &o));
		int id = atoi(jget(&o, "thread"));
		CHECK(id >= 0 && id < THREADS);
		CHECK_EQ(atoi(jget(&o, "i")), seen[id]); /* in order per thread */
		seen[id]++;
		jobj_free(&o);
		lines++;
	}
	CHECK_EQ(lines, THREADS * LINES_PER_THREAD);
	free(buf);
}

/* The parser itself rejects what is not JSON (so the checks above mean
 * something). */
static void test_parser(void)
{
	const char *bad[] = { "", "{", "{\"a\":1,}", "{\"a\" 1}", "{\"a\":\"\x01\"}",
			      "{\"a\":01}", "{\"a\":\"\\x\"}", "{\"a\":\"\xff\"}", "{} x",
			      "{\"a\":tru}", "{\"a\":\"\\ud800\"}", "[1]" };
	const char *good[] = { "{}", "{\"a\":[1,{\"b\":null}],\"c\":-1.5e3}",
			       "{\"a\":\"\\ud834\\udd1e\"}" };
	struct jobj o;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (jobj_parse(bad[i], strlen(bad[i]), &o)) {
			fprintf(stderr, "parser accepted %s\n", bad[i]);
			exit(1);
		}
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		CHECK(jobj_parse(good[i], strlen(good[i]), &o));
		jobj_free(&o);
	}
}

/* Durations as Go's time.Duration.String writes them; the texts were
 * printed by Go 1.19 for the same values. */
static void test_durations(void)
{
	static const struct {
		int64_t ns;
		const char *go;
	} cases[] = {
		{ 0, "0s" },
		{ 1, "1ns" },
		{ 999, "999ns" },
		{ 1000, "1\u00b5s" },
		{ 1500, "1.5\u00b5s" },
		{ 12500, "12.5\u00b5s" },
		{ 999999, "999.999\u00b5s" },
		{ 1000000, "1ms" },
		{ 100000000, "100ms" },
		{ 250001250, "250.00125ms" },
		{ 999999999, "999.999999ms" },
		{ 1000000000, "1s" },
		{ 5500000000, "5.5s" },
		{ 61000000000, "1m1s" },
		{ 90000000000, "1m30s" },
		{ 3600000000000, "1h0m0s" },
		{ 7200000000001, "2h0m0.000000001s" },
		{ -1, "-1ns" },
		{ -1500000, "-1.5ms" },
		{ INT64_MAX, "2562047h47m16.854775807s" },
		{ INT64_MIN + 1, "-2562047h47m16.854775807s" },
		{ INT64_MIN, "-2562047h47m16.854775808s" },
	};
	char out[32];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		log_go_duration_text(cases[i].ns, out);
		CHECK_STREQ(out, cases[i].go);
	}
	log_duration_text(0, out);
	CHECK_STREQ(out, "0s");
	log_duration_text(250, out);
	CHECK_STREQ(out, "250ms");
	log_duration_text(5500, out);
	CHECK_STREQ(out, "5.5s");
	log_duration_text(5400000, out);
	CHECK_STREQ(out, "1h30m0s");
	log_duration_text(UINT64_MAX, out); /* clamped to Go's longest */
	CHECK_STREQ(out, "2562047h47m16.854s");
}

int main(void)
{
	char dir[256];

	test_tmpdir(dir, sizeof(dir));
	snprintf(cap_path, sizeof(cap_path), "%s/log", dir);
	test_parser();
	test_shape();
	test_levels();
	test_kinds();
	test_escaping();
	test_long_line();
	test_threads();
	test_durations();
	close(cap_fd);
	log_set_fd(2);
	printf("test_log: ok\n");
	return 0;
}
