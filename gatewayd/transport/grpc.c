/* gRPC server calls on top of h2 (see grpc.h). */
#include "gatewayd/transport/grpc.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/clock/clock.h"
#include "gatewayd/dlist.h"
#include "proto/registry.h"
#include "shm/metrics.h"

#define GRPC_NONE UINT32_MAX
/* Per-call buffers larger than this are freed when a call is pooled, so
 * the pool holds at most a few MiB however large past answers were. */
#define GRPC_KEEP_BYTES (16u * 1024u)
/* Client text quoted in an error message is cut to this many bytes. */
#define GRPC_QUOTE_MAX 200

enum grpc_call_state {
	GRPC_C_HEADERS, /* request headers arriving; no handler involved yet */
	GRPC_C_ACTIVE,  /* the handler has it */
	GRPC_C_DONE,    /* status queued or stream gone; waiting for stream_close */
};

/* One request metadata field, referenced in nghttp2's header buffers. */
struct grpc_md {
	nghttp2_rcbuf *name;
	nghttp2_rcbuf *value;
};

struct grpc_method_entry {
	char *path; /* owned, NUL-terminated: "/pkg.Service/Method" */
	size_t path_len;
	uint32_t hash;
	const ProtobufCMethodDescriptor *method; /* NULL outside the registry */
	const struct grpc_handler *handler;      /* NULL: UNIMPLEMENTED */
	void *arg;
	int32_t metric; /* its counters in srv->metrics->grpc, or -1 */
};

/* An id slot: a call is findable by id while it sits in its slot. */
struct grpc_slot {
	uint32_t gen;       /* bumped when the slot is freed; never 0 */
	uint32_t next_free; /* free list link, GRPC_NONE at the end */
	struct grpc_call *call;
};

/* The app side of one h2_conn. */
struct grpc_conn {
	struct grpc_server *srv;
	struct h2_conn *h2;
	size_t buffered; /* bytes of partial messages its calls hold */
};

struct grpc_call {
	struct h2_stream st; /* the HTTP/2 side; h2 hands back &call->st */
	struct grpc_conn *conn;
	enum grpc_call_state state;
	uint32_t slot;       /* id slot while ACTIVE, else GRPC_NONE */
	uint32_t gen;        /* the slot's generation when taken */
	uint32_t entry;      /* index in srv->entries, GRPC_NONE before dispatch */
	nghttp2_rcbuf *path; /* :path, referenced */
	nghttp2_rcbuf *method; /* :method, referenced */
	struct grpc_md *md;  /* regular header fields, md[0..nmd) referenced */
	uint32_t nmd, md_cap;
	int64_t deadline_ns; /* INT64_MAX: none */
	uint32_t heap_idx;   /* position in srv->heap, GRPC_NONE if not there */
	uint8_t prefix[GRPC_PREFIX_LEN]; /* the current message's prefix */
	uint8_t prefix_len;  /* bytes of it received; 5 = inside the body */
	struct h2_buf in;    /* body bytes of a message spread over DATA frames */
	uint64_t send_left;  /* bytes of a response message begun with
			      * grpc_call_send_begin still to come */
	uint64_t handler_state[GRPC_CALL_STATE_BYTES / 8]; /* grpc_call_state */
	int64_t started_ns;  /* when dispatched, if handling times are kept */
	struct dlist tag;    /* in srv->tagged while tagged (grpc_call_tag) */
	bool tagged;
	struct grpc_call *next_free; /* pool link */
};

struct grpc_server {
	struct grpc_server_config cfg;
	const nghttp2_mem *mem;
	struct h2_ctx *h2;
	struct grpc_method_entry *entries;
	uint32_t nentries, entries_cap;
	uint32_t *table; /* open addressing over entries: index + 1, 0 empty */
	uint32_t table_cap; /* power of two, > 2 * nentries */
	struct grpc_slot *slots;
	uint32_t nslots, free_slot;
	struct grpc_call **heap; /* min-heap of deadlines */
	uint32_t heap_len, heap_cap;
	struct grpc_call *pool; /* idle call objects */
	uint32_t pool_len;
	uint32_t ncalls; /* call objects handed to streams and not released */
	/* go-grpc-prometheus's counters (grpc_server_set_metrics), or NULL */
	struct shm_metrics *metrics;
	int (*metric_of)(const char *path);
	bool handling_hist;
	/* the admission check (grpc_server_set_admit), or NULL */
	enum grpc_status (*admit)(void *arg, struct grpc_call *call, const char *path,
				  const char **message);
	void *admit_arg;
	struct dlist tagged; /* the calls grpc_call_tag marked, while live */
	uint32_t ntagged;
};

static const uint8_t grpc_empty[1];

static struct grpc_call *grpc_call_of(struct h2_stream *s)
{
	return (struct grpc_call *)((char *)s - offsetof(struct grpc_call, st));
}

static struct grpc_server *grpc_call_srv(const struct grpc_call *call)
{
	return call->conn->srv;
}

static void *grpc_alloc(const nghttp2_mem *mem, size_t size)
{
	return mem->calloc(1, size, mem->mem_user_data);
}

static void grpc_dealloc(const nghttp2_mem *mem, void *p)
{
	mem->free(p, mem->mem_user_data);
}

/* Grows an array of elem-byte items to hold at least need; *cap follows. */
static int grpc_grow(const nghttp2_mem *mem, void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint32_t n = *cap ? *cap : 8;
	while (n < need) {
		if (n > UINT32_MAX / 2)
			return -ENOMEM;
		n *= 2;
	}
	void *p = mem->realloc(*arr, (size_t)n * elem, mem->mem_user_data);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = n;
	return 0;
}

static int64_t grpc_clock_monotonic(void *arg)
{
	(void)arg;
	return clock_now_ns();
}

static int64_t grpc_now(const struct grpc_server *srv)
{
	return srv->cfg.now_ns(srv->cfg.clock_arg);
}

