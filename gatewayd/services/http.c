/*
 * The HTTP/1 paths the gateway serves beside gRPC, on the client port and
 * on --listen-metrics-urls, as etcd 3.4 serves them:
 *   /metrics   Prometheus's text format (metrics.c);
 *   /health    etcd's health handler: a raised alarm (unless
 *              ?exclude=NAME), no leader (unless ?serializable=true) or
 *              a failed read (linearizable unless ?serializable=true)
 *              answer {"health":"false"} and 503;
 *   /livez, /readyz and one subpath per check (etcd 3.4.29's
 *              etcdhttp/health.go): livez runs serializable_read; readyz
 *              data_corruption, serializable_read, non_learner (etcd
 *              3.5's: a learner is not ready) and linearizable_read.
 *              ?exclude=CHECK skips one, ?verbose lists each; a failure
 *              answers 503 with the list.
 * A linearizable read waits for a read index (gw_read_index_http); the
 * connection waits with it and reads nothing more meanwhile.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/http/query.h"
#include "base/log/errmsg.h"
#include "config/config.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/server.h"
#include "gatewayd/services/metrics.h"
#include "stored/mvcc/mvcc.h"

static const char text_ct[] = "text/plain; charset=utf-8";

/* The checks of /livez and /readyz, in the order they are run. */
enum http_check {
	HTTP_CHECK_DATA_CORRUPTION,
	HTTP_CHECK_SERIALIZABLE_READ,
	HTTP_CHECK_NON_LEARNER,
	HTTP_CHECK_LINEARIZABLE_READ,
	HTTP_CHECK_COUNT
};
static const char *const check_names[HTTP_CHECK_COUNT] = {
	"data_corruption", "serializable_read", "non_learner", "linearizable_read",
};
#define CHECK_BIT(c) (1u << (c))
#define LIVEZ_CHECKS CHECK_BIT(HTTP_CHECK_SERIALIZABLE_READ)
#define READYZ_CHECKS (CHECK_BIT(HTTP_CHECK_DATA_CORRUPTION) | \
		       CHECK_BIT(HTTP_CHECK_SERIALIZABLE_READ) | \
		       CHECK_BIT(HTTP_CHECK_NON_LEARNER) | \
		       CHECK_BIT(HTTP_CHECK_LINEARIZABLE_READ))

/* A health answer in the making, while a linearizable read waits. */
struct http_health {
	struct gw_http_read read; /* first: done gets it back */
	bool health;              /* /health, else /livez or /readyz */
	bool verbose;
	unsigned checks;          /* CHECK_BITs to run */
	char out[512];            /* the check lines so far */
	size_t len;
	bool failed;
};

/* The alarm types raised (bit 1 << AlarmType), read from the db. */
static unsigned http_alarms(struct gw_server *s)
{
	return alarm_types_raised(s);
}

/* A serializable Range with limit 1 and keys only, as etcd's checks run
 * it: NULL if it can be served, else the error. */
static const char *http_serializable_read(struct gw_server *s)
{
	struct gw_read rd;
	int rc = gw_read_begin(s, &rd);

	if (rc)
		return rc == -EAGAIN || rc == -ENOENT ? "etcdserver: not capable" : errmsg_get(rc);
	gw_read_end(s, &rd);
	return NULL;
}

static void health_line(struct http_health *h, enum http_check c, const char *err)
{
	int n;

	if (err)
		n = snprintf(h->out + h->len, sizeof(h->out) - h->len, "[-]%s failed: %s\n",
			     check_names[c], err);
	else
		n = snprintf(h->out + h->len, sizeof(h->out) - h->len, "[+]%s ok\n", check_names[c]);
	if (n > 0 && (size_t)n < sizeof(h->out) - h->len)
		h->len += (size_t)n;
	if (err)
		h->failed = true;
}

/* Writes h's answer (the reads are all done); h stays the caller's. */
static void health_answer(struct gw_server *s, void *owner, struct http1_conn *now,
			  struct http_health *h)
{
	char body[600];
	int status = h->failed ? 503 : 200;
	size_t len;

	if (h->health) {
		shm_metric_add(s->metrics, h->failed ? SHM_M_HEALTH_FAILURES : SHM_M_HEALTH_SUCCESS, 1);
		len = (size_t)snprintf(body, sizeof(body), h->failed ? "{\"health\":\"false\"}\n" :
								    "{\"health\":\"true\"}");
	} else if (h->failed) {
		/* http.Error: the list and a newline */
		len = (size_t)snprintf(body, sizeof(body), "%.*s\n", (int)h->len, h->out);
	} else {
		len = (size_t)snprintf(body, sizeof(body), "%.*sok\n", h->verbose ? (int)h->len : 0,
				       h->out);
	}
	if (now)
		(void)http1_conn_answer(now, status, text_ct, status != 200 || !h->health, body, len);
	else if (owner)
		gw_http1_reply(s, owner, status, text_ct, body, len);
}

