/* JSON line logging in the shape of etcd's zap logger (see log.h). */
#include "base/log/log.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static _Atomic int log_min_level = LOG_LEVEL_INFO;
/* Where lines go: log_fds[0..log_nfds-1]. Set at start-up (and by tests
 * between lines); each line is one write() to each. */
static _Atomic int log_fds[LOG_MAX_FDS] = { 2 };
static _Atomic size_t log_nfds = 1;
/* Set once at start-up, before threads; read by every line. */
static char log_name[64];

static const char *const log_level_names[] = {
	[LOG_LEVEL_DEBUG] = "debug", [LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_WARN] = "warn",   [LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_DPANIC] = "dpanic", [LOG_LEVEL_PANIC] = "panic",
	[LOG_LEVEL_FATAL] = "fatal",
};

#define LOG_NLEVELS (sizeof(log_level_names) / sizeof(log_level_names[0]))

void log_set_level(enum log_level level)
{
	atomic_store_explicit(&log_min_level, (int)level, memory_order_relaxed);
}

enum log_level log_get_level(void)
{
	return (enum log_level)atomic_load_explicit(&log_min_level, memory_order_relaxed);
}

bool log_enabled(enum log_level level)
{
	return (int)level >= atomic_load_explicit(&log_min_level, memory_order_relaxed);
}

