/* Member and cluster IDs as etcd 3.4 derives them (see member.h). */
#include "cluster/member.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cluster/initial_cluster.h"
#include "config/config.h"
#include "config/config_int.h"
#include "base/log/log.h"
#include "shm/region.h"

/* ---- SHA-1 (FIPS 180-4, section 6.1) ---- */

static uint32_t member_rol(uint32_t x, unsigned n)
{
	return x << n | x >> (32 - n);
}

/* One 64-byte block into the state h. */
static void member_sha1_block(uint32_t h[5], const uint8_t *p)
{
	uint32_t w[80], a, b, c, d, e, f, k, t;

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = member_rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	a = h[0];
	b = h[1];
	c = h[2];
	d = h[3];
	e = h[4];
	for (int i = 0; i < 80; i++) {
		if (i < 20) {
			f = (b & c) | (~b & d);
			k = 0x5a827999;
		} else if (i < 40) {
			f = b ^ c ^ d;
			k = 0x6ed9eba1;
		} else if (i < 60) {
			f = (b & c) | (b & d) | (c & d);
			k = 0x8f1bbcdc;
		} else {
			f = b ^ c ^ d;
			k = 0xca62c1d6;
		}
		t = member_rol(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = member_rol(b, 30);
		b = a;
		a = t;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

void member_sha1(const void *data, size_t len, uint8_t out[20])
{
	uint32_t h[5] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 };
	const uint8_t *p = data;
	uint8_t tail[128];
	size_t full = len & ~(size_t)63, rest = len - full, tlen;
	uint64_t bits = (uint64_t)len * 8;

	for (size_t off = 0; off < full; off += 64)
		member_sha1_block(h, p + off);
	/* the rest, 0x80, zeros, then the length in bits: one or two blocks */
	memset(tail, 0, sizeof(tail));
	if (rest)
		memcpy(tail, p + full, rest);
	tail[rest] = 0x80;
	tlen = rest + 1 + 8 <= 64 ? 64 : 128;
	for (int i = 0; i < 8; i++)
		tail[tlen - 1 - i] = (uint8_t)(bits >> (8 * i));
	member_sha1_block(h, tail);
	if (tlen == 128)
		member_sha1_block(h, tail + 64);
	for (int i = 0; i < 5; i++) {
		out[4 * i] = (uint8_t)(h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(h[i] >> 8);
		out[4 * i + 3] = (uint8_t)h[i];
	}
}

static uint64_t member_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* ---- ids ---- */

static int member_strcmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void member_urls_sort(char **v, size_t n)
{
	qsort(v, n, sizeof(*v), member_strcmp);
}

static int member_u64cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int member_id_compute(const char *const *peer_urls, size_t n, const char *token, uint64_t *id)
{
	const char **sorted;
	size_t len = strlen(token), off = 0;
	uint8_t digest[20];
	char *buf;

	sorted = malloc((n ? n : 1) * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		sorted[i] = peer_urls[i];
		len += strlen(peer_urls[i]);
	}
	qsort(sorted, n, sizeof(*sorted), member_strcmp);
	buf = malloc(len + 1);
	if (!buf) {
		free(sorted);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(sorted[i]);
		memcpy(buf + off, sorted[i], l);
		off += l;
	}
	memcpy(buf + off, token, strlen(token));
	member_sha1(buf, len, digest);
	*id = member_be64(digest);
	free(buf);
	free(sorted);
	return 0;
}

uint64_t member_cluster_id(const uint64_t *ids, size_t n)
{
	uint64_t *sorted = malloc((n ? n : 1) * sizeof(*sorted));
	uint8_t *buf = malloc((n ? n : 1) * 8), digest[20];
	uint64_t cid = 0;

	if (sorted && buf) {
		memcpy(sorted, ids, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), member_u64cmp);
		for (size_t i = 0; i < n; i++)
			for (int b = 0; b < 8; b++)
				buf[8 * i + b] = (uint8_t)(sorted[i] >> (56 - 8 * b));
		member_sha1(buf, n * 8, digest);
		cid = member_be64(digest);
	}
	free(buf);
	free(sorted);
	return cid;
}

/* ---- one member ---- */

void member_info_clear(struct member_info *m)
{
	free(m->name);
	for (size_t j = 0; j < m->n_peer_urls; j++)
		free(m->peer_urls[j]);
	free(m->peer_urls);
	for (size_t j = 0; j < m->n_client_urls; j++)
		free(m->client_urls[j]);
	free(m->client_urls);
	memset(m, 0, sizeof(*m));
}

void member_strings_text(char *const *v, size_t n, char *out, size_t cap)
{
	size_t len = 0;

	len += (size_t)snprintf(out, cap, "[");
	for (size_t i = 0; i < n && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? " " : "", v[i]);
	if (len < cap)
		snprintf(out + len, cap - len, "]");
}

int member_ids_from_config(const struct cetcd_config *c, uint64_t *member_id,
			   uint64_t *cluster_id)
{
	struct initial_cluster mc;
	int rc = initial_cluster_parse(c->initial_cluster, c->initial_cluster_token, &mc);
	if (rc)
		return rc;
	const struct member_info *me = initial_cluster_find(&mc, c->name);
	if (me) {
		*member_id = me->id;
		*cluster_id = mc.cluster_id;
	} else {
		rc = -ENOENT;
	}
	initial_cluster_free(&mc);
	return rc;
}

int member_ids_load(const struct cetcd_config *c, struct shm_region *r, uint64_t *member_id,
		    uint64_t *cluster_id)
{
	int rc = member_ids_from_config(c, member_id, cluster_id);
	if (rc) {
		log_error("cannot derive the member id from --initial-cluster",
			  LOG_STR("initial-cluster", c->initial_cluster), LOG_STR("name", c->name),
			  LOG_ERRNO(rc));
		return rc;
	}
	uint64_t region_id = r ? shm_region_member_id(r) : 0;
	if (region_id != 0 && region_id != *member_id)
		log_warn("the member region names another member id",
			 LOG_U64("region-member-id", region_id), LOG_U64("member-id", *member_id));
	return 0;
}

/* How often member_ids_wait looks, and how often it says it still waits. */
#define MEMBER_IDS_POLL_MS 50
#define MEMBER_IDS_LOG_MS 5000

int member_ids_wait(const struct cetcd_config *c, struct shm_region *r, uint64_t *member_id,
		    uint64_t *cluster_id)
{
	uint64_t flag_mid = 0, flag_cid = 0;
	bool have_flags = member_ids_from_config(c, &flag_mid, &flag_cid) == 0;
	unsigned waited_ms = 0;

	while (!shm_region_ids(r, member_id, cluster_id)) {
		if (config_stop_pending())
			return -EINTR;
		if (waited_ms % MEMBER_IDS_LOG_MS == MEMBER_IDS_LOG_MS / 5)
			log_info("waiting for raftd to resolve the member id (from its WAL, the flags, or the cluster it joins)",
				 LOG_U64("waited-ms", waited_ms));
		struct timespec ts = { 0, MEMBER_IDS_POLL_MS * 1000000L };
		nanosleep(&ts, NULL);
		waited_ms += MEMBER_IDS_POLL_MS;
	}
	if (!have_flags || flag_mid != *member_id || flag_cid != *cluster_id) {
		char mid[24], cid[24];
		snprintf(mid, sizeof(mid), "%" PRIx64, *member_id);
		snprintf(cid, sizeof(cid), "%" PRIx64, *cluster_id);
		log_info("serving with the member id raftd resolved, not the one --initial-cluster derives",
			 LOG_STR("local-member-id", mid), LOG_STR("cluster-id", cid));
	}
	return 0;
}

int member_peer_urls(char *const *in, size_t n, char ***out)
{
	char **v = calloc(n ? n : 1, sizeof(*v));
	char why[256];
	int rc = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		struct config_url u;
		if (config_parse_url(in[i], &u, why, sizeof(why))) {
			rc = -EINVAL;
			break;
		}
		if (!(v[i] = strdup(u.text)))
			rc = -ENOMEM;
		free(u.text);
		free(u.host);
		free(u.port);
	}
	if (rc) {
		for (size_t i = 0; i < n; i++)
			free(v[i]);
		free(v);
		return rc;
	}
	member_urls_sort(v, n);
	*out = v;
	return 0;
}

int member_id_added(char *const *peer_urls, size_t n, int64_t now_s, uint64_t *id)
{
	char token[24];
	snprintf(token, sizeof(token), "%lld", (long long)now_s);
	return member_id_compute((const char *const *)peer_urls, n, token, id);
}