/* Whether rb holds the n bytes at s. */
static bool grpc_rcbuf_eq(nghttp2_rcbuf *rb, const char *s, size_t n)
{
	nghttp2_vec v = nghttp2_rcbuf_get_buf(rb);
	return v.len == n && memcmp(v.base, s, n) == 0;
}

static bool grpc_rcbuf_is(nghttp2_rcbuf *rb, const char *s)
{
	return grpc_rcbuf_eq(rb, s, strlen(s));
}

/* ---- method table ---- */

static uint32_t grpc_hash(const uint8_t *s, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < len; i++) {
		h ^= s[i];
		h *= 16777619u;
	}
	return h;
}

static uint32_t grpc_entry_lookup(const struct grpc_server *srv, const uint8_t *path, size_t len)
{
	if (srv->table_cap == 0)
		return GRPC_NONE;
	uint32_t h = grpc_hash(path, len);
	uint32_t mask = srv->table_cap - 1;
	for (uint32_t i = h & mask;; i = (i + 1) & mask) {
		uint32_t v = srv->table[i];
		if (v == 0)
			return GRPC_NONE;
		const struct grpc_method_entry *e = &srv->entries[v - 1];
		if (e->hash == h && e->path_len == len && memcmp(e->path, path, len) == 0)
			return v - 1;
	}
}

static int grpc_table_rebuild(struct grpc_server *srv, uint32_t cap)
{
	uint32_t *t = grpc_alloc(srv->mem, (size_t)cap * sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (uint32_t e = 0; e < srv->nentries; e++) {
		uint32_t i = srv->entries[e].hash & (cap - 1);
		while (t[i] != 0)
			i = (i + 1) & (cap - 1);
		t[i] = e + 1;
	}
	if (srv->table)
		grpc_dealloc(srv->mem, srv->table);
	srv->table = t;
	srv->table_cap = cap;
	return 0;
}

/* Adds path (len bytes) to the table and returns its index, or GRPC_NONE
 * for lack of memory. */
static uint32_t grpc_entry_add(struct grpc_server *srv, const char *path, size_t len,
			       const ProtobufCMethodDescriptor *method)
{
	if (grpc_grow(srv->mem, (void **)&srv->entries, &srv->entries_cap, srv->nentries + 1,
		      sizeof(*srv->entries)) < 0)
		return GRPC_NONE;
	if ((uint64_t)(srv->nentries + 1) * 2 >= srv->table_cap) {
		uint32_t cap = srv->table_cap ? srv->table_cap * 2 : 64;
		if (grpc_table_rebuild(srv, cap) < 0)
			return GRPC_NONE;
	}
	char *copy = srv->mem->malloc(len + 1, srv->mem->mem_user_data);
	if (!copy)
		return GRPC_NONE;
	memcpy(copy, path, len);
	copy[len] = '\0';
	uint32_t idx = srv->nentries++;
	struct grpc_method_entry *e = &srv->entries[idx];
	*e = (struct grpc_method_entry){
		.path = copy,
		.path_len = len,
		.hash = grpc_hash((const uint8_t *)path, len),
		.method = method,
		.metric = srv->metric_of ? srv->metric_of(copy) : -1,
	};
	uint32_t i = e->hash & (srv->table_cap - 1);
	while (srv->table[i] != 0)
		i = (i + 1) & (srv->table_cap - 1);
	srv->table[i] = idx + 1;
	return idx;
}

/* Whether any known path belongs to service (len bytes, no slashes). */
static bool grpc_service_known(const struct grpc_server *srv, const uint8_t *service, size_t len)
{
	for (uint32_t e = 0; e < srv->nentries; e++) {
		const struct grpc_method_entry *m = &srv->entries[e];
		if (m->path_len > len + 2 && memcmp(m->path + 1, service, len) == 0 &&
		    m->path[len + 1] == '/')
			return true;
	}
	return false;
}

/* ---- id slots ---- */

static int grpc_slot_take(struct grpc_server *srv, struct grpc_call *call)
{
	if (srv->free_slot == GRPC_NONE) {
		uint32_t old = srv->nslots;
		uint32_t cap = old;
		if (grpc_grow(srv->mem, (void **)&srv->slots, &cap, old + 1, sizeof(*srv->slots)) < 0)
			return -ENOMEM;
		/* New slots join the free list, lowest index first. */
		for (uint32_t i = cap; i-- > old;) {
			srv->slots[i] = (struct grpc_slot){ .gen = 1, .next_free = srv->free_slot };
			srv->free_slot = i;
		}
		srv->nslots = cap;
	}
	uint32_t i = srv->free_slot;
	srv->free_slot = srv->slots[i].next_free;
	srv->slots[i].call = call;
	call->slot = i;
	call->gen = srv->slots[i].gen;
	return 0;
}

static void grpc_slot_put(struct grpc_server *srv, struct grpc_call *call)
{
	struct grpc_slot *sl = &srv->slots[call->slot];
	sl->call = NULL;
	sl->gen = sl->gen == UINT32_MAX ? 1 : sl->gen + 1;
	sl->next_free = srv->free_slot;
	srv->free_slot = call->slot;
	call->slot = GRPC_NONE;
}

/* ---- deadline heap ---- */

static void grpc_heap_set(struct grpc_server *srv, uint32_t i, struct grpc_call *call)
{
	srv->heap[i] = call;
	call->heap_idx = i;
}

static void grpc_heap_up(struct grpc_server *srv, uint32_t i)
{
	struct grpc_call *call = srv->heap[i];
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;
		if (srv->heap[parent]->deadline_ns <= call->deadline_ns)
			break;
		grpc_heap_set(srv, i, srv->heap[parent]);
		i = parent;
	}
	grpc_heap_set(srv, i, call);
}

