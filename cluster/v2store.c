/* etcd's v2 store JSON for a snapshot's membership (see v2store.h). */
#include "cluster/v2store.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/hex/hex.h"
#include "cluster/member_json.h"
#include "cluster/member_json_int.h"

/* etcd's event history holds this many events (newWatchHub(1000)). */
#define V2_HISTORY_SLOTS 1000
/* Go's zero time.Time, as json.Marshal writes it. */
#define V2_ZERO_TIME "0001-01-01T00:00:00Z"
/* v2store's defaultVersion. */
#define V2_STORE_VERSION 2

/* ---- writing ---- */

struct v2_enc {
	struct mj_buf b;
	uint64_t index;   /* the store's index: one per node written below /0 */
};

/* A node's fields up to and including "Value"; key, when not NULL, is its
 * name in its parent's Children. */
static void v2_node_head(struct v2_enc *e, const char *key, const char *path, uint64_t index,
			 const char *value)
{
	char num[64];

	if (key) {
		mj_string(&e->b, key);
		mj_add(&e->b, ":", 1);
	}
	mj_adds(&e->b, "{\"Path\":");
	mj_string(&e->b, path);
	snprintf(num, sizeof(num), ",\"CreatedIndex\":%" PRIu64 ",\"ModifiedIndex\":%" PRIu64, index,
		 index);
	mj_adds(&e->b, num);
	mj_adds(&e->b, ",\"ExpireTime\":\"" V2_ZERO_TIME "\",\"Value\":");
	mj_string(&e->b, value);
}

/* A directory's head; its children follow, then v2_dir_end. */
static void v2_dir(struct v2_enc *e, const char *key, const char *path, bool counted)
{
	v2_node_head(e, key, path, counted ? ++e->index : 0, "");
	mj_adds(&e->b, ",\"Children\":{");
}

static void v2_dir_end(struct v2_enc *e)
{
	mj_adds(&e->b, "}}");
}

static void v2_leaf(struct v2_enc *e, const char *key, const char *path, const char *value)
{
	v2_node_head(e, key, path, ++e->index, value);
	mj_adds(&e->b, ",\"Children\":null}");
}

/* An id as etcd's types.ID.String() (hex, no padding) and its position,
 * to write map keys in Go's order (sorted as strings). */
struct v2_key {
	char hex[17];
	size_t i;
};

static int v2_key_cmp(const void *a, const void *b)
{
	return strcmp(((const struct v2_key *)a)->hex, ((const struct v2_key *)b)->hex);
}

static struct v2_key *v2_sorted_keys(const uint64_t *ids, const struct member_info *v, size_t n)
{
	struct v2_key *k = calloc(n ? n : 1, sizeof(*k));
	if (!k)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		snprintf(k[i].hex, sizeof(k[i].hex), "%" PRIx64, ids ? ids[i] : v[i].id);
		k[i].i = i;
	}
	qsort(k, n, sizeof(*k), v2_key_cmp);
	return k;
}

/* json.Marshal(RaftAttributes) into b. */
static void v2_raft_attributes(struct mj_buf *b, const struct member_info *m)
{
	mj_adds(b, "{\"peerURLs\":");
	if (m->n_peer_urls)
		mj_strings(b, m->peer_urls, m->n_peer_urls);
	else
		mj_adds(b, "null");
	if (m->is_learner)
		mj_adds(b, ",\"isLearner\":true");
	mj_add(b, "}", 1);
}

static void v2_member(struct v2_enc *e, const char *hex, const struct member_info *m)
{
	char path[64], sub[96];
	struct mj_buf inner = { 0 };

	snprintf(path, sizeof(path), "/0/members/%s", hex);
	v2_dir(e, hex, path, true);
	if ((m->name && m->name[0]) || m->n_client_urls) {
		char *attr = NULL;
		size_t attr_len;
		if (member_json_encode_attributes(m, &attr, &attr_len)) {
			e->b.failed = true;
		} else {
			snprintf(sub, sizeof(sub), "%s/attributes", path);
			v2_leaf(e, "attributes", sub, attr);
			mj_add(&e->b, ",", 1);
		}
		free(attr);
	}
	v2_raft_attributes(&inner, m);
	if (inner.failed)
		e->b.failed = true;
	snprintf(sub, sizeof(sub), "%s/raftAttributes", path);
	v2_leaf(e, "raftAttributes", sub, inner.p ? inner.p : "");
	free(inner.p);
	v2_dir_end(e);
}