/* The linearizable read of h ended (err NULL: served). */
static void health_read_done(struct gw_server *s, struct gw_http_read *r, const char *err)
{
	struct http_health *h = (struct http_health *)r;

	if (h->health)
		h->failed = err != NULL;
	else
		health_line(h, HTTP_CHECK_LINEARIZABLE_READ, err);
	health_answer(s, r->owner, NULL, h);
	free(h);
}

/* Runs h's checks; the linearizable read last, waiting when asked for.
 * Returns 1 (answered or waiting) or -ENOMEM. */
static int health_run(struct gw_server *s, void *owner, struct http1_conn *c,
		      struct http_health *h, bool linearizable)
{
	if (h->checks & CHECK_BIT(HTTP_CHECK_DATA_CORRUPTION))
		health_line(h, HTTP_CHECK_DATA_CORRUPTION,
			    http_alarms(s) & (1u << ETCDSERVERPB__ALARM_TYPE__CORRUPT) ?
				    "alarm activated: CORRUPT" : NULL);
	if (h->checks & CHECK_BIT(HTTP_CHECK_SERIALIZABLE_READ))
		health_line(h, HTTP_CHECK_SERIALIZABLE_READ, http_serializable_read(s));
	if (h->checks & CHECK_BIT(HTTP_CHECK_NON_LEARNER)) {
		struct status_raftd rs;
		health_line(h, HTTP_CHECK_NON_LEARNER,
			    status_raftd_read(s->r, &rs) ? "etcdserver: not capable" :
			    rs.is_learner ? "not supported for learner" : NULL);
	}
	if (!linearizable) {
		health_answer(s, owner, c, h);
		return 1;
	}
	struct http_health *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = *h;
	w->read = (struct gw_http_read){ .done = health_read_done, .owner = owner };
	if (gw_read_index_http(s, &w->read)) {
		free(w);
		if (h->health)
			h->failed = true;
		else
			health_line(h, HTTP_CHECK_LINEARIZABLE_READ, "etcdserver: too many requests");
		health_answer(s, owner, c, h);
		return 1;
	}
	http1_conn_wait(c);
	return 1;
}

/* etcd's /health. */
static int http_health(struct gw_server *s, void *owner, struct http1_conn *c,
		       const struct http1_req *r)
{
	struct http_health h = { .health = true };
	struct http_query_pair qp;
	unsigned excluded = 0;
	size_t off = 0;
	bool serializable = false;

	while (r->query && http_query_next(r->query, r->query_len, &off, &qp)) {
		if (strcmp(qp.key, "exclude") == 0 && strcmp(qp.value, "NOSPACE") == 0)
			excluded |= 1u << ETCDSERVERPB__ALARM_TYPE__NOSPACE;
		else if (strcmp(qp.key, "exclude") == 0 && strcmp(qp.value, "CORRUPT") == 0)
			excluded |= 1u << ETCDSERVERPB__ALARM_TYPE__CORRUPT;
	}
	/* url.Values.Get: the first value */
	if (r->query && http_query_get(r->query, r->query_len, "serializable", &qp))
		serializable = strcmp(qp.value, "true") == 0;
	if (http_alarms(s) & ~excluded) {
		h.failed = true;
	} else if (!serializable) {
		struct status_raftd rs;
		if (status_raftd_read(s->r, &rs) || rs.leader_id == 0)
			h.failed = true;
	}
	if (h.failed) {
		health_answer(s, owner, c, &h);
		return 1;
	}
	if (serializable) {
		h.failed = http_serializable_read(s) != NULL;
		health_answer(s, owner, c, &h);
		return 1;
	}
	return health_run(s, owner, c, &h, true);
}

/* /livez, /readyz and their subpaths: checks is what the path runs. */
static int http_checks(struct gw_server *s, void *owner, struct http1_conn *c,
		       const struct http1_req *r, unsigned checks, bool root)
{
	struct http_health h = { .checks = checks };
	struct http_query_pair qp;
	size_t off = 0;

	while (r->query && http_query_next(r->query, r->query_len, &off, &qp)) {
		if (strcmp(qp.key, "verbose") == 0)
			h.verbose = true;
		if (!root || strcmp(qp.key, "exclude") != 0)
			continue;
		for (unsigned i = 0; i < HTTP_CHECK_COUNT; i++)
			if (strcmp(qp.value, check_names[i]) == 0)
				h.checks &= ~CHECK_BIT(i);
	}
	return health_run(s, owner, c, &h, h.checks & CHECK_BIT(HTTP_CHECK_LINEARIZABLE_READ));
}

