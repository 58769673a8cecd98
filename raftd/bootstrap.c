/* A member's WAL at start: created as etcd creates it, or replayed (see
 * bootstrap.h). */
#include "raftd/bootstrap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "etcdserverpb/etcdserver.pb-c.h"
#include "raftd/alloc.h"
#include "shm/diskio/diskio.h"
#include "raftpb/raft.pb-c.h"
#include "shm/log/log.h"
#include "shm/config/member.h"

/* ---- the protobuf messages (etcd's schema through protobuf-c) ---- */

/* protobuf-c allocations through raftd's hook, noting a failure so that
 * "out of memory" is not mistaken for "corrupt". */
struct bs_alloc {
	ProtobufCAllocator a;
	bool failed;
};

static void *bs_pb_alloc(void *data, size_t size)
{
	struct bs_alloc *al = data;
	void *p = raftd_malloc(size);
	if (!p)
		al->failed = true;
	return p;
}

static void bs_pb_free(void *data, void *p)
{
	(void)data;
	raftd_free(p);
}

size_t bootstrap_metadata_encode(uint64_t node_id, uint64_t cluster_id,
				 uint8_t buf[BOOTSTRAP_METADATA_MAX])
{
	/* gogoproto non-nullable: both fields always written */
	Etcdserverpb__Metadata m = ETCDSERVERPB__METADATA__INIT;
	m.has_nodeid = m.has_clusterid = 1;
	m.nodeid = node_id;
	m.clusterid = cluster_id;
	return etcdserverpb__metadata__pack(&m, buf);
}

int bootstrap_metadata_decode(const uint8_t *p, size_t len, uint64_t *node_id,
			      uint64_t *cluster_id)
{
	struct bs_alloc al = { .a = { bs_pb_alloc, bs_pb_free, NULL } };
	al.a.allocator_data = &al;
	Etcdserverpb__Metadata *m = etcdserverpb__metadata__unpack(&al.a, len, p);

	if (!m)
		return al.failed ? -ENOMEM : -EBADMSG;
	*node_id = m->nodeid;
	*cluster_id = m->clusterid;
	etcdserverpb__metadata__free_unpacked(m, &al.a);
	return 0;
}

/* ---- the member as etcd's JSON ---- */

struct bs_buf {
	uint8_t *p;
	size_t len;
	size_t cap;
	bool failed; /* out of memory: everything after is dropped */
};