int v2store_encode(const struct membership *m, char **out, size_t *len)
{
	struct v2_enc e = { 0 };
	struct v2_key *mk = v2_sorted_keys(NULL, m->v, m->count);
	struct v2_key *rk = v2_sorted_keys(m->removed, NULL, m->n_removed);
	const char *sep = "";

	if (!mk || !rk) {
		free(mk);
		free(rk);
		return -ENOMEM;
	}
	mj_adds(&e.b, "{\"Root\":");
	v2_dir(&e, NULL, "/", false);
	v2_dir(&e, "0", "/0", false);
	/* Children in Go's order: members, removed_members, version */
	if (m->count) {
		v2_dir(&e, "members", "/0/members", true);
		for (size_t i = 0; i < m->count; i++) {
			if (i)
				mj_add(&e.b, ",", 1);
			v2_member(&e, mk[i].hex, &m->v[mk[i].i]);
		}
		v2_dir_end(&e);
		sep = ",";
	}
	if (m->n_removed) {
		mj_adds(&e.b, sep);
		v2_dir(&e, "removed_members", "/0/removed_members", true);
		for (size_t i = 0; i < m->n_removed; i++) {
			char path[64];
			if (i)
				mj_add(&e.b, ",", 1);
			snprintf(path, sizeof(path), "/0/removed_members/%s", rk[i].hex);
			v2_leaf(&e, rk[i].hex, path, "");
		}
		v2_dir_end(&e);
		sep = ",";
	}
	if (m->has_version) {
		char ver[32];
		snprintf(ver, sizeof(ver), "%u.%u.0", m->version_major, m->version_minor);
		mj_adds(&e.b, sep);
		v2_leaf(&e, "version", "/0/version", ver);
	}
	v2_dir_end(&e);
	mj_add(&e.b, ",", 1);
	v2_dir(&e, "1", "/1", false);
	v2_dir_end(&e);
	v2_dir_end(&e);

	mj_adds(&e.b, ",\"WatcherHub\":{\"EventHistory\":{\"Queue\":{\"Events\":[");
	for (int i = 0; i < V2_HISTORY_SLOTS; i++)
		mj_adds(&e.b, i ? ",null" : "null");
	char tail[160];
	snprintf(tail, sizeof(tail),
		 "],\"Size\":0,\"Front\":0,\"Back\":0,\"Capacity\":%d},\"StartIndex\":0,"
		 "\"LastIndex\":0}},\"CurrentIndex\":%" PRIu64 ",\"Stats\":{",
		 V2_HISTORY_SLOTS, e.index);
	mj_adds(&e.b, tail);
	static const char *const stats[] = {
		"getsSuccess", "getsFail", "setsSuccess", "setsFail", "deleteSuccess", "deleteFail",
		"updateSuccess", "updateFail", "createSuccess", "createFail",
		"compareAndSwapSuccess", "compareAndSwapFail", "compareAndDeleteSuccess",
		"compareAndDeleteFail", "expireCount", "watchers",
	};
	for (size_t i = 0; i < sizeof(stats) / sizeof(stats[0]); i++) {
		mj_adds(&e.b, i ? ",\"" : "\"");
		mj_adds(&e.b, stats[i]);
		mj_adds(&e.b, "\":0");
	}
	snprintf(tail, sizeof(tail), "},\"CurrentVersion\":%d}", V2_STORE_VERSION);
	mj_adds(&e.b, tail);
	free(mk);
	free(rk);
	return mj_finish(&e.b, out, len);
}

/* ---- reading ---- */

#define SWAP(a, b)                     \
	do {                           \
		__typeof__(a) swap_ = (a); \
		(a) = (b);                 \
		(b) = swap_;               \
	} while (0)