/* Live keys at the published root, counted again only when the revision
 * moved since the last scrape. */
static uint64_t http_keys(struct gw_server *s, int64_t *rev_seen, uint64_t *keys)
{
	struct gw_read rd;
	struct mvcc_view v;
	struct mvcc_range_result res;
	Etcdserverpb__RangeRequest req;

	if (gw_read_begin(s, &rd))
		return *keys;
	if ((int64_t)rd.st.revision != *rev_seen && mvcc_view_open(rd.txn, &v) == 0) {
		static uint8_t zero[1];
		etcdserverpb__range_request__init(&req);
		req.key = (ProtobufCBinaryData){ 1, zero };
		req.range_end = (ProtobufCBinaryData){ 1, zero };
		req.count_only = true;
		mvcc_range_result_init(&res);
		if (mvcc_range(&v, &req, &res) == 0) {
			*keys = (uint64_t)res.count;
			*rev_seen = (int64_t)rd.st.revision;
		}
		mvcc_range_result_free(&res);
		mvcc_view_close(&v);
	}
	gw_read_end(s, &rd);
	return *keys;
}

static int http_metrics(struct gw_server *s, struct http1_conn *c)
{
	static __thread int64_t rev_seen = -1;
	static __thread uint64_t keys;
	struct metrics_sum *sum = malloc(sizeof(*sum));
	struct metrics_buf b = { 0 };
	struct status_stored st;
	int64_t size = 0, in_use = 0;
	int rc;

	if (!sum)
		return -ENOMEM;
	metrics_collect(s->r, alarm_quota_bytes(s), sum);
	if (status_stored_read(s->r, &st) == 0)
		gw_db_sizes(s, &st, &size, &in_use);
	sum->m[SHM_M_DB_SIZE] = (uint64_t)size;
	sum->m[SHM_M_DB_IN_USE] = (uint64_t)in_use;
	sum->m[SHM_M_KEYS] = http_keys(s, &rev_seen, &keys);
	rc = metrics_text(sum, strcmp(s->cfg->metrics, "extensive") == 0, &b);
	free(sum);
	if (!rc)
		rc = http1_conn_answer(c, 200, "text/plain; version=0.0.4; charset=utf-8", false,
				       b.out.data, b.out.len);
	h2_buf_free(&b.out, h2_mem_libc());
	return rc ? -ENOMEM : 1;
}

static bool path_is(const struct http1_req *r, const char *p)
{
	return r->path_len == strlen(p) && memcmp(r->path, p, r->path_len) == 0;
}

int http_serve(struct gw_server *s, void *owner, struct http1_conn *c, const struct http1_req *r)
{
	static const char *const roots[] = { "/livez", "/readyz" };
	const unsigned root_checks[] = { LIVEZ_CHECKS, READYZ_CHECKS };
	bool get = r->method_len == 3 && memcmp(r->method, "GET", 3) == 0;
	unsigned checks = 0;
	bool root = false, health = path_is(r, "/health");

	if (path_is(r, "/metrics"))
		return http_metrics(s, c);
	for (unsigned i = 0; i < 2 && !checks; i++) {
		size_t n = strlen(roots[i]);
		if (path_is(r, roots[i])) {
			checks = root_checks[i];
			root = true;
			break;
		}
		if (r->path_len <= n + 1 || memcmp(r->path, roots[i], n) != 0 || r->path[n] != '/')
			continue;
		for (unsigned k = 0; k < HTTP_CHECK_COUNT; k++)
			if ((root_checks[i] & CHECK_BIT(k)) && r->path_len == n + 1 + strlen(check_names[k]) &&
			    memcmp(r->path + n + 1, check_names[k], strlen(check_names[k])) == 0)
				checks = CHECK_BIT(k);
	}
	if (!health && !checks)
		return 0;
	if (!get) {
		static const char na[] = "Method Not Allowed\n";
		return http1_conn_answer(c, 405, text_ct, true, na, sizeof(na) - 1) ? -ENOMEM : 1;
	}
	return health ? http_health(s, owner, c, r) : http_checks(s, owner, c, r, checks, root);
}
