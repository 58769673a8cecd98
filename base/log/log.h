/* Structured logging: one JSON object per line, shaped like the lines of
 * etcd's zap logger, so that tools reading etcd's logs read cetcd's:
 *
 *   {"level":"info","ts":"2026-01-02T15:04:05.000+0100","logger":"gatewayd-0",
 *    "caller":"gatewayd/main.c:42","msg":"attached","slot":0,"generation":3}
 *
 * Usage: a message, then any number of typed fields built with the LOG_*
 * macros below. The compiler checks each field's type:
 *
 *   log_info("attached", LOG_U64("slot", ref.index), LOG_STR("role", "raftd"));
 *   log_warn("failed to bind", LOG_STR("address", addr), LOG_ERRNO(rc));
 *   log_error("region missing");
 *
 * Lines go to one file descriptor (stderr unless log_set_fd says otherwise)
 * with a single write(2) each, so lines of several processes sharing a pipe
 * interleave whole (for lines up to PIPE_BUF bytes). All functions are safe
 * to call from several threads; the level and name are process-wide.
 */
#ifndef CETCD_BASE_LOG_H
#define CETCD_BASE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* zap's levels, in increasing severity. */
enum log_level {
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_INFO,
	LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR,
	LOG_LEVEL_DPANIC,
	LOG_LEVEL_PANIC,
	LOG_LEVEL_FATAL,
};

enum log_kind {
	LOG_KIND_END = 0, /* terminates a field array */
	LOG_KIND_STR,     /* NUL-terminated string; NULL logs null */
	LOG_KIND_BYTES,   /* v.s with len bytes, any content */
	LOG_KIND_U64,
	LOG_KIND_I64,
	LOG_KIND_BOOL,
	LOG_KIND_F64,
	LOG_KIND_ERRNO,   /* v.i is a negative errno; logged as its text */
};

/* One key/value pair. key and string values are only read during the call. */
struct log_field {
	const char *key;
	enum log_kind kind;
	size_t len; /* LOG_KIND_BYTES only */
	union {
		const char *s;
		uint64_t u;
		int64_t i;
		bool b;
		double f;
	} v;
};

#define LOG_STR(k, x)      { .key = (k), .kind = LOG_KIND_STR, .v.s = (x) }
#define LOG_BYTES(k, p, n) { .key = (k), .kind = LOG_KIND_BYTES, .len = (n), .v.s = (const char *)(p) }
#define LOG_U64(k, x)      { .key = (k), .kind = LOG_KIND_U64, .v.u = (uint64_t)(x) }
#define LOG_I64(k, x)      { .key = (k), .kind = LOG_KIND_I64, .v.i = (int64_t)(x) }
#define LOG_BOOL(k, x)     { .key = (k), .kind = LOG_KIND_BOOL, .v.b = (x) }
#define LOG_F64(k, x)      { .key = (k), .kind = LOG_KIND_F64, .v.f = (double)(x) }
/* rc is a negative errno (the project's return convention); key "error".
 * (Not LOG_ERR: <syslog.h> has that name.) */
#define LOG_ERRNO(rc)      { .key = "error", .kind = LOG_KIND_ERRNO, .v.i = (int64_t)(rc) }

#define LOG_AT(lvl, msg, ...)                                                \
	do {                                                                 \
		if (log_enabled(lvl))                                        \
			log_emit((lvl), __FILE__, __LINE__, (msg),           \
				 (const struct log_field[]){                 \
					 __VA_ARGS__ __VA_OPT__(, ){ 0 } }); \
	} while (0)

#define log_debug(msg, ...) LOG_AT(LOG_LEVEL_DEBUG, msg __VA_OPT__(, ) __VA_ARGS__)
#define log_info(msg, ...)  LOG_AT(LOG_LEVEL_INFO, msg __VA_OPT__(, ) __VA_ARGS__)
#define log_warn(msg, ...)  LOG_AT(LOG_LEVEL_WARN, msg __VA_OPT__(, ) __VA_ARGS__)
#define log_error(msg, ...) LOG_AT(LOG_LEVEL_ERROR, msg __VA_OPT__(, ) __VA_ARGS__)

/* Writes one line if level is enabled. file is __FILE__; only its last two
 * path components are logged as the caller. fields ends with a zeroed
 * field (LOG_KIND_END). Never fails: if memory runs out, a shorter line
 * saying so is written instead. */
void log_emit(enum log_level level, const char *file, int line, const char *msg,
	      const struct log_field *fields);

/* Lines below level are dropped. Default: LOG_LEVEL_INFO. */
void log_set_level(enum log_level level);
enum log_level log_get_level(void);
bool log_enabled(enum log_level level);

/* Parses zap's level names (debug, info, warn, error, dpanic, panic,
 * fatal). Returns 0, or -EINVAL for any other text. */
int log_level_parse(const char *text, enum log_level *out);
/* The zap name of a level; a static string. */
const char *log_level_name(enum log_level level);

/* Where lines go; the caller keeps fd open while it is in use. Default 2. */
void log_set_fd(int fd);
/* Several destinations (--log-outputs): each line is written whole to
 * each of fds[0..n-1], 1 <= n <= LOG_MAX_FDS. Returns 0, or -EINVAL
 * (nothing changed). */
#define LOG_MAX_FDS 8
int log_set_fds(const int *fds, size_t n);

/* Logged as "logger" (zap's name key) on every line when not empty, so the
 * interleaved lines of a member's processes say which process wrote them.
 * Copied; at most 63 bytes are kept. NULL or "" removes it. */
void log_set_name(const char *name);

/* Appends s (len bytes) to dst as the inside of a JSON string, escaped as
 * zap escapes: quote, backslash and control bytes escaped, invalid UTF-8
 * replaced by U+FFFD, valid UTF-8 kept. Writes at most cap bytes and
 * returns the length the full escaping needs (like snprintf, without a
 * NUL), so a result above cap means dst was too small. */
size_t log_json_escape(char *dst, size_t cap, const char *s, size_t len);

/* Length of the valid multi-byte UTF-8 sequence at s (at most len bytes),
 * or 0 if the bytes there are not one (ASCII included): overlong forms,
 * surrogates and code points past U+10FFFF are invalid, as Go's
 * utf8.DecodeRune decides. */
size_t log_utf8_len(const unsigned char *s, size_t len);

/* A duration of ns nanoseconds as zap logs a Go time.Duration (Go's
 * Duration.String: "0s", "850ns", "12.5\u00b5s", "250.0125ms", "5.5s",
 * "1m30s", "2h0m0.000000001s"), NUL-terminated in out; 32 bytes hold the
 * longest. */
void log_go_duration_text(int64_t ns, char out[32]);

/* The same for a duration of ms milliseconds ("7s", "5.5s", "1m30s",
 * "250ms"). */
void log_duration_text(uint64_t ms, char out[32]);

/* A size of n bytes as etcd logs one (go-humanize's Bytes: powers of
 * 1000, "0 B", "999 B", "1.5 kB", "25 MB", "1.1 GB"), NUL-terminated. */
void log_bytes_text(uint64_t n, char out[16]);

#endif