static void grpc_heap_down(struct grpc_server *srv, uint32_t i)
{
	struct grpc_call *call = srv->heap[i];
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		int64_t best = call->deadline_ns;
		if (l < srv->heap_len && srv->heap[l]->deadline_ns < best) {
			m = l;
			best = srv->heap[l]->deadline_ns;
		}
		if (r < srv->heap_len && srv->heap[r]->deadline_ns < best)
			m = r;
		if (m == i)
			break;
		grpc_heap_set(srv, i, srv->heap[m]);
		i = m;
	}
	grpc_heap_set(srv, i, call);
}

static int grpc_heap_add(struct grpc_server *srv, struct grpc_call *call)
{
	if (grpc_grow(srv->mem, (void **)&srv->heap, &srv->heap_cap, srv->heap_len + 1,
		      sizeof(*srv->heap)) < 0)
		return -ENOMEM;
	grpc_heap_set(srv, srv->heap_len++, call);
	grpc_heap_up(srv, call->heap_idx);
	return 0;
}

static void grpc_heap_remove(struct grpc_server *srv, struct grpc_call *call)
{
	uint32_t i = call->heap_idx;
	call->heap_idx = GRPC_NONE;
	struct grpc_call *last = srv->heap[--srv->heap_len];
	if (i == srv->heap_len)
		return;
	grpc_heap_set(srv, i, last);
	grpc_heap_up(srv, i);
	grpc_heap_down(srv, last->heap_idx);
}

/* ---- call objects ---- */

static struct grpc_call *grpc_call_alloc(struct grpc_conn *conn)
{
	struct grpc_server *srv = conn->srv;
	struct grpc_call *call = srv->pool;
	if (call) {
		srv->pool = call->next_free;
		srv->pool_len--;
	} else {
		call = grpc_alloc(srv->mem, sizeof(*call));
		if (!call)
			return NULL;
	}
	call->conn = conn;
	call->state = GRPC_C_HEADERS;
	call->slot = GRPC_NONE;
	call->gen = 0;
	call->entry = GRPC_NONE;
	call->path = call->method = NULL;
	call->nmd = 0;
	call->deadline_ns = INT64_MAX;
	call->heap_idx = GRPC_NONE;
	call->tagged = false;
	call->prefix_len = 0;
	call->in.len = 0;
	call->send_left = 0;
	memset(call->handler_state, 0, sizeof(call->handler_state));
	call->next_free = NULL;
	srv->ncalls++;
	return call;
}

static void grpc_call_destroy(const nghttp2_mem *mem, struct grpc_call *call)
{
	h2_stream_destroy(&call->st, mem);
	h2_buf_free(&call->in, mem);
	if (call->md)
		grpc_dealloc(mem, call->md);
	grpc_dealloc(mem, call);
}

/* Drops a finished call's references and pools (or frees) the object. */
static void grpc_call_release(struct grpc_call *call)
{
	struct grpc_server *srv = grpc_call_srv(call);
	const nghttp2_mem *mem = srv->mem;
	if (call->path)
		nghttp2_rcbuf_decref(call->path);
	if (call->method)
		nghttp2_rcbuf_decref(call->method);
	for (uint32_t i = 0; i < call->nmd; i++) {
		nghttp2_rcbuf_decref(call->md[i].name);
		nghttp2_rcbuf_decref(call->md[i].value);
	}
	call->nmd = 0;
	call->path = call->method = NULL;
	call->conn->buffered -= call->in.len;
	srv->ncalls--;
	if (srv->pool_len >= srv->cfg.call_pool_keep) {
		grpc_call_destroy(mem, call);
		return;
	}
	h2_stream_recycle(&call->st, mem, GRPC_KEEP_BYTES);
	if (call->in.cap > GRPC_KEEP_BYTES)
		h2_buf_free(&call->in, mem);
	call->in.len = 0;
	call->conn = NULL;
	call->next_free = srv->pool;
	srv->pool = call;
	srv->pool_len++;
}

/* The handler is done with the call (finished, cancelled or failed): the
 * id dies, the deadline goes, partial input is dropped. */
/* The method's counters of a dispatched call, or NULL. */
static struct shm_metrics_grpc *grpc_call_counters(const struct grpc_call *call)
{
	struct grpc_server *srv = grpc_call_srv(call);
	if (!srv->metrics || call->entry == GRPC_NONE || srv->entries[call->entry].metric < 0)
		return NULL;
	return &srv->metrics->grpc[srv->entries[call->entry].metric];
}

/* Counts a dispatched call's end with code, as go-grpc-prometheus's
 * interceptors count a handler's return. */
static void grpc_call_count_end(struct grpc_call *call, enum grpc_status code)
{
	struct shm_metrics_grpc *g = grpc_call_counters(call);
	if (!g)
		return;
	shm_metric_bump(&g->handled[(unsigned)code < SHM_GRPC_CODES ? code : GRPC_STATUS_UNKNOWN], 1);
	struct grpc_server *srv = grpc_call_srv(call);
	if (srv->handling_hist)
		shm_metrics_observe(&srv->metrics->grpc_handling[g - srv->metrics->grpc],
				    SHM_H_GRPC_HANDLING, (uint64_t)(grpc_now(srv) - call->started_ns));
}

static void grpc_call_retire(struct grpc_call *call)
{
	struct grpc_server *srv = grpc_call_srv(call);
	if (call->slot != GRPC_NONE)
		grpc_slot_put(srv, call);
	if (call->heap_idx != GRPC_NONE)
		grpc_heap_remove(srv, call);
	if (call->tagged) {
		dlist_remove(&call->tag);
		call->tagged = false;
		srv->ntagged--;
	}
	call->conn->buffered -= call->in.len;
	call->in.len = 0;
	call->prefix_len = 0;
	call->state = GRPC_C_DONE;
}

