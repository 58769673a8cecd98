/* Membership as committed entries change it (see membership.h). */
#include "cluster/membership.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hex/hex.h"
#include "proto/wire.h"
#include "cluster/member_json.h"

const char *membership_error_text(enum membership_error e)
{
	switch (e) {
	case MEMBERSHIP_OK:
		return "";
	case MEMBERSHIP_ERR_ID_REMOVED:
		return "membership: ID removed";
	case MEMBERSHIP_ERR_ID_EXISTS:
		return "membership: ID exists";
	case MEMBERSHIP_ERR_ID_NOT_FOUND:
		return "membership: ID not found";
	case MEMBERSHIP_ERR_PEER_URL_EXISTS:
		return "membership: peerURL exists";
	case MEMBERSHIP_ERR_NOT_LEARNER:
		return "membership: can only promote a learner member";
	case MEMBERSHIP_ERR_TOO_MANY_LEARNERS:
		return "membership: too many learner members in cluster";
	}
	return "membership: unknown error";
}

/* etcd 3.4's maxLearners. */
#define MEMBERSHIP_MAX_LEARNERS 1

void membership_init(struct membership *m)
{
	memset(m, 0, sizeof(*m));
}

void membership_free(struct membership *m)
{
	for (size_t i = 0; i < m->count; i++)
		member_info_clear(&m->v[i]);
	free(m->v);
	free(m->removed);
	memset(m, 0, sizeof(*m));
}

