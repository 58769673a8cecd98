/* A member's WAL at start: created as etcd creates it, or replayed (see
 * bootstrap.h). */
#include "raftd/bootstrap.h"
#include "raftd/forcenew.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcdserverpb/etcdserver.pb-c.h"
#include "raftd/alloc.h"
#include "raftd/wal/walread.h"
#include "base/diskio/diskio.h"
#include "raftpb/raft.pb-c.h"
#include "base/log/log.h"
#include "cluster/initial_cluster.h"
#include "cluster/member.h"
#include "cluster/member_json.h"

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

int bootstrap_conf_change(const struct member_info *m, uint8_t **data, uint32_t *len)
{
	Raftpb__ConfChange cc = RAFTPB__CONF_CHANGE__INIT;
	char *json;
	size_t json_len;

	if (member_json_encode(m, &json, &json_len))
		return -ENOMEM;
	/* as gogo/protobuf writes it: ID, Type, NodeID always, then Context */
	cc.has_id = cc.has_type = cc.has_node_id = cc.has_context = 1;
	cc.type = RAFTPB__CONF_CHANGE_TYPE__ConfChangeAddNode;
	cc.node_id = m->id;
	cc.context.data = (uint8_t *)json;
	cc.context.len = json_len;
	size_t n = raftpb__conf_change__get_packed_size(&cc);
	uint8_t *out = raftd_malloc(n);
	if (!out) {
		free(json);
		return -ENOMEM;
	}
	raftpb__conf_change__pack(&cc, out);
	free(json);
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
	const struct initial_cluster *c = p->cluster;
	struct raft_entry *ents;
	int rc = 0;

	if (p->join) {
		/* etcd's startNode with no peers: the leader's log brings the
		 * members */
		out->created = true;
		return 0;
	}
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

/* etcd's LoadNewestAvailable over the WAL's ValidSnapshotEntries: the
 * newest .snap file the WAL records, if any, into out->snap. */
static int bs_load_snap(const struct bootstrap_params *p, struct bootstrap_state *out)
{
	struct wal_replay pts;
	int rc;

	if (!p->snap_dir)
		return 0;
	rc = wal_snapshots(p->wal_dir, &pts);
	if (rc) {
		log_error("cannot read the WAL's snapshot records", LOG_STR("wal-dir", p->wal_dir),
			  LOG_STR("detail", pts.error[0] ? pts.error : strerror(-rc)), LOG_ERRNO(rc));
		return rc;
	}
	rc = snap_load_newest(p->snap_dir, pts.snaps, pts.n_snaps, &out->snap);
	wal_replay_free(&pts);
	if (rc == -ENOENT)
		return 0;
	if (rc) {
		log_error("cannot load the member's snapshot", LOG_STR("snap-dir", p->snap_dir),
			  LOG_ERRNO(rc));
		return rc;
	}
	out->has_snap = true;
	log_info("recovered v2 store from snapshot", LOG_U64("snapshot-index", out->snap.index),
		 LOG_U64("snapshot-term", out->snap.term),
		 LOG_U64("snapshot-size-bytes", out->snap.len));
	return 0;
}

/* --force-new-cluster (etcd's restartAsStandaloneNode): the log loses its
 * uncommitted tail and gains, committed and durable, the conf changes
 * that leave this member alone in its cluster. */
static int bs_force_new_cluster(const struct bootstrap_params *p, struct bootstrap_state *out)
{
	struct forcenew_result res;
	int rc = forcenew_apply(out->member_id, out->snap.conf.voters,
				out->has_snap ? out->snap.conf.n_voters : 0, out->snap.index, &out->hs,
				&out->entries, &out->n_entries, &res);
	if (rc) {
		log_error("cannot force a new cluster from this member's log",
			  LOG_STR("wal-dir", p->wal_dir), LOG_ERRNO(rc));
		return rc;
	}
	/* the places of the entries kept; the rest are gone or new */
	if (out->n_locs > res.first_added)
		out->n_locs = res.first_added;
	if (res.n_dropped)
		log_info("discarding uncommitted WAL entries", LOG_U64("commit-index-from-wal",
									out->hs.commit - res.n_added),
			 LOG_U64("number-of-discarded-entries", res.n_dropped));
	if (res.n_added) {
		rc = wal_save(out->wal, &out->hs, out->entries + res.first_added, res.n_added);
		if (!rc)
			rc = wal_sync(out->wal);
		if (rc) {
			log_error("cannot save the conf changes that force a new cluster",
				  LOG_STR("wal-dir", p->wal_dir), LOG_ERRNO(rc));
			return rc;
		}
	}
	log_info("forcing restart member", LOG_U64("cluster-id", out->cluster_id),
		 LOG_U64("local-member-id", out->member_id), LOG_U64("commit-index", out->hs.commit));
	return 0;
}

static int bs_replay(const struct bootstrap_params *p, struct bootstrap_state *out)
{
	struct wal_replay rep;
	struct wal *w;
	int rc;

	memset(&rep, 0, sizeof(rep));
	rc = bs_load_snap(p, out);
	if (rc) {
		if (p->wal.io)
			diskio_close(p->wal.io);
		return rc;
	}
	rc = wal_open(p->wal_dir, out->snap.index, out->snap.term, &p->wal, &w, &rep);
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
	if (!out->has_snap && raft_hardstate_is_empty(&rep.state) && rep.n_entries == 0 &&
	    p->cluster && p->cluster->count && !p->join && out->member_id == p->member_id &&
	    out->cluster_id == p->cluster->cluster_id) {
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
	if (p->force_new_cluster && (rc = bs_force_new_cluster(p, out)))
		bootstrap_state_free(out);
	return rc;
}

int bootstrap_open(const struct bootstrap_params *p, struct bootstrap_state *out)
{
	memset(out, 0, sizeof(*out));
	if (!p->wal_dir || !p->wal_dir[0]) {
		if (p->wal.io)
			diskio_close(p->wal.io);
		return -EINVAL;
	}
	if (wal_exists(p->wal_dir)) {
		int rc = bs_replay(p, out);
		if (rc) {
			snap_clear(&out->snap);
			out->has_snap = false;
		}
		return rc;
	}
	if (!p->cluster || p->cluster->count == 0 || !p->member_id) {
		if (p->wal.io)
			diskio_close(p->wal.io);
		return -EINVAL;
	}
	return bs_create(p, out);
}

/* Bytes read from the start of a segment for its metadata record: the
 * crc record and the metadata come first, a few dozen bytes. */
#define BS_IDS_READ 4096u

/* The ids in the metadata record at the start of segment name in dir. */
static int bs_segment_ids(const char *dir, const char *name, uint64_t *member_id,
			  uint64_t *cluster_id)
{
	char path[4352];
	struct wal_decoder d;
	struct wal_replay rep;
	uint64_t end;
	uint8_t *buf;
	bool torn;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = raftd_malloc(BS_IDS_READ);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	ssize_t n = pread(fd, buf, BS_IDS_READ, 0);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (!rc) {
		/* the records after the metadata may be cut off by the read:
		 * decoded as a torn tail, which does not matter here */
		wal_decoder_init(&d, &rep, 0, 0);
		(void)wal_decode_segment(&d, name, buf, (size_t)n, true, &end, &torn);
		rc = rep.metadata ? bootstrap_metadata_decode(rep.metadata, rep.metadata_len,
							      member_id, cluster_id) :
				    -ENOENT;
		wal_replay_free(&rep);
	}
	raftd_free(buf);
	return rc;
}

int bootstrap_wal_ids(const char *dir, uint64_t *member_id, uint64_t *cluster_id)
{
	char first[64] = "", last[64] = "";
	uint64_t seq, index;
	struct dirent *de;
	DIR *dp;
	int rc;

	dp = opendir(dir);
	if (!dp)
		return -errno;
	while ((de = readdir(dp))) {
		if (!wal_parse_name(de->d_name, &seq, &index) || strlen(de->d_name) >= sizeof(last))
			continue;
		if (!last[0] || strcmp(de->d_name, last) > 0)
			strcpy(last, de->d_name);
		if (!first[0] || strcmp(de->d_name, first) < 0)
			strcpy(first, de->d_name);
	}
	closedir(dp);
	if (!last[0])
		return -ENOENT;
	/* the last segment, or, should it hold no good metadata record, the
	 * first */
	rc = bs_segment_ids(dir, last, member_id, cluster_id);
	if (rc && rc != -ENOMEM && strcmp(first, last) != 0)
		rc = bs_segment_ids(dir, first, member_id, cluster_id);
	return rc;
}

void bootstrap_state_free(struct bootstrap_state *s)
{
	if (s->wal)
		wal_close(s->wal);
	s->wal = NULL;
	bs_free_entries(s->entries, s->n_entries);
	snap_clear(&s->snap);
	s->has_snap = false;
	s->entries = NULL;
	s->n_entries = 0;
}