static const struct grpc_handler *grpc_call_handler(const struct grpc_call *call)
{
	if (call->entry == GRPC_NONE)
		return NULL;
	return grpc_call_srv(call)->entries[call->entry].handler;
}

/* ---- responses ---- */

#define GRPC_NV_STATIC(n, v)                                                              \
	{                                                                                 \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, sizeof(v) - 1,             \
			NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE      \
	}

static nghttp2_nv grpc_nv(const char *name, const char *value, size_t value_len)
{
	return (nghttp2_nv){ (uint8_t *)name, (uint8_t *)value, strlen(name), value_len,
			     NGHTTP2_NV_FLAG_NO_COPY_NAME };
}

static int grpc_call_respond_headers(struct grpc_call *call)
{
	static const nghttp2_nv nva[] = {
		GRPC_NV_STATIC(":status", "200"),
		GRPC_NV_STATIC("content-type", "application/grpc"),
	};
	return h2_stream_respond(&call->st, nva, 2, false);
}

/* Sends the status: as trailers after a started response, else as a
 * trailers-only response with HTTP status http_status. A failure, or a
 * message begun and not complete, resets the stream instead (the client
 * sees the stream end either way). */
static void grpc_call_send_status(struct grpc_call *call, unsigned http_status, enum grpc_status code,
				  const char *message)
{
	char status[12], http[8];
	char enc[GRPC_MESSAGE_MAX * 3];
	size_t msg_len = message ? strnlen(message, GRPC_MESSAGE_MAX) : 0;
	size_t enc_len = grpc_message_encode(message ? message : "", msg_len, enc, sizeof(enc));
	nghttp2_nv nva[4];
	size_t n = 0;
	int rc;

	if (call->send_left) {
		/* a message cut short (grpc_call_send_begin): trailers after it
		 * would let the client take the part it got for the whole */
		call->send_left = 0;
		(void)h2_stream_reset(&call->st, NGHTTP2_INTERNAL_ERROR);
		return;
	}
	snprintf(status, sizeof(status), "%u", (unsigned)code);
	if (!h2_stream_responded(&call->st)) {
		snprintf(http, sizeof(http), "%u", http_status);
		nva[n++] = grpc_nv(":status", http, strlen(http));
		nva[n++] = (nghttp2_nv)GRPC_NV_STATIC("content-type", "application/grpc");
	}
	nva[n++] = grpc_nv("grpc-status", status, strlen(status));
	if (enc_len > 0)
		nva[n++] = grpc_nv("grpc-message", enc, enc_len);
	if (!h2_stream_responded(&call->st))
		rc = h2_stream_respond(&call->st, nva, n, true);
	else
		rc = h2_stream_end(&call->st, nva, n);
	if (rc < 0)
		(void)h2_stream_reset(&call->st, NGHTTP2_INTERNAL_ERROR);
}

/* Ends a call the server refuses or gives up on: status to the client,
 * and on_cancel to a handler that had it. */
static void grpc_call_abort(struct grpc_call *call, enum grpc_status code, const char *message,
			    enum grpc_cancel_reason why)
{
	if (call->state == GRPC_C_DONE)
		return;
	bool had_handler = call->state == GRPC_C_ACTIVE;
	if (had_handler)
		grpc_call_count_end(call, code);
	grpc_call_retire(call);
	grpc_call_send_status(call, 200, code, message);
	const struct grpc_handler *h = grpc_call_handler(call);
	if (had_handler && h && h->on_cancel)
		h->on_cancel(call, why);
}

/* ---- the h2 app ---- */

static struct h2_stream *grpc_on_stream_open(void *app, struct h2_conn *c, int32_t stream_id)
{
	struct grpc_conn *conn = app;
	(void)c;
	(void)stream_id;
	struct grpc_call *call = grpc_call_alloc(conn);
	return call ? &call->st : NULL;
}

static int grpc_on_header(struct h2_stream *s, nghttp2_rcbuf *name, nghttp2_rcbuf *value)
{
	struct grpc_call *call = grpc_call_of(s);
	nghttp2_vec n = nghttp2_rcbuf_get_buf(name);
	if (n.len > 0 && n.base[0] == ':') {
		nghttp2_rcbuf **slot = NULL;
		if (grpc_rcbuf_is(name, ":path"))
			slot = &call->path;
		else if (grpc_rcbuf_is(name, ":method"))
			slot = &call->method;
		if (slot && !*slot) {
			nghttp2_rcbuf_incref(value);
			*slot = value;
		}
		return 0;
	}
	const nghttp2_mem *mem = grpc_call_srv(call)->mem;
	if (grpc_grow(mem, (void **)&call->md, &call->md_cap, call->nmd + 1, sizeof(*call->md)) < 0)
		return -ENOMEM;
	nghttp2_rcbuf_incref(name);
	nghttp2_rcbuf_incref(value);
	call->md[call->nmd++] = (struct grpc_md){ name, value };
	return 0;
}

static const uint8_t *grpc_md_find(const struct grpc_call *call, const char *name, size_t *len)
{
	size_t n = strlen(name);

	for (uint32_t i = 0; i < call->nmd; i++) {
		if (grpc_rcbuf_eq(call->md[i].name, name, n)) {
			nghttp2_vec v = nghttp2_rcbuf_get_buf(call->md[i].value);
			*len = v.len;
			return v.len ? v.base : grpc_empty;
		}
	}
	*len = 0;
	return NULL;
}