static void bs_add(struct bs_buf *b, const void *data, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 128;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *p = raftd_realloc(b->p, cap);
		if (!p) {
			b->failed = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void bs_adds(struct bs_buf *b, const char *s)
{
	bs_add(b, s, strlen(s));
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 if it is not one
 * (Go's utf8.DecodeRuneInString then gives RuneError, width 1). */
static size_t bs_utf8_len(const unsigned char *s, size_t n, uint32_t *rune)
{
	size_t k;
	uint32_t c = s[0], min;

	if (c < 0x80) {
		*rune = c;
		return 1;
	} else if ((c & 0xe0) == 0xc0) {
		k = 2, c &= 0x1f, min = 0x80;
	} else if ((c & 0xf0) == 0xe0) {
		k = 3, c &= 0x0f, min = 0x800;
	} else if ((c & 0xf8) == 0xf0) {
		k = 4, c &= 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < k)
		return 0;
	for (size_t i = 1; i < k; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*rune = c;
	return k;
}

/* A JSON string as Go's encoding/json writes it (HTML-safe escapes,
 * U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD). */
static void bs_json_string(struct bs_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s), i = 0;
	char esc[8];

	bs_add(b, "\"", 1);
	while (i < n) {
		uint32_t rune;
		size_t k = bs_utf8_len(u + i, n - i, &rune);
		if (k == 0) {
			bs_adds(b, "\\ufffd");
			i++;
			continue;
		}
		if (rune == '"' || rune == '\\') {
			esc[0] = '\\', esc[1] = (char)rune;
			bs_add(b, esc, 2);
		} else if (rune == '\n') {
			bs_adds(b, "\\n");
		} else if (rune == '\r') {
			bs_adds(b, "\\r");
		} else if (rune == '\t') {
			bs_adds(b, "\\t");
		} else if (rune < 0x20 || rune == '<' || rune == '>' || rune == '&') {
			snprintf(esc, sizeof(esc), "\\u00%c%c", hex[rune >> 4], hex[rune & 15]);
			bs_add(b, esc, 6);
		} else if (rune == 0x2028 || rune == 0x2029) {
			bs_adds(b, rune == 0x2028 ? "\\u2028" : "\\u2029");
		} else {
			bs_add(b, u + i, k);
		}
		i += k;
	}
	bs_add(b, "\"", 1);
}

/* json.Marshal(membership.Member) of a new member: id, peerURLs, and the
 * name (clientURLs are empty before it publishes, so omitted). */
static void bs_member_json(struct bs_buf *b, const struct member_info *m)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRIu64, m->id);
	bs_adds(b, "{\"id\":");
	bs_adds(b, num);
	bs_adds(b, ",\"peerURLs\":[");
	for (size_t i = 0; i < m->n_peer_urls; i++) {
		if (i)
			bs_add(b, ",", 1);
		bs_json_string(b, m->peer_urls[i]);
	}
	bs_add(b, "]", 1);
	if (m->name && m->name[0]) {
		bs_adds(b, ",\"name\":");
		bs_json_string(b, m->name);
	}
	bs_add(b, "}", 1);
}

int bootstrap_conf_change(const struct member_info *m, uint8_t **data, uint32_t *len)
{
	struct bs_buf ctx = { 0 };
	Raftpb__ConfChange cc = RAFTPB__CONF_CHANGE__INIT;

	bs_member_json(&ctx, m);
	if (ctx.failed) {
		raftd_free(ctx.p);
		return -ENOMEM;
	}
	/* as gogo/protobuf writes it: ID, Type, NodeID always, then Context */
	cc.has_id = cc.has_type = cc.has_node_id = cc.has_context = 1;
	cc.type = RAFTPB__CONF_CHANGE_TYPE__ConfChangeAddNode;
	cc.node_id = m->id;
	cc.context.data = ctx.p;
	cc.context.len = ctx.len;
	size_t n = raftpb__conf_change__get_packed_size(&cc);
	uint8_t *out = raftd_malloc(n);
	if (!out) {
		raftd_free(ctx.p);
		return -ENOMEM;
	}
	raftpb__conf_change__pack(&cc, out);
	raftd_free(ctx.p);
	*data = out;
	*len = (uint32_t)n;
	return 0;
}

/* ---- opening ---- */

static void bs_free_entries(struct raft_entry *ents, size_t n)
{
	for (size_t i = 0; i < n; i++)
		raft_entry_free_data(&ents[i]);
	raftd_free(ents);
}

/* Appends the bootstrap entries and hard state to a new WAL and syncs
 * them; on success out holds them. */
static int bs_bootstrap(const struct bootstrap_params *p, struct wal *w,
			struct bootstrap_state *out)
{
	const struct member_cluster *c = p->cluster;
	struct raft_entry *ents;
	int rc = 0;

	ents = raftd_calloc(c->count, sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	for (size_t i = 0; i < c->count && !rc; i++) {
		ents[i].term = 1;
		ents[i].index = i + 1;
		ents[i].type = RAFT_ENTRY_CONF_CHANGE;
		rc = bootstrap_conf_change(&c->v[i], &ents[i].data, &ents[i].len);
	}
	struct raft_hardstate hs = { .term = 1, .vote = 0, .commit = c->count };
	if (!rc)
		rc = wal_save(w, &hs, ents, c->count);
	if (!rc)
		rc = wal_sync(w);
	if (rc) {
		log_error("cannot write the bootstrap entries to the new WAL",
			  LOG_STR("wal-dir", p->wal_dir), LOG_ERRNO(rc));
		bs_free_entries(ents, c->count);
		return rc;
	}
	out->hs = hs;
	out->entries = ents;
	out->n_entries = c->count;
	out->created = true;
	return 0;
}

/* Creates the WAL with the metadata record, then bootstraps it. */
static int bs_create(const struct bootstrap_params *p, struct bootstrap_state *out)
{
	uint8_t md[BOOTSTRAP_METADATA_MAX];
	size_t md_len = bootstrap_metadata_encode(p->member_id, p->cluster->cluster_id, md);
	struct wal *w;
	int rc;

	rc = wal_create(p->wal_dir, md, md_len, &p->wal, &w);
	if (rc) {
		log_error("cannot create the WAL", LOG_STR("wal-dir", p->wal_dir), LOG_ERRNO(rc));
		return rc;
	}
	rc = bs_bootstrap(p, w, out);
	if (rc) {
		wal_close(w);
		return rc;
	}
	out->wal = w;
	out->member_id = p->member_id;
	out->cluster_id = p->cluster->cluster_id;
	return 0;
}

static int bs_replay(const struct bootstrap_params *p, struct bootstrap_state *out)
{
	struct wal_replay rep;
	struct wal *w;
	int rc;

	memset(&rep, 0, sizeof(rep));
	rc = wal_open(p->wal_dir, 0, 0, &p->wal, &w, &rep);
	if (rc == -EBUSY)
		return rc; /* logged by the WAL; the caller may wait for it */
	if (rc) {
		log_error("cannot open the WAL", LOG_STR("wal-dir", p->wal_dir),
			  LOG_STR("detail", rep.error[0] ? rep.error : strerror(-rc)),
			  LOG_ERRNO(rc));
		return rc;
	}
	out->member_id = p->member_id;
	out->cluster_id = p->cluster ? p->cluster->cluster_id : 0;
	if (rep.metadata) {
		rc = bootstrap_metadata_decode(rep.metadata, rep.metadata_len, &out->member_id,
					       &out->cluster_id);
		if (rc) {
			if (rc == -EBADMSG)
				log_error("the WAL's metadata record is not an etcdserverpb.Metadata; the member's log is corrupt, restore from a snapshot",
					  LOG_STR("wal-dir", p->wal_dir));
			wal_close(w);
			wal_replay_free(&rep);
			return rc;
		}
	}
	if (p->member_id && out->member_id != p->member_id)
		log_warn("the WAL belongs to another member id than the flags derive; using the WAL's",
			 LOG_U64("wal-member-id", out->member_id),
			 LOG_U64("flags-member-id", p->member_id));
	if (raft_hardstate_is_empty(&rep.state) && rep.n_entries == 0 && p->cluster &&
	    p->cluster->count) {
		/* created, but stopped before its bootstrap entries were
		 * durable: bootstrap it now */
		wal_replay_free(&rep);
		rc = bs_bootstrap(p, w, out);
		if (rc) {
			wal_close(w);
			return rc;
		}
		out->wal = w;
		return 0;
	}
	out->wal = w;
	out->hs = rep.state;
	out->entries = rep.entries;
	out->n_entries = rep.n_entries;
	rep.entries = NULL;
	rep.n_entries = 0;
	wal_replay_free(&rep);
	return 0;
}

int bootstrap_open(const struct bootstrap_params *p, struct bootstrap_state *out)
{
	memset(out, 0, sizeof(*out));
	if (!p->wal_dir || !p->wal_dir[0]) {
		if (p->wal.io)
			diskio_close(p->wal.io);
		return -EINVAL;
	}
	if (wal_exists(p->wal_dir))
		return bs_replay(p, out);
	if (!p->cluster || p->cluster->count == 0 || !p->member_id) {
		if (p->wal.io)
			diskio_close(p->wal.io);
		return -EINVAL;
	}
	return bs_create(p, out);
}

void bootstrap_state_free(struct bootstrap_state *s)
{
	if (s->wal)
		wal_close(s->wal);
	s->wal = NULL;
	bs_free_entries(s->entries, s->n_entries);
	s->entries = NULL;
	s->n_entries = 0;
}