int log_level_parse(const char *text, enum log_level *out)
{
	for (size_t i = 0; i < LOG_NLEVELS; i++) {
		if (strcmp(text, log_level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *log_level_name(enum log_level level)
{
	if ((size_t)level >= LOG_NLEVELS)
		return "unknown";
	return log_level_names[level];
}

void log_set_fd(int fd)
{
	log_set_fds(&fd, 1);
}

int log_set_fds(const int *fds, size_t n)
{
	if (n == 0 || n > LOG_MAX_FDS)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		atomic_store_explicit(&log_fds[i], fds[i], memory_order_relaxed);
	atomic_store_explicit(&log_nfds, n, memory_order_release);
	return 0;
}

void log_set_name(const char *name)
{
	if (!name)
		name = "";
	snprintf(log_name, sizeof(log_name), "%s", name);
}

size_t log_utf8_len(const unsigned char *s, size_t len)
{
	unsigned char c = s[0];
	size_t n;
	uint32_t cp;

	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (len < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

size_t log_json_escape(char *dst, size_t cap, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t out = 0;

#define LOG_PUT(ch)                        \
	do {                               \
		if (out < cap)             \
			dst[out] = (char)(ch); \
		out++;                     \
	} while (0)

	for (size_t i = 0; i < len;) {
		unsigned char c = p[i];
		if (c >= 0x80) {
			size_t n = log_utf8_len(p + i, len - i);
			if (n == 0) {
				/* U+FFFD in UTF-8, as zap writes for a bad byte */
				LOG_PUT(0xef);
				LOG_PUT(0xbf);
				LOG_PUT(0xbd);
				i++;
				continue;
			}
			for (size_t k = 0; k < n; k++)
				LOG_PUT(p[i + k]);
			i += n;
			continue;
		}
		switch (c) {
		case '"':
			LOG_PUT('\\');
			LOG_PUT('"');
			break;
		case '\\':
			LOG_PUT('\\');
			LOG_PUT('\\');
			break;
		case '\n':
			LOG_PUT('\\');
			LOG_PUT('n');
			break;
		case '\r':
			LOG_PUT('\\');
			LOG_PUT('r');
			break;
		case '\t':
			LOG_PUT('\\');
			LOG_PUT('t');
			break;
		default:
			if (c < 0x20) {
				LOG_PUT('\\');
				LOG_PUT('u');
				LOG_PUT('0');
				LOG_PUT('0');
				LOG_PUT(hex[c >> 4]);
				LOG_PUT(hex[c & 0xf]);
			} else {
				LOG_PUT(c);
			}
		}
		i++;
	}
#undef LOG_PUT
	return out;
}

/* A line being built: starts in a stack buffer, moves to the heap if it
 * outgrows it. A failed allocation marks it failed; later appends do
 * nothing and the caller writes a short fallback line instead. */
struct log_buf {
	char *p;
	size_t len;
	size_t cap;
	bool heap;
	bool failed;
};

static bool log_buf_reserve(struct log_buf *b, size_t extra)
{
	if (b->failed)
		return false;
	if (b->len + extra <= b->cap)
		return true;
	size_t cap = b->cap * 2;
	while (cap < b->len + extra)
		cap *= 2;
	char *np = b->heap ? realloc(b->p, cap) : malloc(cap);
	if (!np) {
		b->failed = true;
		return false;
	}
	if (!b->heap)
		memcpy(np, b->p, b->len);
	b->p = np;
	b->cap = cap;
	b->heap = true;
	return true;
}

static void log_buf_raw(struct log_buf *b, const char *s, size_t n)
{
	if (!log_buf_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void log_buf_str(struct log_buf *b, const char *s)
{
	log_buf_raw(b, s, strlen(s));
}

/* Appends a quoted, escaped JSON string. */
static void log_buf_quoted(struct log_buf *b, const char *s, size_t n)
{
	size_t need = log_json_escape(NULL, 0, s, n);
	if (!log_buf_reserve(b, need + 2))
		return;
	b->p[b->len++] = '"';
	log_json_escape(b->p + b->len, need, s, n);
	b->len += need;
	b->p[b->len++] = '"';
}

static void log_buf_key(struct log_buf *b, const char *key)
{
	log_buf_raw(b, ",", 1);
	log_buf_quoted(b, key ? key : "", key ? strlen(key) : 0);
	log_buf_raw(b, ":", 1);
}

static void log_buf_fmt(struct log_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void log_buf_fmt(struct log_buf *b, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		log_buf_raw(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* zap writes floats in their shortest exact form and non-finite values as
 * strings. */
static void log_buf_f64(struct log_buf *b, double f)
{
	char tmp[40];
	if (isnan(f)) {
		log_buf_str(b, "\"NaN\"");
		return;
	}
	if (isinf(f)) {
		log_buf_str(b, f > 0 ? "\"+Inf\"" : "\"-Inf\"");
		return;
	}
	snprintf(tmp, sizeof(tmp), "%.15g", f);
	if (strtod(tmp, NULL) != f)
		snprintf(tmp, sizeof(tmp), "%.17g", f);
	log_buf_str(b, tmp);
}

static void log_buf_errno(struct log_buf *b, int64_t rc)
{
	const char *text = NULL;
	char tmp[48];
	if (rc < 0 && rc > -4096)
		text = strerrordesc_np((int)-rc);
	if (!text) {
		snprintf(tmp, sizeof(tmp), "error code %lld", (long long)rc);
		text = tmp;
	}
	log_buf_quoted(b, text, strlen(text));
}

static void log_buf_field(struct log_buf *b, const struct log_field *f)
{
	log_buf_key(b, f->key);
	switch (f->kind) {
	case LOG_KIND_STR:
		if (f->v.s)
			log_buf_quoted(b, f->v.s, strlen(f->v.s));
		else
			log_buf_str(b, "null");
		break;
	case LOG_KIND_BYTES:
		log_buf_quoted(b, f->v.s ? f->v.s : "", f->v.s ? f->len : 0);
		break;
	case LOG_KIND_U64:
		log_buf_fmt(b, "%llu", (unsigned long long)f->v.u);
		break;
	case LOG_KIND_I64:
		log_buf_fmt(b, "%lld", (long long)f->v.i);
		break;
	case LOG_KIND_BOOL:
		log_buf_str(b, f->v.b ? "true" : "false");
		break;
	case LOG_KIND_F64:
		log_buf_f64(b, f->v.f);
		break;
	case LOG_KIND_ERRNO:
		log_buf_errno(b, f->v.i);
		break;
	default:
		log_buf_str(b, "null");
	}
}

/* ISO 8601 local time with milliseconds and zone, as zap's
 * ISO8601TimeEncoder writes it ("Z" for UTC). */
static void log_timestamp(char *out, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	long off_min = tm.tm_gmtoff / 60;
	if (off_min == 0) {
		snprintf(out + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000);
	} else {
		char sign = off_min < 0 ? '-' : '+';
		if (off_min < 0)
			off_min = -off_min;
		snprintf(out + n, cap - n, ".%03ld%c%02ld%02ld", ts.tv_nsec / 1000000,
			 sign, off_min / 60, off_min % 60);
	}
}

/* The last two components of a source path: "raftd/main.c". */
static const char *log_short_caller(const char *file)
{
	const char *last = strrchr(file, '/');
	if (!last)
		return file;
	const char *p = last;
	while (p > file) {
		p--;
		if (*p == '/')
			return p + 1;
	}
	return file;
}

static void log_write_fd(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return; /* nowhere left to report it */
		}
		p += w;
		n -= (size_t)w;
	}
}

static void log_write_all(const char *p, size_t n)
{
	size_t nfds = atomic_load_explicit(&log_nfds, memory_order_acquire);
	for (size_t i = 0; i < nfds; i++)
		log_write_fd(atomic_load_explicit(&log_fds[i], memory_order_relaxed), p, n);
}

/* Builds the common head of a line: level, ts, logger, caller, msg. */
static void log_buf_head(struct log_buf *b, enum log_level level, const char *caller,
			 const char *msg)
{
	char ts[48];
	log_timestamp(ts, sizeof(ts));
	log_buf_str(b, "{\"level\":\"");
	log_buf_str(b, log_level_name(level));
	log_buf_str(b, "\",\"ts\":\"");
	log_buf_str(b, ts);
	log_buf_str(b, "\"");
	if (log_name[0]) {
		log_buf_key(b, "logger");
		log_buf_quoted(b, log_name, strlen(log_name));
	}
	log_buf_key(b, "caller");
	log_buf_quoted(b, caller, strlen(caller));
	log_buf_key(b, "msg");
	log_buf_quoted(b, msg ? msg : "", msg ? strlen(msg) : 0);
}

void log_emit(enum log_level level, const char *file, int line, const char *msg,
	      const struct log_field *fields)
{
	char stack[2048];
	char caller[256];
	struct log_buf b = { .p = stack, .cap = sizeof(stack) };

	if (!log_enabled(level))
		return;
	snprintf(caller, sizeof(caller), "%s:%d", log_short_caller(file ? file : "?"), line);
	log_buf_head(&b, level, caller, msg);
	for (const struct log_field *f = fields; f && f->kind != LOG_KIND_END; f++)
		log_buf_field(&b, f);
	log_buf_raw(&b, "}\n", 2);

	if (b.failed) {
		/* Out of memory: say so in a line that fits on the stack. */
		if (b.heap)
			free(b.p);
		b = (struct log_buf){ .p = stack, .cap = sizeof(stack) };
		log_buf_head(&b, level, caller, "log line dropped: out of memory");
		log_buf_raw(&b, "}\n", 2);
	}
	log_write_all(b.p, b.len);
	if (b.heap)
		free(b.p);
}

/* Writes v's decimal digits backwards, ending before buf[w]; returns the
 * new start (Go's fmtInt). */
static size_t log_dur_int(char *buf, size_t w, uint64_t v)
{
	do {
		buf[--w] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return w;
}

/* Writes the prec lowest digits of *v backwards as a fraction with its
 * trailing zeros (and the point, if nothing is left) dropped, and takes
 * them off *v (Go's fmtFrac). */
static size_t log_dur_frac(char *buf, size_t w, uint64_t *v, int prec)
{
	bool print = false;
	for (int i = 0; i < prec; i++) {
		unsigned digit = (unsigned)(*v % 10);
		print = print || digit != 0;
		if (print)
			buf[--w] = (char)('0' + digit);
		*v /= 10;
	}
	if (print)
		buf[--w] = '.';
	return w;
}

void log_go_duration_text(int64_t ns, char out[32])
{
	char buf[32];
	size_t w = sizeof(buf);
	bool neg = ns < 0;
	uint64_t u = neg ? 0 - (uint64_t)ns : (uint64_t)ns;

	if (u == 0) {
		memcpy(out, "0s", 3);
		return;
	}
	buf[--w] = 's';
	if (u < 1000000000u) {
		int prec;
		if (u < 1000u) {
			prec = 0;
			buf[--w] = 'n';
		} else if (u < 1000000u) {
			prec = 3;
			buf[--w] = '\xb5'; /* U+00B5, the micro sign, as Go writes it */
			buf[--w] = '\xc2';
		} else {
			prec = 6;
			buf[--w] = 'm';
		}
		w = log_dur_frac(buf, w, &u, prec);
		w = log_dur_int(buf, w, u);
	} else {
		w = log_dur_frac(buf, w, &u, 9);
		w = log_dur_int(buf, w, u % 60);
		u /= 60;
		if (u > 0) {
			buf[--w] = 'm';
			w = log_dur_int(buf, w, u % 60);
			u /= 60;
			if (u > 0) {
				buf[--w] = 'h';
				w = log_dur_int(buf, w, u);
			}
		}
	}
	if (neg)
		buf[--w] = '-';
	memcpy(out, buf + w, sizeof(buf) - w);
	out[sizeof(buf) - w] = '\0';
}

void log_duration_text(uint64_t ms, char out[32])
{
	uint64_t max_ms = (uint64_t)INT64_MAX / 1000000u;
	log_go_duration_text((int64_t)((ms > max_ms ? max_ms : ms) * 1000000u), out);
}

void log_bytes_text(uint64_t n, char out[16])
{
	static const char *const units[] = { "B", "kB", "MB", "GB", "TB", "PB", "EB" };
	double v = (double)n;
	unsigned e = 0;

	if (n < 10) {
		snprintf(out, 16, "%llu B", (unsigned long long)n);
		return;
	}
	while (v >= 1000.0 && e + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1000.0;
		e++;
	}
	/* humanize rounds to a tenth first, then drops it from 10 up */
	v = (double)(uint64_t)(v * 10.0 + 0.5) / 10.0;
	snprintf(out, 16, v < 10.0 ? "%.1f %s" : "%.0f %s", v, units[e]);
}