/* Answers a request whose path names no handler, with grpc-go's words. */
static void grpc_refuse_path(struct grpc_call *call, const uint8_t *path, size_t len)
{
	struct grpc_server *srv = grpc_call_srv(call);
	char msg[GRPC_MESSAGE_MAX];
	const uint8_t *sm = path;
	size_t sm_len = len;
	if (sm_len > 0 && sm[0] == '/') {
		sm++;
		sm_len--;
	}
	const uint8_t *slash = NULL;
	for (size_t i = sm_len; i-- > 0;) {
		if (sm[i] == '/') {
			slash = sm + i;
			break;
		}
	}
	if (!slash) {
		char q[GRPC_QUOTE_MAX * 4 + 8];
		grpc_quote(q, sizeof(q), path, len, GRPC_QUOTE_MAX);
		snprintf(msg, sizeof(msg), "malformed method name: %s", q);
	} else {
		size_t svc_len = (size_t)(slash - sm);
		int sl = (int)(svc_len < GRPC_QUOTE_MAX ? svc_len : GRPC_QUOTE_MAX);
		size_t m_len = sm_len - svc_len - 1;
		int ml = (int)(m_len < GRPC_QUOTE_MAX ? m_len : GRPC_QUOTE_MAX);
		if (!grpc_service_known(srv, sm, svc_len))
			snprintf(msg, sizeof(msg), "unknown service %.*s", sl, (const char *)sm);
		else
			snprintf(msg, sizeof(msg), "unknown method %.*s for service %.*s", ml,
				 (const char *)slash + 1, sl, (const char *)sm);
	}
	grpc_call_abort(call, GRPC_STATUS_UNIMPLEMENTED, msg, GRPC_CANCEL_BAD_MESSAGE);
}

/* Checks the request headers and hands the call to its handler. */
static void grpc_on_request(struct h2_stream *s, uint32_t flags)
{
	struct grpc_call *call = grpc_call_of(s);
	struct grpc_server *srv = grpc_call_srv(call);
	char msg[GRPC_MESSAGE_MAX];
	char q[GRPC_QUOTE_MAX * 4 + 8];
	const uint8_t *v;
	size_t vlen;

	if (flags & H2_REQ_HEADERS_TOO_LARGE) {
		snprintf(msg, sizeof(msg), "grpc: request header list larger than max (%u bytes)",
			 h2_conn_config(call->conn->h2)->max_header_list_bytes);
		grpc_call_abort(call, GRPC_STATUS_RESOURCE_EXHAUSTED, msg, GRPC_CANCEL_BAD_MESSAGE);
		return;
	}
	v = grpc_md_find(call, "content-type", &vlen);
	if (!v || !grpc_content_type_ok(v, vlen)) {
		grpc_quote(q, sizeof(q), v ? v : grpc_empty, vlen, GRPC_QUOTE_MAX);
		snprintf(msg, sizeof(msg), "invalid gRPC request content-type %s", q);
		grpc_call_retire(call);
		grpc_call_send_status(call, 415, GRPC_STATUS_INVALID_ARGUMENT, msg);
		return;
	}
	if (!call->method || !grpc_rcbuf_is(call->method, "POST")) {
		grpc_call_retire(call);
		(void)h2_stream_reset(s, NGHTTP2_PROTOCOL_ERROR);
		return;
	}
	int64_t timeout_ns = -1;
	v = grpc_md_find(call, "grpc-timeout", &vlen);
	if (v && grpc_timeout_parse(v, vlen, &timeout_ns) < 0) {
		grpc_quote(q, sizeof(q), v, vlen, GRPC_QUOTE_MAX);
		snprintf(msg, sizeof(msg), "malformed grpc-timeout: %s", q);
		grpc_call_abort(call, GRPC_STATUS_INTERNAL, msg, GRPC_CANCEL_BAD_MESSAGE);
		return;
	}
	nghttp2_vec path = call->path ? nghttp2_rcbuf_get_buf(call->path) : (nghttp2_vec){ NULL, 0 };
	uint32_t e = path.len ? grpc_entry_lookup(srv, path.base, path.len) : GRPC_NONE;
	if (e == GRPC_NONE || !srv->entries[e].handler) {
		grpc_refuse_path(call, path.len ? path.base : grpc_empty, path.len);
		return;
	}
	v = grpc_md_find(call, "grpc-encoding", &vlen);
	if (v && !(vlen == 8 && memcmp(v, "identity", 8) == 0)) {
		grpc_quote(q, sizeof(q), v, vlen, GRPC_QUOTE_MAX);
		snprintf(msg, sizeof(msg), "grpc: Decompressor is not installed for grpc-encoding %s", q);
		grpc_call_abort(call, GRPC_STATUS_UNIMPLEMENTED, msg, GRPC_CANCEL_BAD_MESSAGE);
		return;
	}
	if (srv->admit) {
		const char *refusal = NULL;
		enum grpc_status code = srv->admit(srv->admit_arg, call, srv->entries[e].path,
						   &refusal);
		if (code != GRPC_STATUS_OK) {
			grpc_call_abort(call, code, refusal, GRPC_CANCEL_BAD_MESSAGE);
			return;
		}
	}

	if (grpc_slot_take(srv, call) < 0)
		goto out_no_memory;
	if (timeout_ns >= 0) {
		int64_t now = grpc_now(srv);
		call->deadline_ns = timeout_ns > INT64_MAX - now ? INT64_MAX : now + timeout_ns;
		if (grpc_heap_add(srv, call) < 0)
			goto out_no_memory;
	}
	call->entry = e;
	call->state = GRPC_C_ACTIVE;
	struct shm_metrics_grpc *g = grpc_call_counters(call);
	if (g) {
		shm_metric_bump(&g->started, 1);
		if (srv->handling_hist)
			call->started_ns = grpc_now(srv);
	}
	const struct grpc_handler *h = srv->entries[e].handler;
	if (h->on_call_start)
		h->on_call_start(call);
	if ((flags & H2_REQ_END_STREAM) && call->state == GRPC_C_ACTIVE && h->on_half_close)
		h->on_half_close(call);
	return;

out_no_memory:
	grpc_call_abort(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "cetcd: gateway out of memory",
			GRPC_CANCEL_BAD_MESSAGE);
}

