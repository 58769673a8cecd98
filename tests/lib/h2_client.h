/*
 * Test harness for gatewayd/transport/h2.c and gatewayd/transport/grpc.c: an in-process
 * nghttp2 CLIENT session talking to a server connection through memory,
 * no sockets. The server writes through a transport.h backend that keeps
 * the bytes in a buffer (optionally taking only so many per round, to
 * exercise partial writes); tc_pump moves bytes both ways until neither
 * side has anything to say.
 *
 * Also: a counting allocation hook (nghttp2_mem) that can fail the Nth
 * allocation, and recording of what the client sent, to seed the
 * tests/fuzz/corpus/h2/ corpus (set CETCD_H2_CORPUS_DIR).
 *
 * Header-only (static functions) so each test stays one source file.
 */
#ifndef CETCD_TESTS_TEST_H2_CLIENT_H
#define CETCD_TESTS_TEST_H2_CLIENT_H

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "shm_testlib.h"

#include "gatewayd/transport/grpc.h"
#include "gatewayd/transport/h2.h"
#include "gatewayd/transport/transport.h"

/* ---- counting allocation hook ---- */

struct tc_mem {
	nghttp2_mem mem;
	long live;    /* allocations not yet freed */
	long count;   /* allocations that could have failed */
	long fail_at; /* fail the allocation with this count (1-based); 0: never */
	long failed;  /* allocations refused */
	bool spare_lib; /* set by tc_pump around the server's recv and flush */
};

/* Whether code at address pc lies in libnghttp2. */
static inline bool tc_in_nghttp2(const void *pc)
{
	Dl_info info;
	return dladdr(pc, &info) && info.dli_fname && strstr(info.dli_fname, "libnghttp2");
}

/* Whether this allocation fails. Allocations nghttp2 makes for itself
 * inside nghttp2_session_mem_recv and nghttp2_session_send are spared:
 * nghttp2 1.52 can trip its own assertion when one of them fails
 * (nghttp2_outbound_item_free after a failed internal nghttp2_submit_data),
 * which is nghttp2's to fix. Everything cetcd allocates, and what nghttp2
 * allocates when cetcd calls it (submissions), can fail. */
static inline bool tc_mem_fail_now(struct tc_mem *m, const void *caller)
{
	if (m->spare_lib && tc_in_nghttp2(caller))
		return false;
	m->count++;
	if (m->fail_at > 0 && m->count == m->fail_at) {
		m->failed++;
		return true;
	}
	return false;
}

static inline void *tc_mem_alloc_from(struct tc_mem *m, size_t size, const void *caller)
{
	if (tc_mem_fail_now(m, caller))
		return NULL;
	void *p = malloc(size ? size : 1);
	if (p)
		m->live++;
	return p;
}

static inline void *tc_mem_malloc(size_t size, void *ud)
{
	return tc_mem_alloc_from(ud, size, __builtin_return_address(0));
}

static inline void tc_mem_free(void *p, void *ud)
{
	struct tc_mem *m = ud;
	if (!p)
		return;
	m->live--;
	free(p);
}

static inline void *tc_mem_calloc(size_t n, size_t size, void *ud)
{
	struct tc_mem *m = ud;
	if (tc_mem_fail_now(m, __builtin_return_address(0)))
		return NULL;
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (p)
		m->live++;
	return p;
}

static inline void *tc_mem_realloc(void *p, size_t size, void *ud)
{
	struct tc_mem *m = ud;
	const void *caller = __builtin_return_address(0);
	if (!p)
		return tc_mem_alloc_from(m, size, caller);
	if (tc_mem_fail_now(m, caller))
		return NULL;
	return realloc(p, size ? size : 1);
}

static inline void tc_mem_init(struct tc_mem *m)
{
	memset(m, 0, sizeof(*m));
	m->mem = (nghttp2_mem){
		.mem_user_data = m,
		.malloc = tc_mem_malloc,
		.free = tc_mem_free,
		.calloc = tc_mem_calloc,
		.realloc = tc_mem_realloc,
	};
}

/* ---- a transport into memory ---- */

