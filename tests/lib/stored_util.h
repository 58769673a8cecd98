/*
 * Helpers for stored's apply-loop tests: entry bytes as gatewayd proposes
 * them (an InternalRaftRequest with the origin appended), committed
 * records as raftd pushes them, results as a gateway reads them, a member
 * region with the roles and a slot held by separate handles, and a dump
 * of every bucket of a db file.
 *
 * Header-only (static functions), on top of shm_testlib.h and the MVCC
 * tests' helpers (mvcc_util.h: byte buffers, bucket dumps).
 */
#ifndef CETCD_TEST_STORED_UTIL_H
#define CETCD_TEST_STORED_UTIL_H

#include "shm_testlib.h"
#include "mvcc_util.h"

#include "etcdserverpb/raft_internal.pb-c.h"
#include "shm/msg.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"
#include "shm/status.h"
#include "stored/btree/btree.h"
#include "stored/apply.h"
#include "stored/auth.h"
#include "stored/loop.h"
#include "stored/mvcc/mvcc.h"
#include "shm/doorbell.h"
#include "base/log/log.h"

#include <sys/prctl.h>

#define TST_MEMBER 0x1122334455667788ull
#define TST_CLUSTER 0x0a0b0c0d0e0f1011ull

/* A store in <dir>/db with a batch open, for the applier's tests
 * (tests/unit/stored/test_apply.c, test_auth.c): ids names the member
 * and, through au (loaded from the db, bcrypt cost 4), the auth store. */
struct tst_store {
	char path[300];
	struct btree_db *db;
	struct mvcc_store *s;
	struct arena a;
	uint64_t index;               /* the last entry's */
	struct stored_auth au;
	struct stored_apply_ids ids;
};

static inline void tst_store_open_opts(struct tst_store *f, const char *dir,
				       const struct mvcc_store_opts *so)
{
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30 };

	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s/db", dir);
	CHECK_EQ(btree_db_open(f->path, &o, &f->db), 0);
	CHECK_EQ(mvcc_store_open(f->db, so, &f->s), 0);
	arena_init(&f->a);
	CHECK_EQ(mvcc_batch_begin(f->s), 0);
	f->au.bcrypt_cost = 4;
	CHECK_EQ(stored_auth_load(mvcc_batch_txn(f->s), &f->au), 0);
	f->ids = (struct stored_apply_ids){ .member_id = TST_MEMBER, .cluster_id = TST_CLUSTER,
					    .auth = &f->au };
}

static inline void tst_store_open(struct tst_store *f, const char *dir)
{
	tst_store_open_opts(f, dir, NULL);
}

/* Commits the batch, closes the store and removes the db. */
static inline void tst_store_close(struct tst_store *f)
{
	CHECK_EQ(mvcc_batch_commit(f->s, NULL), 0);
	arena_release(&f->a);
	mvcc_store_close(f->s);
	btree_db_close(f->db);
	unlink(f->path);
}

/* Entry data: req packed, then the origin field (o may be NULL). */
static inline void tst_entry(const Etcdserverpb__InternalRaftRequest *req,
			     const struct msg_origin *o, struct tbuf *out)
{
	uint8_t origin[MSG_ORIGIN_MAX_BYTES];

	out->len = 0;
	tm_pack(&req->base, out);
	if (o)
		tbuf_add(out, origin, msg_origin_encode(o, origin));
}

static inline struct msg_origin tst_origin(uint32_t slot, uint64_t generation, uint64_t rid)
{
	struct msg_origin o = {
		.member_id = TST_MEMBER, .slot = slot, .generation = generation,
		.request_id = rid,
	};
	return o;
}

/* Entry data of a Put. */
static inline void tst_put(const char *key, const char *val, const struct msg_origin *o,
			   struct tbuf *out)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;

	put.key = tb(key);
	put.value = tb(val);
	req.put = &put;
	tst_entry(&req, o, out);
}

/* Entry data of a DeleteRange [key, end) (end NULL: the key alone). */
static inline void tst_delete(const char *key, const char *end, bool prev_kv,
			      const struct msg_origin *o, struct tbuf *out)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;

	del.key = tb(key);
	if (end)
		del.range_end = tb(end);
	del.prev_kv = prev_kv;
	req.delete_range = &del;
	tst_entry(&req, o, out);
}