static void grpc_deliver(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	const struct grpc_handler *h = grpc_call_handler(call);
	struct shm_metrics_grpc *g = grpc_call_counters(call);
	if (g) {
		shm_metric_bump(&g->msg_received, 1);
		shm_metric_add(grpc_call_srv(call)->metrics, SHM_M_GRPC_RECEIVED_BYTES, len);
	}
	if (h->on_message)
		h->on_message(call, len ? msg : grpc_empty, len);
}

/* A message prefix is complete: refuses what grpc-go refuses. Returns
 * false when the call was ended. */
static bool grpc_check_prefix(struct grpc_call *call)
{
	struct grpc_server *srv = grpc_call_srv(call);
	char msg[128];
	uint32_t len = grpc_prefix_len(call->prefix);
	if (len > srv->cfg.max_recv_message_bytes) {
		snprintf(msg, sizeof(msg), "grpc: received message larger than max (%u vs. %zu)", len,
			 srv->cfg.max_recv_message_bytes);
		grpc_call_abort(call, GRPC_STATUS_RESOURCE_EXHAUSTED, msg, GRPC_CANCEL_BAD_MESSAGE);
		return false;
	}
	if (call->prefix[0] == 1) {
		/* A non-identity grpc-encoding was refused at the start, so
		 * the flag can only come with identity or none. */
		grpc_call_abort(call, GRPC_STATUS_INTERNAL,
				"grpc: compressed flag set with identity or empty encoding",
				GRPC_CANCEL_BAD_MESSAGE);
		return false;
	}
	if (call->prefix[0] != 0) {
		snprintf(msg, sizeof(msg), "grpc: received unexpected payload format %u",
			 call->prefix[0]);
		grpc_call_abort(call, GRPC_STATUS_INTERNAL, msg, GRPC_CANCEL_BAD_MESSAGE);
		return false;
	}
	return true;
}

/* Splits request body bytes into messages: a message whole in this chunk
 * goes to the handler in place; one spread over frames is gathered in
 * call->in first. */
static void grpc_on_data(struct h2_stream *s, const uint8_t *data, size_t len)
{
	struct grpc_call *call = grpc_call_of(s);
	struct grpc_conn *conn = call->conn;
	struct grpc_server *srv = conn->srv;

	while (len > 0 && call->state == GRPC_C_ACTIVE) {
		if (call->prefix_len < GRPC_PREFIX_LEN) {
			size_t n = GRPC_PREFIX_LEN - call->prefix_len;
			n = n < len ? n : len;
			memcpy(call->prefix + call->prefix_len, data, n);
			call->prefix_len += (uint8_t)n;
			data += n;
			len -= n;
			if (call->prefix_len < GRPC_PREFIX_LEN || !grpc_check_prefix(call))
				break;
			if (grpc_prefix_len(call->prefix) == 0) {
				call->prefix_len = 0;
				grpc_deliver(call, grpc_empty, 0);
			}
			continue;
		}
		size_t msg_len = grpc_prefix_len(call->prefix);
		if (call->in.len == 0 && len >= msg_len) {
			call->prefix_len = 0;
			grpc_deliver(call, data, msg_len);
			data += msg_len;
			len -= msg_len;
			continue;
		}
		size_t take = msg_len - call->in.len;
		take = take < len ? take : len;
		if (take > srv->cfg.max_conn_buffered_bytes - conn->buffered) {
			char msg[160];
			snprintf(msg, sizeof(msg),
				 "grpc: too many partial messages on this connection (limit %zu bytes)",
				 srv->cfg.max_conn_buffered_bytes);
			grpc_call_abort(call, GRPC_STATUS_RESOURCE_EXHAUSTED, msg,
					GRPC_CANCEL_BAD_MESSAGE);
			break;
		}
		if (h2_buf_append(&call->in, srv->mem, data, take) < 0) {
			grpc_call_abort(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
					"cetcd: gateway out of memory", GRPC_CANCEL_BAD_MESSAGE);
			break;
		}
		conn->buffered += take;
		data += take;
		len -= take;
		if (call->in.len == msg_len) {
			/* The buffer stays valid through the callback: the call
			 * cannot be released inside it. */
			conn->buffered -= msg_len;
			call->in.len = 0;
			call->prefix_len = 0;
			grpc_deliver(call, call->in.data, msg_len);
		}
	}
}

static void grpc_on_remote_end(struct h2_stream *s)
{
	struct grpc_call *call = grpc_call_of(s);
	if (call->state != GRPC_C_ACTIVE)
		return;
	if (call->prefix_len > 0) {
		grpc_call_abort(call, GRPC_STATUS_INTERNAL,
				"grpc: the request stream ended inside a message",
				GRPC_CANCEL_BAD_MESSAGE);
		return;
	}
	const struct grpc_handler *h = grpc_call_handler(call);
	if (h->on_half_close)
		h->on_half_close(call);
}

static void grpc_on_stream_close(struct h2_stream *s, uint32_t error_code)
{
	struct grpc_call *call = grpc_call_of(s);
	if (call->state == GRPC_C_ACTIVE) {
		grpc_call_count_end(call, GRPC_STATUS_CANCELLED);
		grpc_call_retire(call);
		const struct grpc_handler *h = grpc_call_handler(call);
		if (h->on_cancel)
			h->on_cancel(call, error_code == H2_CONN_CLOSED ? GRPC_CANCEL_CONN
									: GRPC_CANCEL_CLIENT);
	}
	grpc_call_release(call);
}

static const struct h2_app_ops grpc_h2_ops = {
	.stream_open = grpc_on_stream_open,
	.on_header = grpc_on_header,
	.on_request = grpc_on_request,
	.on_data = grpc_on_data,
	.on_remote_end = grpc_on_remote_end,
	.stream_close = grpc_on_stream_close,
};

/* ---- server ---- */