struct tc_transport {
	struct transport t;
	uint8_t *buf; /* bytes written, not yet delivered to the client */
	size_t len, cap;
	size_t round_limit; /* bytes taken per round before -EAGAIN; 0: no limit */
	size_t round_taken;
	bool closed;
	size_t total; /* bytes written over the transport's life */
};

static inline ssize_t tc_transport_read(struct transport *t, void *buf, size_t len)
{
	(void)t;
	(void)buf;
	(void)len;
	t->want = TRANSPORT_WANT_READ;
	return -EAGAIN;
}

static inline ssize_t tc_transport_writev(struct transport *t, const struct iovec *iov, int iovcnt)
{
	struct tc_transport *tt = (struct tc_transport *)t;
	size_t n = 0;
	for (int i = 0; i < iovcnt; i++) {
		size_t take = iov[i].iov_len;
		if (tt->round_limit) {
			size_t room = tt->round_limit - tt->round_taken;
			take = take < room ? take : room;
		}
		if (take == 0)
			break;
		if (tt->len + take > tt->cap) {
			size_t cap = tt->cap ? tt->cap : 4096;
			while (cap < tt->len + take)
				cap *= 2;
			tt->buf = realloc(tt->buf, cap);
			CHECK(tt->buf != NULL);
			tt->cap = cap;
		}
		memcpy(tt->buf + tt->len, iov[i].iov_base, take);
		tt->len += take;
		tt->round_taken += take;
		tt->total += take;
		n += take;
		if (take < iov[i].iov_len)
			break;
	}
	if (n == 0) {
		t->want = TRANSPORT_WANT_WRITE;
		return -EAGAIN;
	}
	return (ssize_t)n;
}

static inline void tc_transport_close(struct transport *t)
{
	((struct tc_transport *)t)->closed = true;
}

static const struct transport_ops tc_transport_ops = {
	.read = tc_transport_read,
	.writev = tc_transport_writev,
	.close = tc_transport_close,
};

static inline void tc_transport_init(struct tc_transport *tt)
{
	memset(tt, 0, sizeof(*tt));
	tt->t.ops = &tc_transport_ops;
	tt->t.fd = -1;
}

static inline void tc_transport_fini(struct tc_transport *tt)
{
	free(tt->buf);
	tt->buf = NULL;
}

/* ---- the client ---- */

#define TC_MAX_STREAMS 256

struct tc_stream {
	int32_t id;           /* 0: not submitted */
	int http_status;      /* -1 until seen */
	int grpc_status;      /* -1 until seen */
	char grpc_message[2048]; /* decoded */
	char content_type[128];
	bool trailers_seen;   /* grpc-status came in a second HEADERS */
	bool closed;
	uint32_t close_code;
	uint8_t *data;        /* response body received */
	size_t data_len;
	/* request body: [off, len) still to send */
	uint8_t *body;
	size_t body_len, body_off, body_cap;
	bool body_end;        /* END_STREAM after the body */
	bool deferred;
};

struct tc_client {
	nghttp2_session *session;
	struct tc_stream st[TC_MAX_STREAMS];
	int nst;
	size_t chunk;         /* max request bytes per DATA frame; 0: as nghttp2 likes */
	int32_t goaway_last[4]; /* last_stream_id of each GOAWAY received */
	uint32_t goaway_code[4];
	int ngoaway;
	int pings_acked;      /* PING ACKs received */
	int pings_received;   /* PINGs the server sent (nghttp2 answers them) */
	bool hold;            /* keep server output from the client */
	uint8_t *sent;        /* everything the client sent (for the corpus) */
	size_t sent_len, sent_cap;
	int server_rc;        /* last error of h2_conn_recv, 0 if none */
};

static inline struct tc_stream *tc_stream_by_id(struct tc_client *tc, int32_t id)
{
	for (int i = 0; i < tc->nst; i++)
		if (tc->st[i].id == id)
			return &tc->st[i];
	return NULL;
}

static inline void tc_append(uint8_t **p, size_t *len, size_t *cap, const void *d, size_t n)
{
	if (*len + n > *cap) {
		size_t c = *cap ? *cap : 1024;
		while (c < *len + n)
			c *= 2;
		*p = realloc(*p, c);
		CHECK(*p != NULL);
		*cap = c;
	}
	if (n)
		memcpy(*p + *len, d, n);
	*len += n;
}