/* Where a node sits, as far as membership cares. */
enum v2_kind {
	V2_OTHER,        /* anything else: parsed, then ignored */
	V2_ROOT,
	V2_NS0,          /* /0 */
	V2_MEMBERS,      /* /0/members */
	V2_MEMBER,       /* /0/members/<id> */
	V2_MEMBER_RAFT,  /* /0/members/<id>/raftAttributes */
	V2_MEMBER_ATTR,  /* /0/members/<id>/attributes */
	V2_REMOVED_DIR,  /* /0/removed_members */
	V2_REMOVED,      /* /0/removed_members/<id> */
	V2_VERSION,      /* /0/version */
};

struct v2_dec {
	struct mj_in in;
	struct membership ms;
};

/* types.IDFromString: hex, at most 64 bits. */
static int v2_parse_id(const char *s, uint64_t *id)
{
	size_t n = strlen(s);

	if (n > 16 || hex_parse_u64(s, n, id))
		return -EBADMSG;
	return 0;
}

static enum v2_kind v2_child_kind(enum v2_kind parent, const char *name)
{
	switch (parent) {
	case V2_ROOT:
		return strcmp(name, "0") == 0 ? V2_NS0 : V2_OTHER;
	case V2_NS0:
		if (strcmp(name, "members") == 0)
			return V2_MEMBERS;
		if (strcmp(name, "removed_members") == 0)
			return V2_REMOVED_DIR;
		return strcmp(name, "version") == 0 ? V2_VERSION : V2_OTHER;
	case V2_MEMBERS:
		return V2_MEMBER;
	case V2_MEMBER:
		if (strcmp(name, "raftAttributes") == 0)
			return V2_MEMBER_RAFT;
		return strcmp(name, "attributes") == 0 ? V2_MEMBER_ATTR : V2_OTHER;
	case V2_REMOVED_DIR:
		return V2_REMOVED;
	default:
		return V2_OTHER;
	}
}

/* A string or null (which leaves a Go string as it was: *out stays). */
static int v2_string_or_null(struct mj_in *in, char **out)
{
	mj_ws(in);
	if (in->end - in->p >= 4 && memcmp(in->p, "null", 4) == 0) {
		in->p += 4;
		return 0;
	}
	char *s;
	int rc = mj_string_in(in, &s);
	if (rc)
		return rc;
	free(*out);
	*out = s;
	return 0;
}

static int v2_node(struct v2_dec *d, enum v2_kind kind, const char *name,
		   struct member_info *member);

/* A node's Children: null, or an object of name -> node. *is_dir says
 * which. */
static int v2_children(struct v2_dec *d, enum v2_kind kind, struct member_info *member,
		       bool *is_dir)
{
	struct mj_in *in = &d->in;

	mj_ws(in);
	if (in->end - in->p >= 4 && memcmp(in->p, "null", 4) == 0) {
		in->p += 4;
		*is_dir = false;
		return 0;
	}
	if (!mj_eat(in, '{'))
		return -EBADMSG;
	*is_dir = true;
	if (mj_eat(in, '}'))
		return 0;
	do {
		char *key;
		int rc = mj_string_in(in, &key);
		if (rc)
			return rc;
		enum v2_kind ck = v2_child_kind(kind, key);
		if (kind == V2_MEMBER && ck == V2_OTHER)
			rc = -EBADMSG; /* etcd: unknown key under a member */
		else if (!mj_eat(in, ':'))
			rc = -EBADMSG;
		else
			rc = v2_node(d, ck, key, member);
		free(key);
		if (rc)
			return rc;
	} while (mj_eat(in, ','));
	return mj_eat(in, '}') ? 0 : -EBADMSG;
}