void grpc_server_config_default(struct grpc_server_config *cfg, size_t max_request_bytes)
{
	memset(cfg, 0, sizeof(*cfg));
	h2_config_default(&cfg->h2);
	cfg->max_recv_message_bytes = max_request_bytes + GRPC_OVERHEAD_BYTES;
	cfg->max_conn_buffered_bytes = 64u << 20;
	cfg->now_ns = NULL;
	cfg->clock_arg = NULL;
	cfg->call_pool_keep = 1024;
}

int grpc_server_new(const struct grpc_server_config *cfg, struct grpc_server **out)
{
	if (cfg->max_recv_message_bytes == 0 || cfg->max_recv_message_bytes > UINT32_MAX ||
	    cfg->max_conn_buffered_bytes == 0)
		return -EINVAL;
	const nghttp2_mem *mem = cfg->h2.mem ? cfg->h2.mem : h2_mem_libc();
	struct grpc_server *srv = grpc_alloc(mem, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->cfg = *cfg;
	if (!srv->cfg.now_ns)
		srv->cfg.now_ns = grpc_clock_monotonic;
	srv->mem = mem;
	srv->free_slot = GRPC_NONE;
	dlist_init(&srv->tagged);
	struct h2_config h2cfg = cfg->h2;
	if (!h2cfg.now_ns) { /* one clock for the deadlines and the keepalive */
		h2cfg.now_ns = cfg->now_ns;
		h2cfg.clock_arg = cfg->clock_arg;
	}
	int rc = h2_ctx_new(&h2cfg, &srv->h2);
	if (rc < 0) {
		grpc_dealloc(mem, srv);
		return rc;
	}
	for (size_t i = 0; i < proto_service_count(); i++) {
		const ProtobufCServiceDescriptor *svc = proto_service_at(i);
		for (unsigned m = 0; m < svc->n_methods; m++) {
			char path[256];
			int n = snprintf(path, sizeof(path), "/%s/%s", svc->name, svc->methods[m].name);
			if (n < 0 || (size_t)n >= sizeof(path) ||
			    grpc_entry_add(srv, path, (size_t)n, &svc->methods[m]) == GRPC_NONE) {
				grpc_server_free(srv);
				return -ENOMEM;
			}
		}
	}
	*out = srv;
	return 0;
}

void grpc_server_free(struct grpc_server *srv)
{
	if (!srv)
		return;
	const nghttp2_mem *mem = srv->mem;
	while (srv->pool) {
		struct grpc_call *call = srv->pool;
		srv->pool = call->next_free;
		grpc_call_destroy(mem, call);
	}
	for (uint32_t i = 0; i < srv->nentries; i++)
		grpc_dealloc(mem, srv->entries[i].path);
	if (srv->entries)
		grpc_dealloc(mem, srv->entries);
	if (srv->table)
		grpc_dealloc(mem, srv->table);
	if (srv->slots)
		grpc_dealloc(mem, srv->slots);
	if (srv->heap)
		grpc_dealloc(mem, srv->heap);
	h2_ctx_free(srv->h2);
	grpc_dealloc(mem, srv);
}

int grpc_server_handle(struct grpc_server *srv, const char *path, const struct grpc_handler *h,
		       void *arg)
{
	size_t len = strlen(path);
	if (proto_method_find(path, len, NULL, NULL) == -EINVAL)
		return -EINVAL;
	uint32_t e = grpc_entry_lookup(srv, (const uint8_t *)path, len);
	if (e == GRPC_NONE)
		e = grpc_entry_add(srv, path, len, NULL);
	if (e == GRPC_NONE)
		return -ENOMEM;
	srv->entries[e].handler = h;
	srv->entries[e].arg = arg;
	srv->entries[e].metric = srv->metric_of ? srv->metric_of(srv->entries[e].path) : -1;
	return 0;
}

int grpc_server_conn_new(struct grpc_server *srv, struct h2_conn **out)
{
	struct grpc_conn *conn = grpc_alloc(srv->mem, sizeof(*conn));
	if (!conn)
		return -ENOMEM;
	conn->srv = srv;
	int rc = h2_conn_new(srv->h2, &grpc_h2_ops, conn, &conn->h2);
	if (rc < 0) {
		grpc_dealloc(srv->mem, conn);
		return rc;
	}
	*out = conn->h2;
	return 0;
}

void grpc_server_conn_free(struct h2_conn *c)
{
	if (!c)
		return;
	struct grpc_conn *conn = h2_conn_app(c);
	h2_conn_free(c);
	grpc_dealloc(conn->srv->mem, conn);
}

int64_t grpc_server_next_deadline_ns(const struct grpc_server *srv)
{
	return srv->heap_len ? srv->heap[0]->deadline_ns : INT64_MAX;
}

int grpc_server_timeout_ms(const struct grpc_server *srv)
{
	if (srv->heap_len == 0)
		return -1;
	int64_t left = srv->heap[0]->deadline_ns - grpc_now(srv);
	if (left <= 0)
		return 0;
	int64_t ms = left / 1000000 + (left % 1000000 != 0);
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

unsigned grpc_server_expire(struct grpc_server *srv)
{
	unsigned n = 0;
	int64_t now = grpc_now(srv);
	while (srv->heap_len > 0 && srv->heap[0]->deadline_ns <= now) {
		grpc_call_abort(srv->heap[0], GRPC_STATUS_DEADLINE_EXCEEDED, "context deadline exceeded",
				GRPC_CANCEL_DEADLINE);
		n++;
	}
	return n;
}

void grpc_server_set_admit(struct grpc_server *srv,
			   enum grpc_status (*admit)(void *arg, struct grpc_call *call,
						     const char *path, const char **message),
			   void *arg)
{
	srv->admit = admit;
	srv->admit_arg = arg;
}

void grpc_call_tag(struct grpc_call *call)
{
	struct grpc_server *srv = grpc_call_srv(call);
	if (call->tagged || call->state == GRPC_C_DONE)
		return;
	dlist_insert_tail(&srv->tagged, &call->tag);
	call->tagged = true;
	srv->ntagged++;
}

uint32_t grpc_server_tagged_count(const struct grpc_server *srv)
{
	return srv->ntagged;
}

unsigned grpc_server_cancel_tagged(struct grpc_server *srv, enum grpc_status code,
				   const char *message)
{
	unsigned n = 0;
	/* an on_cancel may end other calls: take the first one each time */
	while (!dlist_empty(&srv->tagged)) {
		struct grpc_call *call = dlist_entry(dlist_first(&srv->tagged), struct grpc_call, tag);
		grpc_call_abort(call, code, message, GRPC_CANCEL_SERVER);
		n++;
	}
	return n;
}

uint32_t grpc_server_call_count(const struct grpc_server *srv)
{
	return srv->ncalls;
}

/* ---- calls ---- */

struct grpc_call *grpc_call_find(struct grpc_server *srv, uint64_t id)
{
	uint32_t idx = (uint32_t)id;
	uint32_t gen = (uint32_t)(id >> 32);
	if (idx == 0 || idx > srv->nslots)
		return NULL;
	const struct grpc_slot *sl = &srv->slots[idx - 1];
	return sl->gen == gen ? sl->call : NULL;
}

uint64_t grpc_call_id(const struct grpc_call *call)
{
	if (call->slot == GRPC_NONE)
		return 0;
	return (uint64_t)call->gen << 32 | (call->slot + 1);
}

const ProtobufCMethodDescriptor *grpc_call_method(const struct grpc_call *call)
{
	return call->entry == GRPC_NONE ? NULL : grpc_call_srv(call)->entries[call->entry].method;
}

void *grpc_call_handler_arg(const struct grpc_call *call)
{
	return call->entry == GRPC_NONE ? NULL : grpc_call_srv(call)->entries[call->entry].arg;
}

void *grpc_call_state(struct grpc_call *call)
{
	return call->handler_state;
}

struct h2_conn *grpc_call_conn(const struct grpc_call *call)
{
	return call->conn->h2;
}

int64_t grpc_call_deadline_ns(const struct grpc_call *call)
{
	return call->deadline_ns;
}

const uint8_t *grpc_call_metadata(const struct grpc_call *call, const char *name, size_t *len)
{
	return grpc_md_find(call, name, len);
}

int grpc_call_send_headers(struct grpc_call *call)
{
	if (call->state != GRPC_C_ACTIVE)
		return -ECANCELED;
	if (h2_stream_responded(&call->st))
		return 0;
	return grpc_call_respond_headers(call);
}

uint8_t *grpc_call_send_reserve(struct grpc_call *call, size_t len)
{
	if (call->state != GRPC_C_ACTIVE || len > UINT32_MAX || call->send_left)
		return NULL;
	if (!h2_stream_responded(&call->st) && grpc_call_respond_headers(call) < 0)
		return NULL;
	uint8_t *p = h2_stream_write_reserve(&call->st, GRPC_PREFIX_LEN + len);
	if (!p)
		return NULL;
	struct shm_metrics_grpc *g = grpc_call_counters(call);
	if (g) {
		shm_metric_bump(&g->msg_sent, 1);
		shm_metric_add(grpc_call_srv(call)->metrics, SHM_M_GRPC_SENT_BYTES, len);
	}
	grpc_prefix_write(p, false, (uint32_t)len);
	return p + GRPC_PREFIX_LEN;
}

int grpc_call_send_begin(struct grpc_call *call, size_t len)
{
	if (call->state != GRPC_C_ACTIVE)
		return -ECANCELED;
	if (len > UINT32_MAX)
		return -EMSGSIZE;
	if (call->send_left)
		return -EINVAL;
	if (!h2_stream_responded(&call->st) && grpc_call_respond_headers(call) < 0)
		return -ENOMEM;
	uint8_t *p = h2_stream_write_reserve(&call->st, GRPC_PREFIX_LEN);
	if (!p)
		return -ENOMEM;
	grpc_prefix_write(p, false, (uint32_t)len);
	call->send_left = len;
	return 0;
}

uint8_t *grpc_call_send_part(struct grpc_call *call, size_t len)
{
	if (call->state != GRPC_C_ACTIVE || len > call->send_left)
		return NULL;
	uint8_t *p = h2_stream_write_reserve(&call->st, len);
	if (p)
		call->send_left -= len;
	return p;
}

int grpc_call_send(struct grpc_call *call, const void *msg, size_t len)
{
	if (call->state != GRPC_C_ACTIVE)
		return -ECANCELED;
	if (len > UINT32_MAX)
		return -EMSGSIZE;
	uint8_t *p = grpc_call_send_reserve(call, len);
	if (!p)
		return -ENOMEM;
	if (len)
		memcpy(p, msg, len);
	return 0;
}

size_t grpc_call_pending_bytes(const struct grpc_call *call)
{
	return h2_stream_pending(&call->st);
}

size_t grpc_call_unacked_bytes(const struct grpc_call *call, size_t *window, size_t *step)
{
	return h2_stream_unacked(&call->st, window, step);
}

int grpc_call_finish(struct grpc_call *call, enum grpc_status code, const char *message)
{
	if (call->state != GRPC_C_ACTIVE)
		return -ECANCELED;
	grpc_call_count_end(call, code);
	grpc_call_retire(call);
	grpc_call_send_status(call, 200, code, message);
	return 0;
}

void grpc_server_set_metrics(struct grpc_server *srv, struct shm_metrics *m,
			     int (*metric_of)(const char *path), bool handling_hist)
{
	srv->metrics = m;
	srv->metric_of = metric_of;
	srv->handling_hist = handling_hist;
	for (uint32_t e = 0; e < srv->nentries; e++)
		srv->entries[e].metric = metric_of ? metric_of(srv->entries[e].path) : -1;
}