/* Entry data of a Compaction. */
static inline void tst_compact(int64_t rev, bool physical, const struct msg_origin *o,
			       struct tbuf *out)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__CompactionRequest c = ETCDSERVERPB__COMPACTION_REQUEST__INIT;

	c.revision = rev;
	c.physical = physical;
	req.compaction = &c;
	tst_entry(&req, o, out);
}

/* Pushes one MSG_COMMITTED record as raftd does. Returns ring_push's code. */
static inline int tst_commit(struct ring *ring, uint64_t index, uint64_t term, uint32_t type,
			     const void *data, size_t len)
{
	struct msg_committed h = {
		.index = index, .term = term, .entry_type = type, .data_len = (uint32_t)len,
	};
	uint8_t *rec = malloc(sizeof(h) + len + 1);
	int rc;

	CHECK(rec != NULL);
	memcpy(rec, &h, sizeof(h));
	if (len)
		memcpy(rec + sizeof(h), data, len);
	rc = ring_push(ring, MSG_COMMITTED, rec, (uint32_t)(sizeof(h) + len));
	free(rec);
	return rc;
}

/* Pushes one MSG_SNAPSHOT_INSTALL record as raftd does. Returns
 * ring_push's code. */
static inline int tst_install(struct ring *ring, uint64_t index, uint64_t term, const char *path)
{
	struct msg_snapshot_install m = {
		.index = index, .term = term, .path_len = (uint32_t)strlen(path),
	};
	uint8_t *rec = malloc(sizeof(m) + m.path_len);
	int rc;

	CHECK(rec != NULL);
	memcpy(rec, &m, sizeof(m));
	memcpy(rec + sizeof(m), path, m.path_len);
	rc = ring_push(ring, MSG_SNAPSHOT_INSTALL, rec, (uint32_t)(sizeof(m) + m.path_len));
	free(rec);
	return rc;
}

/* One result as a gateway receives it. */
struct tst_result {
	struct msg_result h;
	struct tbuf body;
};

/* Takes the next MSG_RESULT from a slot's ring from stored, skipping hello
 * acks. 0, or -EAGAIN when none waits. */
static inline int tst_take_result(struct ring *ring, struct tst_result *out)
{
	struct ring_rec rec;

	while (ring_peek(ring, &rec) == 0) {
		if (rec.type != MSG_RESULT) {
			ring_release(ring, &rec);
			continue;
		}
		CHECK(rec.len >= sizeof(out->h));
		memcpy(&out->h, rec.data, sizeof(out->h));
		CHECK_EQ(rec.len, sizeof(out->h) + out->h.body_len);
		out->body.len = 0;
		tbuf_add(&out->body, (const uint8_t *)rec.data + sizeof(out->h), out->h.body_len);
		ring_release(ring, &rec);
		return 0;
	}
	return -EAGAIN;
}

static inline bool tst_body_is(const struct tst_result *r, const char *text)
{
	return r->body.len == strlen(text) && memcmp(r->body.p, text, r->body.len) == 0;
}

/* ---- dumps ---- */

/* Dumps the durable state of the db file at path (no writer running). */
static inline void tst_dump_file(const char *path, struct tbuf *out)
{
	struct btree_reader *rd;
	struct btree_root root;
	struct btree_txn *t;

	CHECK_EQ(btree_reader_open(path, NULL, &rd), 0);
	CHECK_EQ(btree_reader_durable(rd, &root), 0);
	CHECK_EQ(btree_reader_begin(rd, &root, &t), 0);
	tm_dump(t, NULL, out);
	btree_txn_end(t);
	btree_reader_close(rd);
}

/* The consistent index in the meta bucket of the durable state of the db
 * file at path (no writer running). */