static inline int tc_on_header(nghttp2_session *session, const nghttp2_frame *frame,
			       const uint8_t *name, size_t namelen, const uint8_t *value,
			       size_t valuelen, uint8_t flags, void *user_data)
{
	struct tc_client *tc = user_data;
	(void)session;
	(void)flags;
	struct tc_stream *s = tc_stream_by_id(tc, frame->hd.stream_id);
	if (!s)
		return 0;
	bool trailers = frame->headers.cat == NGHTTP2_HCAT_HEADERS;
	if (namelen == 7 && memcmp(name, ":status", 7) == 0) {
		s->http_status = atoi((const char *)value);
	} else if (namelen == 12 && memcmp(name, "content-type", 12) == 0) {
		snprintf(s->content_type, sizeof(s->content_type), "%.*s", (int)valuelen, value);
	} else if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
		char v[16];
		snprintf(v, sizeof(v), "%.*s", (int)valuelen, value);
		s->grpc_status = atoi(v);
		s->trailers_seen = trailers;
	} else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
		size_t n = valuelen < sizeof(s->grpc_message) - 1 ? valuelen : sizeof(s->grpc_message) - 1;
		n = grpc_message_decode((const char *)value, n, s->grpc_message);
		s->grpc_message[n] = '\0';
	}
	return 0;
}

static inline int tc_on_data(nghttp2_session *session, uint8_t flags, int32_t stream_id,
			     const uint8_t *data, size_t len, void *user_data)
{
	struct tc_client *tc = user_data;
	(void)session;
	(void)flags;
	struct tc_stream *s = tc_stream_by_id(tc, stream_id);
	if (s) {
		size_t cap = s->data_len; /* grow exactly: simple, tests are small */
		uint8_t *p = realloc(s->data, cap + len);
		CHECK(p != NULL);
		memcpy(p + s->data_len, data, len);
		s->data = p;
		s->data_len += len;
	}
	return 0;
}

static inline int tc_on_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
			      void *user_data)
{
	struct tc_client *tc = user_data;
	(void)session;
	struct tc_stream *s = tc_stream_by_id(tc, stream_id);
	if (s) {
		s->closed = true;
		s->close_code = error_code;
	}
	return 0;
}

static inline int tc_on_frame(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct tc_client *tc = user_data;
	(void)session;
	if (frame->hd.type == NGHTTP2_GOAWAY && tc->ngoaway < 4) {
		tc->goaway_last[tc->ngoaway] = frame->goaway.last_stream_id;
		tc->goaway_code[tc->ngoaway] = frame->goaway.error_code;
		tc->ngoaway++;
	}
	if (frame->hd.type == NGHTTP2_PING && (frame->hd.flags & NGHTTP2_FLAG_ACK))
		tc->pings_acked++;
	else if (frame->hd.type == NGHTTP2_PING)
		tc->pings_received++;
	return 0;
}

static inline ssize_t tc_read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
				   size_t length, uint32_t *data_flags, nghttp2_data_source *source,
				   void *user_data)
{
	struct tc_client *tc = user_data;
	struct tc_stream *s = source->ptr;
	(void)session;
	(void)stream_id;
	size_t avail = s->body_len - s->body_off;
	if (avail == 0 && !s->body_end) {
		s->deferred = true;
		return NGHTTP2_ERR_DEFERRED;
	}
	size_t n = avail < length ? avail : length;
	if (tc->chunk && n > tc->chunk)
		n = tc->chunk;
	if (n)
		memcpy(buf, s->body + s->body_off, n);
	s->body_off += n;
	if (s->body_end && s->body_off == s->body_len)
		*data_flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

/* A client session; settings: the client's defaults (65535-byte windows)
 * unless window is nonzero. */
static inline void tc_init(struct tc_client *tc, uint32_t window)
{
	memset(tc, 0, sizeof(*tc));
	nghttp2_session_callbacks *cbs;
	CHECK_EQ(nghttp2_session_callbacks_new(&cbs), 0);
	nghttp2_session_callbacks_set_on_header_callback(cbs, tc_on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, tc_on_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, tc_on_close);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, tc_on_frame);
	CHECK_EQ(nghttp2_session_client_new(&tc->session, cbs, tc), 0);
	nghttp2_session_callbacks_del(cbs);
	nghttp2_settings_entry iv[1] = { { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE,
					   window ? window : 65535 } };
	CHECK_EQ(nghttp2_submit_settings(tc->session, NGHTTP2_FLAG_NONE, iv, 1), 0);
}