/* The position of id in the members (or where it would go). */
static size_t ms_pos(const struct membership *m, uint64_t id)
{
	size_t lo = 0, hi = m->count;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->v[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct member_info *membership_find(const struct membership *m, uint64_t id)
{
	size_t i = ms_pos(m, id);
	return i < m->count && m->v[i].id == id ? &m->v[i] : NULL;
}

bool membership_is_removed(const struct membership *m, uint64_t id)
{
	for (size_t i = 0; i < m->n_removed; i++)
		if (m->removed[i] == id)
			return true;
	return false;
}

static char **ms_strings_dup(char *const *v, size_t n)
{
	char **out = calloc(n ? n : 1, sizeof(*out));
	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		out[i] = strdup(v[i]);
		if (!out[i]) {
			for (size_t j = 0; j < i; j++)
				free(out[j]);
			free(out);
			return NULL;
		}
	}
	return out;
}

/* A deep copy of src into dst (zeroed on failure). */
static int ms_copy(struct member_info *dst, const struct member_info *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->id = src->id;
	dst->is_learner = src->is_learner;
	dst->name = strdup(src->name ? src->name : "");
	dst->peer_urls = ms_strings_dup(src->peer_urls, src->n_peer_urls);
	if (dst->peer_urls)
		dst->n_peer_urls = src->n_peer_urls;
	dst->client_urls = ms_strings_dup(src->client_urls, src->n_client_urls);
	if (dst->client_urls)
		dst->n_client_urls = src->n_client_urls;
	if (!dst->name || !dst->peer_urls || !dst->client_urls) {
		member_info_clear(dst);
		return -ENOMEM;
	}
	return 0;
}

int membership_put(struct membership *m, const struct member_info *mi)
{
	struct member_info copy;
	size_t i = ms_pos(m, mi->id);

	if (ms_copy(&copy, mi))
		return -ENOMEM;
	if (i < m->count && m->v[i].id == mi->id) {
		member_info_clear(&m->v[i]);
		m->v[i] = copy;
		return 0;
	}
	struct member_info *v = realloc(m->v, (m->count + 1) * sizeof(*v));
	if (!v) {
		member_info_clear(&copy);
		return -ENOMEM;
	}
	m->v = v;
	memmove(&v[i + 1], &v[i], (m->count - i) * sizeof(*v));
	v[i] = copy;
	m->count++;
	return 0;
}

int membership_mark_removed(struct membership *m, uint64_t id)
{
	if (membership_is_removed(m, id))
		return 0;
	uint64_t *v = realloc(m->removed, (m->n_removed + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	m->removed = v;
	v[m->n_removed++] = id;
	return 0;
}

/* Removes a member, recording its id as removed. */
static int ms_remove(struct membership *m, uint64_t id)
{
	int rc = membership_mark_removed(m, id);
	if (rc)
		return rc;
	size_t i = ms_pos(m, id);
	if (i < m->count && m->v[i].id == id) {
		member_info_clear(&m->v[i]);
		memmove(&m->v[i], &m->v[i + 1], (m->count - i - 1) * sizeof(*m->v));
		m->count--;
	}
	return 0;
}

/* Parses "major.minor[.patch[-pre][+meta]]". */
static int ms_parse_version(const char *s, size_t len, unsigned *major, unsigned *minor)
{
	unsigned v[2] = { 0, 0 };
	size_t i = 0;

	for (int part = 0; part < 2; part++) {
		size_t start = i;
		while (i < len && s[i] >= '0' && s[i] <= '9' && v[part] < 100000)
			v[part] = v[part] * 10 + (unsigned)(s[i++] - '0');
		if (i == start || (i < len && s[i] >= '0' && s[i] <= '9'))
			return -EINVAL;
		if (part == 0 && (i >= len || s[i++] != '.'))
			return -EINVAL;
	}
	if (i < len && s[i] != '.')
		return -EINVAL;
	*major = v[0];
	*minor = v[1];
	return 0;
}

int membership_set_version(struct membership *m, const char *text, size_t len)
{
	unsigned major, minor;
	if (ms_parse_version(text, len, &major, &minor))
		return -EINVAL;
	m->has_version = true;
	m->version_major = major;
	m->version_minor = minor;
	return 0;
}

/* Whether another member than id uses one of urls as a peer URL. */
static bool ms_peer_url_taken(const struct membership *m, uint64_t id, char *const *urls,
			      size_t n)
{
	for (size_t i = 0; i < m->count; i++) {
		if (m->v[i].id == id)
			continue;
		for (size_t j = 0; j < m->v[i].n_peer_urls; j++)
			for (size_t k = 0; k < n; k++)
				if (strcmp(m->v[i].peer_urls[j], urls[k]) == 0)
					return true;
	}
	return false;
}

/* ---- conf changes ---- */

struct ms_conf_change {
	uint64_t id;
	uint64_t type;
	uint64_t node_id;
	const uint8_t *context;
	size_t context_len;
};

static int ms_decode_conf_change(const uint8_t *data, size_t len, struct ms_conf_change *cc)
{
	struct proto_reader r = proto_reader_init(data, len);
	struct proto_field f;

	memset(cc, 0, sizeof(*cc));
	while (!proto_reader_done(&r)) {
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		switch (f.num) {
		case 1:
		case 2:
		case 3:
			if (f.wire != 0)
				return -EBADMSG;
			*(f.num == 1 ? &cc->id : f.num == 2 ? &cc->type : &cc->node_id) = f.varint;
			break;
		case 4:
			if (f.wire != 2)
				return -EBADMSG;
			cc->context = f.data;
			cc->context_len = f.len;
			break;
		default:
			break; /* unknown fields are kept aside by gogo: skip */
		}
	}
	return cc->type <= MEMBERSHIP_CC_ADD_LEARNER_NODE ? 0 : -EBADMSG;
}

/* etcd's ValidateConfigurationChange, then the change itself. */
static int ms_apply_conf_change(struct membership *m, const struct ms_conf_change *cc,
				struct membership_result *out)
{
	struct member_info ctx = { 0 };
	bool promote = false;
	int rc = 0;
	size_t i;

	out->cc_type = (enum membership_cc_type)cc->type;
	out->cc_id = cc->id;
	out->node_id = cc->node_id;
	if (cc->type != MEMBERSHIP_CC_REMOVE_NODE) {
		rc = member_json_decode_context(cc->context, cc->context_len, &ctx, &promote);
		if (rc)
			return rc;
		if (ctx.id != cc->node_id) {
			member_info_clear(&ctx);
			return -EBADMSG; /* etcd: "got different member ID" */
		}
	}

	enum membership_error err = MEMBERSHIP_OK;
	const struct member_info *cur = membership_find(m, cc->node_id);
	if (membership_is_removed(m, cc->node_id)) {
		err = MEMBERSHIP_ERR_ID_REMOVED;
	} else if (cc->type == MEMBERSHIP_CC_ADD_NODE && promote) {
		if (!cur)
			err = MEMBERSHIP_ERR_ID_NOT_FOUND;
		else if (!cur->is_learner)
			err = MEMBERSHIP_ERR_NOT_LEARNER;
	} else if (cc->type == MEMBERSHIP_CC_ADD_NODE ||
		   cc->type == MEMBERSHIP_CC_ADD_LEARNER_NODE) {
		if (cur) {
			err = MEMBERSHIP_ERR_ID_EXISTS;
		} else if (ms_peer_url_taken(m, 0, ctx.peer_urls, ctx.n_peer_urls)) {
			err = MEMBERSHIP_ERR_PEER_URL_EXISTS;
		} else if (ctx.is_learner) {
			size_t learners = 0;
			for (i = 0; i < m->count; i++)
				learners += m->v[i].is_learner;
			if (learners + 1 > MEMBERSHIP_MAX_LEARNERS)
				err = MEMBERSHIP_ERR_TOO_MANY_LEARNERS;
		}
	} else if (!cur) {
		err = MEMBERSHIP_ERR_ID_NOT_FOUND;
	} else if (cc->type == MEMBERSHIP_CC_UPDATE_NODE &&
		   ms_peer_url_taken(m, cc->node_id, ctx.peer_urls, ctx.n_peer_urls)) {
		err = MEMBERSHIP_ERR_PEER_URL_EXISTS;
	}
	if (err) {
		out->change = MEMBERSHIP_REFUSED;
		out->error = err;
		goto out_clear;
	}

	switch (cc->type) {
	case MEMBERSHIP_CC_ADD_NODE:
	case MEMBERSHIP_CC_ADD_LEARNER_NODE:
		if (promote) {
			i = ms_pos(m, cc->node_id);
			m->v[i].is_learner = false;
			out->change = MEMBERSHIP_PROMOTED;
		} else {
			rc = membership_put(m, &ctx);
			out->change = MEMBERSHIP_ADDED;
		}
		break;
	case MEMBERSHIP_CC_REMOVE_NODE:
		rc = ms_remove(m, cc->node_id);
		out->change = MEMBERSHIP_REMOVED;
		break;
	case MEMBERSHIP_CC_UPDATE_NODE: {
		i = ms_pos(m, cc->node_id);
		char **urls = ms_strings_dup(ctx.peer_urls, ctx.n_peer_urls);
		if (!urls) {
			rc = -ENOMEM;
			break;
		}
		for (size_t j = 0; j < m->v[i].n_peer_urls; j++)
			free(m->v[i].peer_urls[j]);
		free(m->v[i].peer_urls);
		m->v[i].peer_urls = urls;
		m->v[i].n_peer_urls = ctx.n_peer_urls;
		out->change = MEMBERSHIP_UPDATED;
		break;
	}
	}
	if (!rc && out->change != MEMBERSHIP_REMOVED)
		out->member = membership_find(m, cc->node_id);

out_clear:
	member_info_clear(&ctx);
	return rc;
}

/* ---- v2 requests ---- */

struct ms_v2 {
	uint64_t id;
	const uint8_t *method, *path, *val;
	size_t method_len, path_len, val_len;
};

/* An etcdserverpb.Request as gogo decodes one: every known field with its
 * wire type, unknown fields skipped. */
static int ms_decode_v2(const uint8_t *data, size_t len, struct ms_v2 *q)
{
	struct proto_reader r = proto_reader_init(data, len);
	struct proto_field f;

	memset(q, 0, sizeof(*q));
	while (!proto_reader_done(&r)) {
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if (f.num > 17)
			continue;
		bool is_string = f.num >= 2 && f.num <= 6 && f.num != 5;
		if (f.wire != (is_string ? 2u : 0u))
			return -EBADMSG;
		switch (f.num) {
		case 1:
			q->id = f.varint;
			break;
		case 2:
			q->method = f.data, q->method_len = f.len;
			break;
		case 3:
			q->path = f.data, q->path_len = f.len;
			break;
		case 4:
			q->val = f.data, q->val_len = f.len;
			break;
		}
	}
	return 0;
}

/*
 * Finds the v2 request in an EntryNormal, as etcd does: the data is an
 * InternalRaftRequest if it decodes as one, and its v2 field (2) is then
 * the request; otherwise the data is a raw Request (what etcd 3.4 itself
 * proposes: its Method, field 2, is text that does not decode as a
 * message). Returns 0 when one was found.
 */
static int ms_find_v2(const uint8_t *data, size_t len, struct ms_v2 *q)
{
	struct proto_reader r = proto_reader_init(data, len);
	struct proto_field f;
	const uint8_t *inner = NULL;
	size_t inner_len = 0;

	while (!proto_reader_done(&r)) {
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if (f.num == 2) {
			if (f.wire != 2)
				return -EBADMSG;
			inner = f.data;
			inner_len = f.len;
		}
	}
	if (!inner)
		return -ENOENT;
	if (ms_decode_v2(inner, inner_len, q) == 0)
		return 0;
	return ms_decode_v2(data, len, q);
}

static bool ms_eq(const uint8_t *p, size_t len, const char *lit)
{
	return len == strlen(lit) && memcmp(p, lit, len) == 0;
}

/* "/0/members/<1 to 16 hex digits>/attributes": the id. */
static bool ms_attributes_id(const uint8_t *p, size_t len, uint64_t *id)
{
	static const char pre[] = "/0/members/", post[] = "/attributes";
	size_t np = sizeof(pre) - 1, nq = sizeof(post) - 1;

	if (len <= np + nq || len > np + nq + 16 || memcmp(p, pre, np) != 0 ||
	    memcmp(p + len - nq, post, nq) != 0)
		return false;
	return hex_parse_u64((const char *)p + np, len - np - nq, id) == 0;
}

static int ms_apply_v2(struct membership *m, const struct ms_v2 *q, struct membership_result *out)
{
	uint64_t id;

	out->request_id = q->id;
	out->change = MEMBERSHIP_IGNORED;
	if (!ms_eq(q->method, q->method_len, "PUT"))
		return 0;
	if (ms_eq(q->path, q->path_len, "/0/version")) {
		if (membership_set_version(m, (const char *)q->val, q->val_len) == 0)
			out->change = MEMBERSHIP_VERSION;
		return 0;
	}
	if (!ms_attributes_id(q->path, q->path_len, &id))
		return 0;
	out->node_id = id;
	size_t i = ms_pos(m, id);
	if (i >= m->count || m->v[i].id != id)
		return 0; /* a removed member's late publish; etcd ignores it too */
	struct member_info attr = { 0 };
	int rc = member_json_decode(q->val, q->val_len, &attr);
	if (rc == -EBADMSG)
		return 0;
	if (rc)
		return rc;
	/* etcd replaces the whole Attributes: absent keys become empty */
	free(m->v[i].name);
	m->v[i].name = attr.name ? attr.name : strdup("");
	attr.name = NULL;
	for (size_t j = 0; j < m->v[i].n_client_urls; j++)
		free(m->v[i].client_urls[j]);
	free(m->v[i].client_urls);
	m->v[i].client_urls = attr.client_urls;
	m->v[i].n_client_urls = attr.n_client_urls;
	attr.client_urls = NULL;
	attr.n_client_urls = 0;
	member_info_clear(&attr);
	if (!m->v[i].name)
		return -ENOMEM;
	out->change = MEMBERSHIP_ATTRIBUTES;
	out->member = &m->v[i];
	return 0;
}

int membership_apply(struct membership *m, uint32_t entry_type, const uint8_t *data, size_t len,
		     struct membership_result *out)
{
	memset(out, 0, sizeof(*out));
	if (entry_type == 1) {
		struct ms_conf_change cc;
		int rc = ms_decode_conf_change(data, len, &cc);
		return rc ? rc : ms_apply_conf_change(m, &cc, out);
	}
	if (entry_type != 0 || len == 0)
		return 0;
	struct ms_v2 q;
	if (ms_find_v2(data, len, &q))
		return 0;
	return ms_apply_v2(m, &q, out);
}

void membership_attributes_path(uint64_t id, char out[48])
{
	snprintf(out, 48, "/0/members/%" PRIx64 "/attributes", id);
}

static size_t ms_put_string(uint8_t *p, unsigned field, const char *s)
{
	size_t n = strlen(s), k = 0;
	p[k++] = (uint8_t)(field << 3 | 2);
	k += proto_varint_put(p + k, n);
	memcpy(p + k, s, n);
	return k + n;
}

int membership_v2_put(uint64_t request_id, const char *path, const char *val, uint8_t **out,
		      size_t *len)
{
	size_t cap = 64 + strlen(path) + strlen(val);
	uint8_t *p = malloc(cap), *q;

	if (!p)
		return -ENOMEM;
	q = p;
	*q++ = 1 << 3;
	q += proto_varint_put(q, request_id);
	q += ms_put_string(q, 2, "PUT");
	q += ms_put_string(q, 3, path);
	q += ms_put_string(q, 4, val);
	/* the fields gogo writes even when zero, in field order: Dir,
	 * PrevValue, PrevIndex, Expiration, Wait, Since, Recursive, Sorted,
	 * Quorum, Time, Stream */
	*q++ = 5 << 3, *q++ = 0;
	q += ms_put_string(q, 6, "");
	for (unsigned f = 7; f <= 16; f++) {
		if (f == 8)
			continue; /* PrevExist: only when set */
		if (f == 16) {
			/* field 16 needs a two-byte key */
			*q++ = (uint8_t)(16 << 3 | 0x80), *q++ = 1;
		} else {
			*q++ = (uint8_t)(f << 3);
		}
		*q++ = 0;
	}
	*out = p;
	*len = (size_t)(q - p);
	return 0;
}