static inline uint64_t tst_file_index(const char *path)
{
	struct btree_reader *rd;
	struct btree_root root;
	struct btree_txn *t;
	struct btree_bucket *meta;
	const uint8_t *v;
	size_t vlen;
	uint64_t index = 0;

	CHECK_EQ(btree_reader_open(path, NULL, &rd), 0);
	CHECK_EQ(btree_reader_durable(rd, &root), 0);
	CHECK_EQ(btree_reader_begin(rd, &root, &t), 0);
	CHECK_EQ(btree_bucket_open(t, NULL, "meta", 4, &meta), 0);
	CHECK_EQ(btree_get(meta, "consistent_index", 16, &v, &vlen), 0);
	CHECK_EQ(vlen, 8u);
	for (int i = 0; i < 8; i++)
		index = index << 8 | v[i];
	btree_txn_end(t);
	btree_reader_close(rd);
	return index;
}

/* A scratch member: the region (created by `launcher`) and a data dir, in
 * a directory of its own under the process's scratch directory. */
struct tst_member {
	char dir[300];
	char region_path[340];
	char data_dir[340];
	struct shm_region *launcher;
};

static char tst_base[256] __attribute__((unused));
static unsigned tst_seq __attribute__((unused));

static inline void tst_member_init(struct tst_member *m, uint32_t max_request_bytes)
{
	struct shm_region_params p = {
		.slot_count = 4, .max_request_bytes = max_request_bytes, .member_id = TST_MEMBER,
		.cache_bytes = 1u << 20,  /* stored's latest-entry cache */
	};

	if (!tst_base[0])
		test_tmpdir(tst_base, sizeof(tst_base));
	snprintf(m->dir, sizeof(m->dir), "%s/m%u", tst_base, tst_seq++);
	CHECK_EQ(mkdir(m->dir, 0700), 0);
	snprintf(m->region_path, sizeof(m->region_path), "%s/region", m->dir);
	snprintf(m->data_dir, sizeof(m->data_dir), "%s/data", m->dir);
	CHECK_EQ(shm_region_create(m->region_path, &p, &m->launcher), 0);
}

static inline struct shm_region *tst_attach(struct tst_member *m)
{
	struct shm_region *r;

	CHECK_EQ(shm_region_attach(m->region_path, &r), 0);
	return r;
}

/* Removes the member's files and directories (after every handle of it
 * is detached). */
static inline void tst_member_clean(struct tst_member *m)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/member/snap", m->data_dir);
	test_rmdir(p);
	snprintf(p, sizeof(p), "%s/member", m->data_dir);
	test_rmdir(p);
	test_rmdir(m->data_dir);
	test_rmdir(m->dir);
}

/* ---- stored's loop in this process ---- */

/* A member whose stored loop runs in this process: region handles of its
 * own play stored (the loop's), raftd (the committed ring) and a gateway
 * (a slot and its ring of results). */
struct tst_loop {
	struct tst_member m;
	struct shm_region *st, *rf, *gw;
	struct shm_slot_ref slot;
	struct ring *committed, *results;
	struct stored_loop_opts o;   /* the loop's; a test may change them */
	struct stored_loop *l;       /* NULL until a test opens it */
};

/* The member, its handles and roles, and o: checkpoints only when a test
 * asks, batches of batch_entries, a 1 GiB map. The loop is not open. */
static inline void tst_loop_init(struct tst_loop *e, uint32_t batch_entries)
{
	memset(e, 0, sizeof(*e));
	tst_member_init(&e->m, 64 * 1024);
	e->st = tst_attach(&e->m);
	e->rf = tst_attach(&e->m);
	e->gw = tst_attach(&e->m);
	CHECK_EQ(shm_role_claim(e->st, SHM_ROLE_STORED), 0);
	CHECK_EQ(shm_role_claim(e->rf, SHM_ROLE_RAFTD), 0);
	CHECK_EQ(shm_slot_claim(e->gw, &e->slot), 0);
	e->committed = shm_daemon_ring(e->rf, SHM_RING_COMMITTED);
	e->results = shm_slot_ring(e->gw, e->slot.index, SHM_SLOT_FROM_STORED);
	e->o.data_dir = e->m.data_dir;
	e->o.member_id = TST_MEMBER;
	e->o.cluster_id = TST_CLUSTER;
	e->o.checkpoint_ms = 600000;
	e->o.checkpoint_entries = 1000000;
	e->o.batch_entries = batch_entries;
	e->o.map_size = 1ull << 30;
}