static inline void tc_fini(struct tc_client *tc)
{
	for (int i = 0; i < tc->nst; i++) {
		free(tc->st[i].data);
		free(tc->st[i].body);
	}
	free(tc->sent);
	nghttp2_session_del(tc->session);
}

/* Appends one gRPC message (prefix + payload) to s's request body; with
 * end, the body ends after it. flag is the prefix's compressed byte. */
static inline void tc_queue_message(struct tc_client *tc, struct tc_stream *s, uint8_t flag,
				    const void *msg, size_t len, bool end)
{
	uint8_t prefix[GRPC_PREFIX_LEN];
	grpc_prefix_write(prefix, false, (uint32_t)len);
	prefix[0] = flag;
	tc_append(&s->body, &s->body_len, &s->body_cap, prefix, sizeof(prefix));
	tc_append(&s->body, &s->body_len, &s->body_cap, msg, len);
	s->body_end = end;
	if (s->deferred && s->id > 0 && !s->closed) {
		s->deferred = false;
		CHECK_EQ(nghttp2_session_resume_data(tc->session, s->id), 0);
	}
}

/* Appends raw body bytes (no prefix added). */
static inline void tc_queue_raw(struct tc_client *tc, struct tc_stream *s, const void *p, size_t len,
				bool end)
{
	tc_append(&s->body, &s->body_len, &s->body_cap, p, len);
	s->body_end = end;
	if (s->deferred && s->id > 0 && !s->closed) {
		s->deferred = false;
		CHECK_EQ(nghttp2_session_resume_data(tc->session, s->id), 0);
	}
}

/* Ends s's request body after what is queued. */
static inline void tc_end(struct tc_client *tc, struct tc_stream *s)
{
	tc_queue_raw(tc, s, NULL, 0, true);
}

/* Starts a request on path with the usual gRPC headers, a content-type
 * (NULL: none) and extra header pairs (name, value, ..., NULL). The body
 * is whatever tc_queue_* adds; with no_body the HEADERS end the stream. */
static inline struct tc_stream *tc_request_v(struct tc_client *tc, const char *path,
					     const char *content_type, bool no_body, va_list ap)
{
	CHECK(tc->nst < TC_MAX_STREAMS);
	struct tc_stream *s = &tc->st[tc->nst++];
	memset(s, 0, sizeof(*s));
	s->http_status = -1;
	s->grpc_status = -1;
	nghttp2_nv nva[16];
	size_t n = 0;
#define TC_NV(nm, v) \
	(nghttp2_nv){ (uint8_t *)(nm), (uint8_t *)(v), strlen(nm), strlen(v), NGHTTP2_NV_FLAG_NONE }
	nva[n++] = TC_NV(":method", "POST");
	nva[n++] = TC_NV(":scheme", "http");
	nva[n++] = TC_NV(":path", path);
	nva[n++] = TC_NV(":authority", "localhost");
	if (content_type)
		nva[n++] = TC_NV("content-type", content_type);
	nva[n++] = TC_NV("te", "trailers");
	for (;;) {
		const char *name = va_arg(ap, const char *);
		if (!name)
			break;
		const char *value = va_arg(ap, const char *);
		CHECK(n < 16);
		nva[n++] = TC_NV(name, value);
	}
#undef TC_NV
	nghttp2_data_provider prd = { .source.ptr = s, .read_callback = tc_read_body };
	s->id = nghttp2_submit_request(tc->session, NULL, nva, n, no_body ? NULL : &prd, NULL);
	CHECK(s->id > 0);
	return s;
}