/* What a node at kind means for membership, once it is read. */
static int v2_node_done(struct v2_dec *d, enum v2_kind kind, const char *name, bool is_dir,
			const char *value, struct member_info *member)
{
	uint64_t id;
	int rc;

	switch (kind) {
	case V2_MEMBER_RAFT:
	case V2_MEMBER_ATTR: {
		/* only the struct's own fields count: RaftAttributes has
		 * peerURLs and isLearner, Attributes name and clientURLs */
		struct member_info t = { 0 };
		if (is_dir || !value)
			return -EBADMSG;
		rc = member_json_decode(value, strlen(value), &t);
		if (!rc && kind == V2_MEMBER_RAFT) {
			SWAP(member->peer_urls, t.peer_urls);
			SWAP(member->n_peer_urls, t.n_peer_urls);
			member->is_learner = t.is_learner;
		} else if (!rc) {
			SWAP(member->name, t.name);
			SWAP(member->client_urls, t.client_urls);
			SWAP(member->n_client_urls, t.n_client_urls);
		}
		member_info_clear(&t);
		return rc;
	}
	case V2_REMOVED:
		if (v2_parse_id(name, &id))
			return -EBADMSG;
		return membership_mark_removed(&d->ms, id);
	case V2_VERSION:
		if (is_dir || !value)
			return -EBADMSG;
		return membership_set_version(&d->ms, value, strlen(value)) ? -EBADMSG : 0;
	default:
		return 0;
	}
}

static int v2_node(struct v2_dec *d, enum v2_kind kind, const char *name,
		   struct member_info *member)
{
	struct mj_in *in = &d->in;
	struct member_info m = { 0 };
	char *value = NULL;
	bool is_dir = false;
	int rc = -EBADMSG;

	mj_ws(in);
	if (in->end - in->p >= 4 && memcmp(in->p, "null", 4) == 0) {
		in->p += 4; /* a nil node: etcd's Get would crash on it */
		return kind == V2_OTHER || kind == V2_ROOT ? 0 : -EBADMSG;
	}
	if (++in->depth > MJ_MAX_DEPTH || !mj_eat(in, '{'))
		return -EBADMSG;
	if (kind == V2_MEMBER) {
		if (v2_parse_id(name, &m.id))
			return -EBADMSG;
		member = &m;
	}
	if (!mj_eat(in, '}')) {
		do {
			char *key;
			rc = mj_string_in(in, &key);
			if (rc)
				goto out;
			if (!mj_eat(in, ':'))
				rc = -EBADMSG;
			else if (strcasecmp(key, "Children") == 0)
				rc = v2_children(d, kind, member, &is_dir);
			else if (strcasecmp(key, "Value") == 0)
				rc = v2_string_or_null(in, &value);
			else
				rc = mj_skip_value(in);
			free(key);
			if (rc)
				goto out;
		} while (mj_eat(in, ','));
		if (!mj_eat(in, '}')) {
			rc = -EBADMSG;
			goto out;
		}
	}
	in->depth--;
	rc = v2_node_done(d, kind, name, is_dir, value ? value : "", member);
	if (!rc && kind == V2_MEMBER)
		rc = membership_put(&d->ms, &m);
out:
	free(value);
	member_info_clear(&m);
	return rc;
}

int v2store_decode(const void *p, size_t len, struct membership *out)
{
	struct v2_dec d = { .in = { p, (const unsigned char *)p + len, 0 } };
	int rc = -EBADMSG;

	membership_init(&d.ms);
	if (!mj_eat(&d.in, '{'))
		goto out_free;
	if (!mj_eat(&d.in, '}')) {
		do {
			char *key;
			rc = mj_string_in(&d.in, &key);
			if (rc)
				goto out_free;
			if (!mj_eat(&d.in, ':'))
				rc = -EBADMSG;
			else if (strcasecmp(key, "Root") == 0)
				rc = v2_node(&d, V2_ROOT, "", NULL);
			else
				rc = mj_skip_value(&d.in);
			free(key);
			if (rc)
				goto out_free;
		} while (mj_eat(&d.in, ','));
		if (!mj_eat(&d.in, '}')) {
			rc = -EBADMSG;
			goto out_free;
		}
	}
	mj_ws(&d.in);
	if (d.in.p != d.in.end) {
		rc = -EBADMSG;
		goto out_free;
	}
	membership_free(out);
	*out = d.ms;
	return 0;

out_free:
	membership_free(&d.ms);
	return rc;
}