/* Frees the loop (without a checkpoint), detaches and removes it all. */
static inline void tst_loop_fini(struct tst_loop *e)
{
	stored_loop_free(e->l);
	e->l = NULL;
	shm_region_detach(e->gw);
	shm_region_detach(e->rf);
	shm_region_detach(e->st);
	shm_region_detach(e->m.launcher);
	tst_member_clean(&e->m);
}

/* ---- reading what stored published ---- */

/* A read of the db file at a root stored published (st, its status
 * record): tst_view_open, then mvcc_* on v, then tst_view_close. */
struct tst_view {
	struct btree_reader *db;
	struct btree_txn *t;
	struct mvcc_view v;
};

static inline void tst_view_open(struct tst_view *w, const char *db_path,
				 const struct status_stored *st)
{
	struct btree_root root = { st->root_page, st->txid, st->high_water_page };

	CHECK_EQ(btree_reader_open(db_path, NULL, &w->db), 0);
	CHECK_EQ(btree_reader_begin(w->db, &root, &w->t), 0);
	CHECK_EQ(mvcc_view_open(w->t, &w->v), 0);
}

static inline void tst_view_close(struct tst_view *w)
{
	mvcc_view_close(&w->v);
	btree_txn_end(w->t);
	btree_reader_close(w->db);
}

/* The number i of put kv, checked: its key is a letter and i (1..upto),
 * its value "v<i>", its mod revision i + 1 (put i is entry i + 1, after
 * the member's first entry). */
static inline uint64_t tst_put_number(const struct mvcc_kv *kv, uint64_t upto)
{
	char key[16], val[24];
	unsigned long long i;

	CHECK(kv->key_len > 1 && kv->key_len < sizeof(key));
	memcpy(key, kv->key, kv->key_len);
	key[kv->key_len] = '\0';
	i = strtoull(key + 1, NULL, 10);
	CHECK(i >= 1 && i <= upto);
	snprintf(val, sizeof(val), "v%llu", i);
	CHECK(kv->value_len == strlen(val) && memcmp(kv->value, val, kv->value_len) == 0);
	CHECK_EQ(kv->mod_rev, (int64_t)i + 1);
	return i;
}

/* ---- stored as a forked child ---- */

/* stored's published record, which must be readable. */
static inline struct status_stored tst_status(struct shm_region *r)
{
	struct status_stored st;
	CHECK_EQ(status_stored_read(r, &st), 0);
	return st;
}

static volatile sig_atomic_t tst_child_stop __attribute__((unused));
static struct shm_doorbell *tst_child_bell __attribute__((unused));

static inline void tst_child_on_term(int sig)
{
	(void)sig;
	tst_child_stop = 1;
	if (tst_child_bell)
		shm_doorbell_ring(tst_child_bell);
}

/* The body of a forked stored process: the loop as stored/main.c runs it
 * (o's data dir, the region at region_path), until SIGTERM, then a last
 * checkpoint. Waits for a killed predecessor's role to go. Exits 0, or
 * 2..5 for the step that failed. */
static inline void tst_stored_child(const char *region_path, const struct stored_loop_opts *o,
				    enum log_level level)
{
	struct sigaction sa = { .sa_handler = tst_child_on_term };
	struct stored_loop *l;
	struct shm_region *r;
	int rc;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	log_set_level(level);
	if (shm_region_attach(region_path, &r))
		test_child_exit(2);
	/* the killed predecessor's lock goes with its death */
	for (int i = 0; (rc = shm_role_claim(r, SHM_ROLE_STORED)) == -EBUSY && i < 5000; i++)
		usleep(1000);
	if (rc)
		test_child_exit(3);
	tst_child_bell = shm_role_doorbell(r, SHM_ROLE_STORED);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	if (stored_loop_open(r, o, &l))
		test_child_exit(4);
	rc = stored_loop_run(l, &tst_child_stop);
	if (rc == 0)
		rc = stored_loop_checkpoint(l);
	stored_loop_free(l);
	shm_region_detach(r);
	test_child_exit(rc ? 5 : 0);
}

#endif