static inline struct tc_stream *tc_request(struct tc_client *tc, const char *path, ...)
{
	va_list ap;
	va_start(ap, path);
	struct tc_stream *s = tc_request_v(tc, path, "application/grpc", false, ap);
	va_end(ap);
	return s;
}

static inline struct tc_stream *tc_request_ct(struct tc_client *tc, const char *path, bool no_body,
					      const char *content_type, ...)
{
	va_list ap;
	va_start(ap, content_type);
	struct tc_stream *s = tc_request_v(tc, path, content_type, no_body, ap);
	va_end(ap);
	return s;
}

/* Moves bytes both ways until both sides are quiet. Server errors are
 * kept in tc->server_rc. mem, if not NULL, is the server's hook: its
 * spare_lib is set while the server runs nghttp2's recv and send. */
static inline void tc_pump_mem(struct tc_client *tc, struct h2_conn *conn, struct tc_transport *tt,
			       struct tc_mem *mem)
{
	for (int round = 0; round < 100000; round++) {
		bool progress = false;
		for (;;) {
			const uint8_t *d;
			ssize_t n = nghttp2_session_mem_send(tc->session, &d);
			CHECK(n >= 0);
			if (n == 0)
				break;
			tc_append(&tc->sent, &tc->sent_len, &tc->sent_cap, d, (size_t)n);
			progress = true;
			if (tc->server_rc == 0) {
				if (mem)
					mem->spare_lib = true;
				int rc = h2_conn_recv(conn, d, (size_t)n);
				if (mem)
					mem->spare_lib = false;
				if (rc < 0)
					tc->server_rc = rc;
			}
		}
		if (tc->server_rc == 0) {
			if (mem)
				mem->spare_lib = true;
			int rc = h2_conn_flush(conn, &tt->t);
			if (mem)
				mem->spare_lib = false;
			if (rc < 0 && rc != -EAGAIN)
				tc->server_rc = rc;
		}
		if (!tc->hold && tt->len > 0) {
			ssize_t n = nghttp2_session_mem_recv(tc->session, tt->buf, tt->len);
			CHECK_EQ(n, (ssize_t)tt->len);
			tt->len = 0;
			tt->round_taken = 0;
			progress = true;
		}
		if (!progress)
			return;
	}
	CHECK(!"tc_pump: the conversation does not settle");
}

static inline void tc_pump(struct tc_client *tc, struct h2_conn *conn, struct tc_transport *tt)
{
	tc_pump_mem(tc, conn, tt, NULL);
}

/* Writes what the client sent to $CETCD_H2_CORPUS_DIR/name, if set. */
static inline void tc_save_corpus(const struct tc_client *tc, const char *name)
{
	const char *dir = getenv("CETCD_H2_CORPUS_DIR");
	if (!dir)
		return;
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	CHECK(f != NULL);
	CHECK_EQ(fwrite(tc->sent, 1, tc->sent_len, f), tc->sent_len);
	fclose(f);
}

/* Resets the stream from the client side (RST_STREAM CANCEL). */
static inline void tc_cancel(struct tc_client *tc, struct tc_stream *s)
{
	CHECK_EQ(nghttp2_submit_rst_stream(tc->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL), 0);
}

/* The i-th gRPC message of s's response body (prefix checked), or NULL. */
static inline const uint8_t *tc_message(const struct tc_stream *s, int i, size_t *len)
{
	size_t off = 0;
	for (;;) {
		if (off + GRPC_PREFIX_LEN > s->data_len)
			return NULL;
		uint32_t n = grpc_prefix_len(s->data + off);
		CHECK_EQ(s->data[off], 0);
		CHECK(off + GRPC_PREFIX_LEN + n <= s->data_len);
		if (i-- == 0) {
			*len = n;
			return s->data + off + GRPC_PREFIX_LEN;
		}
		off += GRPC_PREFIX_LEN + n;
	}
}

/* How many whole messages s's response body holds. */
static inline int tc_message_count(const struct tc_stream *s)
{
	int n = 0;
	size_t len;
	while (tc_message(s, n, &len))
		n++;
	return n;
}

#endif
