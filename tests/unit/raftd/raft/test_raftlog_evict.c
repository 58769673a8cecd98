/*
 * Unit tests of entry data on disk only (raftd/raft/raftlog.c's
 * raftlog_evict, raftlog_load and raftlog_unload, read back through
 * raftd/wal/wal.c's wal_read_entry): data leaves memory oldest first,
 * only applied and durable entries with a place in the WAL, down to three
 * quarters of what may be kept; it comes back byte for byte from any
 * segment, and goes again; a record that is not the entry, or corrupt,
 * or in a purged segment, is refused and named; the log's byte counts
 * stay right through compaction and truncation; a replay gives restored
 * entries their places; nothing leaks. Then the
 * Raft core: a follower far behind is caught up by a leader whose log
 * holds the data on disk only, and one the leader cannot read back for
 * is caught up by a snapshot.
 */
#include <fcntl.h>

#include "wal_util.h"

#include "base/diskio/diskio.h"
#include "base/log/log.h"
#include "raftd/raft/raft.h"
#include "raftd/wal/wal.h"

#define LEN_MAX 3000u

static uint32_t len_of(uint64_t i)
{
	return (uint32_t)(i % 5 == 0 ? 0 : (i * 131) % LEN_MAX);
}

static int wal_loader(void *ctx, const struct raft_entry *e, const struct raftlog_loc *loc,
		      uint8_t **data)
{
	return wal_read_entry(ctx, e, loc, data);
}

/* A WAL in dir with segments of seg bytes, and a log of entries 1..n in
 * term 1 saved to it through wal_save_locs in batches of 16, durable,
 * committed and applied. */
static struct wal *log_with_wal(const char *dir, uint64_t seg, struct raftlog *l, uint64_t n)
{
	static uint8_t buf[LEN_MAX];
	struct wal_options o = { .segment_bytes = seg };
	struct wal *w;
	CHECK_EQ(diskio_plain_open(-1, &o.io), 0);
	CHECK_EQ(wal_create(dir, NULL, 0, &o, &w), 0);
	raftlog_init(l, 0, 0);
	raftlog_set_loader(l, wal_loader, w);
	for (uint64_t i = 1; i <= n;) {
		uint64_t first = i;
		for (int k = 0; k < 16 && i <= n; k++, i++) {
			struct raft_entry e = wt_entry(i, 1, len_of(i), buf);
			CHECK_EQ(raftlog_append(l, &e, 1), 0);
		}
		size_t cnt;
		const struct raft_entry *s = raftlog_slice(l, first - 1, i - 1, &cnt);
		struct raft_hardstate hs = { 1, 1, i - 1 };
		CHECK_EQ(wal_save_locs(w, &hs, s, cnt, raftlog_locs_from(l, first)), 0);
		CHECK_EQ(wal_sync(w), 0);
	}
	l->persisting = l->stabled = l->committed = l->applying = n;
	return w;
}

static uint64_t data_sum(const struct raftlog *l)
{
	uint64_t sum = 0;
	for (uint64_t i = raftlog_first_index(l); i <= raftlog_last_index(l); i++) {
		const struct raft_entry *e = raftlog_entry(l, i);
		if (e->data)
			sum += e->len;
	}
	return sum;
}

static uint64_t size_sum(const struct raftlog *l)
{
	uint64_t sum = 0;
	for (uint64_t i = raftlog_first_index(l); i <= raftlog_last_index(l); i++)
		sum += raftlog_entry_bytes(raftlog_entry(l, i));
	return sum;
}

static void check_counts(const struct raftlog *l)
{
	CHECK_EQ(l->resident, data_sum(l));
	CHECK_EQ(l->bytes, size_sum(l));
}

static void test_evict_and_load(void)
{
	char dir[512];
	struct raftlog l;
	long live0 = wt_live_allocs();
	wt_path(dir, sizeof(dir), "evict");
	/* small segments: the entries lie in many of them */
	struct wal *w = log_with_wal(dir, 64 * 1024, &l, 2000);
	check_counts(&l);
	uint64_t all = l.resident, size = l.bytes;
	CHECK(all > 2 * 1000 * 1000);

	/* nothing above hi leaves, nor anything while under keep */
	raftlog_evict(&l, 2000, all);
	CHECK_EQ(l.resident, all);
	CHECK_EQ(l.evicted_to, 0);
	/* not past applying or stabled either */
	l.applying = 1500;
	raftlog_evict(&l, 2000, 0);
	CHECK_EQ(l.evicted_to, 1500);
	for (uint64_t i = 1; i <= 2000; i++) {
		const struct raft_entry *e = raftlog_entry(&l, i);
		CHECK_EQ(e->len, len_of(i));
		CHECK_EQ(e->term, 1);
		CHECK(i <= 1500 ? !e->data : (e->data != NULL) == (e->len != 0));
	}
	check_counts(&l);
	CHECK_EQ(l.bytes, size); /* the entries stay */
	l.applying = 2000;

	/* every entry comes back as it was, from whichever segment, in any
	 * order, and leaves again */
	uint64_t lo = 1337;
	for (int round = 0; round < 300; round++, lo = (lo * 7 + 3) % 1500) {
		uint64_t hi = lo + 40 > 2000 ? 2000 : lo + 40;
		CHECK_EQ(raftlog_load(&l, lo, hi), 0);
		size_t n;
		const struct raft_entry *s = raftlog_slice(&l, lo, hi, &n);
		for (size_t k = 0; k < n; k++)
			CHECK(wt_entry_ok(&s[k], lo + 1 + k, 1, len_of(lo + 1 + k)));
		check_counts(&l);
		raftlog_unload(&l);
		check_counts(&l);
		CHECK(!raftlog_entry(&l, lo + 1)->data);
	}
	/* and all of it at once */
	CHECK_EQ(raftlog_load(&l, 0, 1500), 0);
	for (uint64_t i = 1; i <= 2000; i++)
		CHECK(wt_entry_ok(raftlog_entry(&l, i), i, 1, len_of(i)));
	CHECK_EQ(l.resident, all);
	raftlog_unload(&l);
	check_counts(&l);
	CHECK_EQ(raftlog_take_load_failure(&l), 0);

	/* out of memory at any step: an error, nothing held after the
	 * unload, and no failure named (the next ready tries again) */
	for (long k = 0; k < 40; k++) {
		wt_fail_after(k);
		int rc = raftlog_load(&l, 100, 130);
		wt_fail_after(-1);
		CHECK(rc == 0 || rc == -ENOMEM);
		check_counts(&l);
		raftlog_unload(&l);
		CHECK_EQ(l.resident, data_sum(&l));
		CHECK(!raftlog_entry(&l, 101)->data);
	}
	CHECK_EQ(raftlog_take_load_failure(&l), 0);

	/* a budget: the oldest go first, down to three quarters of keep */
	raftlog_free(&l);
	CHECK_EQ(wal_close(w), 0);
	wt_path(dir, sizeof(dir), "evict");
	w = log_with_wal(dir, 64 * 1024, &l, 2000);
	uint64_t keep = all / 2;
	raftlog_evict(&l, 2000, keep);
	CHECK(l.resident <= keep - keep / 4);
	CHECK(l.resident + LEN_MAX > keep - keep / 4);
	for (uint64_t i = 1; i <= 2000; i++) {
		const struct raft_entry *e = raftlog_entry(&l, i);
		CHECK(i <= l.evicted_to ? !e->data : (e->data != NULL) == (e->len != 0));
	}
	/* under keep now: a second call changes nothing */
	uint64_t at = l.evicted_to;
	raftlog_evict(&l, 2000, keep);
	CHECK_EQ(l.evicted_to, at);

	/* compaction over evicted and resident entries keeps the counts */
	raftlog_compact(&l, at + 100);
	CHECK_EQ(l.snap_index, at + 100);
	check_counts(&l);
	CHECK(l.evicted_to == at + 100);
	CHECK_EQ(raftlog_load(&l, at, at + 200), 0); /* clamped to the log */
	CHECK(wt_entry_ok(raftlog_entry(&l, at + 101), at + 101, 1, len_of(at + 101)));
	raftlog_unload(&l);
	check_counts(&l);
	/* a new leader's conflicting suffix (above what was applied) */
	l.committed = l.applying = l.stabled = l.persisting = 1900;
	struct raft_entry e2 = wt_entry(1901, 2, 10, (uint8_t[10]){ 0 });
	bool matched;
	uint64_t last_new;
	CHECK_EQ(raftlog_maybe_append(&l, 1900, 1, &e2, 1, &matched, &last_new), 0);
	CHECK(matched && last_new == 1901 && raftlog_last_index(&l) == 1901);
	check_counts(&l);

	raftlog_free(&l);
	CHECK_EQ(wal_close(w), 0);
	CHECK_EQ(wt_live_allocs(), live0);
}

/* Flips one byte of the file at off. */
static void flip(const char *path, uint64_t off)
{
	int fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	uint8_t b;
	CHECK(pread(fd, &b, 1, (off_t)off) == 1);
	b ^= 0x5a;
	CHECK(pwrite(fd, &b, 1, (off_t)off) == 1);
	close(fd);
}

/* Reads an entry of the last segment back, so that the WAL's read
 * buffer holds none of the first. */
static void other_segment(struct raftlog *l)
{
	CHECK(raftlog_locs_from(l, 599)->seg > 0);
	CHECK_EQ(raftlog_load(l, 598, 599), 0);
	raftlog_unload(l);
}

static void test_refused(void)
{
	char dir[512], path[1024];
	struct raftlog l;
	long live0 = wt_live_allocs();
	wt_path(dir, sizeof(dir), "refused");
	struct wal *w = log_with_wal(dir, 64 * 1024, &l, 600);
	raftlog_evict(&l, 600, 0);
	CHECK_EQ(l.evicted_to, 599); /* 600 holds no data: nothing left to drop */
	CHECK_EQ(l.resident, 0);

	/* a byte of entry 11's data (in the first segment) changed on disk:
	 * the chain's CRC refuses it, and it is named; those before came back */
	const struct raftlog_loc *loc = raftlog_locs_from(&l, 11);
	CHECK_EQ(loc->seg, 0);
	snprintf(path, sizeof(path), "%s/0000000000000000-0000000000000000.wal", dir);
	flip(path, loc->off + raftlog_entry(&l, 11)->len);
	CHECK_EQ(raftlog_load(&l, 8, 20), -EBADMSG);
	CHECK(raftlog_entry(&l, 9)->data && !raftlog_entry(&l, 11)->data);
	CHECK(wt_entry_ok(raftlog_entry(&l, 9), 9, 1, len_of(9)));
	CHECK_EQ(raftlog_take_load_failure(&l), 11);
	CHECK_EQ(raftlog_take_load_failure(&l), 0);
	raftlog_unload(&l);
	check_counts(&l);

	/* a length word changed: a record past the 10 MiB limit, or past
	 * the file's end, or a shorter one that does not decode */
	uint64_t at12 = raftlog_locs_from(&l, 12)->off;
	static const unsigned bytes[] = { 3, 2, 0 };
	for (int k = 0; k < 3; k++) {
		flip(path, at12 + bytes[k]);
		other_segment(&l); /* the next read of the first one is fresh */
		CHECK_EQ(raftlog_load(&l, 11, 12), -EBADMSG);
		flip(path, at12 + bytes[k]);
	}
	other_segment(&l);
	CHECK_EQ(raftlog_load(&l, 11, 12), 0);
	CHECK(wt_entry_ok(raftlog_entry(&l, 12), 12, 1, len_of(12)));
	raftlog_unload(&l);
	CHECK_EQ(raftlog_take_load_failure(&l), 12);

	/* a record that is another entry's: its index or term differs */
	struct raft_entry *e = (struct raft_entry *)raftlog_entry(&l, 301);
	e->term = 2;
	CHECK_EQ(raftlog_load(&l, 300, 301), -EBADMSG);
	e->term = 1;
	struct raftlog_loc save = *raftlog_locs_from(&l, 302);
	*raftlog_locs_from(&l, 302) = *raftlog_locs_from(&l, 303);
	CHECK_EQ(raftlog_load(&l, 301, 302), -EBADMSG);
	*raftlog_locs_from(&l, 302) = save;
	CHECK_EQ(raftlog_load(&l, 300, 302), 0);
	CHECK(wt_entry_ok(raftlog_entry(&l, 302), 302, 1, len_of(302)));
	raftlog_unload(&l);
	CHECK_EQ(raftlog_take_load_failure(&l), 302);

	/* segments purged: what lay in them is gone (-ENOENT), the tail's
	 * entries still come back */
	uint64_t tail_first = 0;
	for (uint64_t i = 600; i > 0 && raftlog_locs_from(&l, i)->seg ==
					    raftlog_locs_from(&l, 600)->seg; i--)
		tail_first = i;
	CHECK(raftlog_locs_from(&l, 600)->seg >= 2);
	CHECK(wal_purge(w, 600, 1) >= 1);
	CHECK_EQ(raftlog_load(&l, 0, 1), -ENOENT);
	CHECK_EQ(raftlog_take_load_failure(&l), 1);
	CHECK_EQ(raftlog_load(&l, tail_first - 1, 600), 0);
	CHECK(wt_entry_ok(raftlog_entry(&l, 600), 600, 1, len_of(600)));
	raftlog_unload(&l);

	/* an entry with no place (replayed at a start) never leaves memory */
	raftlog_free(&l);
	CHECK_EQ(wal_close(w), 0);
	raftlog_init(&l, 0, 0);
	raftlog_set_loader(&l, wal_loader, NULL);
	uint8_t buf[100];
	struct raft_entry x = wt_entry(1, 1, 100, buf);
	CHECK_EQ(raftlog_append(&l, &x, 1), 0);
	l.persisting = l.stabled = l.committed = l.applying = 1;
	raftlog_evict(&l, 1, 0);
	CHECK(raftlog_entry(&l, 1)->data != NULL);
	CHECK_EQ(raftlog_load(&l, 0, 1), 0);
	raftlog_unload(&l);
	CHECK(wt_entry_ok(raftlog_entry(&l, 1), 1, 1, 100));
	raftlog_free(&l);
	CHECK_EQ(wt_live_allocs(), live0);
}

/* One ready reads back at most RAFTLOG_LOAD_MAX_BYTES; the next one
 * reads on. */
static void test_load_cap(void)
{
	char dir[512];
	struct raftlog l;
	wt_path(dir, sizeof(dir), "cap");
	struct wal *w = log_with_wal(dir, 4 << 20, &l, 8000);
	CHECK(l.resident > RAFTLOG_LOAD_MAX_BYTES + (1u << 20));
	raftlog_evict(&l, 8000, 0);
	CHECK_EQ(raftlog_load(&l, 0, 8000), -EAGAIN);
	CHECK(l.loaded_bytes >= RAFTLOG_LOAD_MAX_BYTES);
	CHECK(l.loaded_bytes < RAFTLOG_LOAD_MAX_BYTES + LEN_MAX);
	CHECK_EQ(l.resident, l.loaded_bytes);
	CHECK_EQ(raftlog_take_load_failure(&l), 0); /* not a failure */
	uint64_t upto = l.loaded[l.n_loaded - 1];
	CHECK(wt_entry_ok(raftlog_entry(&l, upto), upto, 1, len_of(upto)));
	raftlog_unload(&l);
	CHECK_EQ(l.resident, 0);
	CHECK_EQ(l.loaded_bytes, 0);
	CHECK_EQ(raftlog_load(&l, upto, 8000), 0);
	CHECK(wt_entry_ok(raftlog_entry(&l, 8000 - 1), 7999, 1, len_of(7999)));
	raftlog_unload(&l);
	raftlog_free(&l);
	CHECK_EQ(wal_close(w), 0);
}

/* The tail segment read back, then written further: what the read-ahead
 * held past the durable end (zeros then) is not served for the records
 * written there since. */
static void test_tail_read_ahead(void)
{
	char dir[512];
	struct raftlog l;
	static uint8_t buf[LEN_MAX];
	wt_path(dir, sizeof(dir), "tail");
	struct wal *w = log_with_wal(dir, 1 << 20, &l, 100);
	raftlog_evict(&l, 100, 0);
	CHECK_EQ(raftlog_load(&l, 98, 99), 0);
	raftlog_unload(&l);
	for (uint64_t i = 101; i <= 120; i++) {
		struct raft_entry e = wt_entry(i, 1, len_of(i), buf);
		CHECK_EQ(raftlog_append(&l, &e, 1), 0);
		const struct raft_entry *s = raftlog_entry(&l, i);
		struct raft_hardstate hs = { 1, 1, i };
		CHECK_EQ(wal_save_locs(w, &hs, s, 1, raftlog_locs_from(&l, i)), 0);
		CHECK_EQ(wal_sync(w), 0);
	}
	CHECK_EQ(raftlog_locs_from(&l, 120)->seg, raftlog_locs_from(&l, 99)->seg);
	l.persisting = l.stabled = l.committed = l.applying = 120;
	raftlog_evict(&l, 120, 0);
	CHECK_EQ(raftlog_load(&l, 98, 120), 0);
	for (uint64_t i = 99; i <= 120; i++)
		CHECK(wt_entry_ok(raftlog_entry(&l, i), i, 1, len_of(i)));
	raftlog_unload(&l);
	raftlog_free(&l);
	CHECK_EQ(wal_close(w), 0);
}

/* A restart: the replay gives each entry the place wal_save_locs gave
 * it (a replaced suffix the later records' places), so that the data of
 * a restored log can leave memory too. */
static void test_replay_places(void)
{
	char dir[512];
	struct raftlog l;
	long live0 = wt_live_allocs();
	wt_path(dir, sizeof(dir), "replay");
	struct wal *w = log_with_wal(dir, 64 * 1024, &l, 700);
	/* a new leader's entries 650..660 in term 2 replace 650..700 */
	static uint8_t bufs[11][LEN_MAX];
	struct raft_entry ents[11];
	struct raftlog_loc locs[11];
	for (int i = 0; i < 11; i++)
		ents[i] = wt_entry(650 + (uint64_t)i, 2, len_of(650 + (uint64_t)i), bufs[i]);
	struct raft_hardstate hs = { 2, 2, 649 };
	CHECK_EQ(wal_save_locs(w, &hs, ents, 11, locs), 0);
	CHECK_EQ(wal_close(w), 0);

	struct wal_options o = { .segment_bytes = 64 * 1024 };
	struct wal_replay rep;
	CHECK_EQ(diskio_plain_open(-1, &o.io), 0);
	CHECK_EQ(wal_open(dir, 0, 0, &o, &w, &rep), 0);
	CHECK_EQ(rep.n_entries, 660);
	CHECK(rep.locs);
	for (uint64_t i = 1; i <= 660; i++) {
		const struct raftlog_loc *a = &rep.locs[i - 1];
		const struct raftlog_loc *b = i < 650 ? raftlog_locs_from(&l, i) : &locs[i - 650];
		CHECK(a->seg == b->seg && a->off == b->off && a->crc == b->crc);
		CHECK(a->off != 0);
	}
	raftlog_free(&l);

	struct raftlog r;
	raftlog_init(&r, 0, 0);
	raftlog_set_loader(&r, wal_loader, w);
	CHECK_EQ(raftlog_restore(&r, 0, 0, rep.entries, rep.n_entries), 0);
	raftlog_set_locs(&r, 1, rep.locs, rep.n_entries);
	rep.entries = NULL;
	rep.n_entries = 0;
	wal_replay_free(&rep);
	r.committed = r.applying = 660;
	check_counts(&r);
	raftlog_evict(&r, 660, 0);
	CHECK_EQ(r.resident, 0);
	CHECK_EQ(raftlog_load(&r, 0, 660), 0);
	for (uint64_t i = 1; i <= 660; i++)
		CHECK(wt_entry_ok(raftlog_entry(&r, i), i, i < 650 ? 1 : 2, len_of(i)));
	raftlog_unload(&r);
	check_counts(&r);
	raftlog_free(&r);
	CHECK_EQ(wal_close(w), 0);
	CHECK_EQ(wt_live_allocs(), live0);
}

/* ---- the Raft core ---- */

/* Three voters, messages carried by hand; node 3 can be cut off. Each
 * node's ready is persisted at once; node 1's entries also get places
 * (the loader's own table: loc.off is the index) so that its data can
 * leave memory. */
struct trio {
	struct raft *r[4];
	bool cut3;
	bool fail_loads;     /* node 1's loader refuses everything */
	unsigned loads;      /* entries node 1 read back */
	unsigned snaps_to_3; /* MsgSnap sent to node 3 */
	uint8_t data[4096][32];
};

static int trio_loader(void *ctx, const struct raft_entry *e, const struct raftlog_loc *loc,
		       uint8_t **data)
{
	struct trio *t = ctx;
	if (t->fail_loads)
		return -ENOENT;
	CHECK_EQ(loc->off, e->index);
	CHECK(e->len <= 32 && e->index < 4096);
	*data = raftd_malloc(e->len ? e->len : 1);
	CHECK(*data);
	memcpy(*data, t->data[e->index], e->len);
	t->loads++;
	return 0;
}

static void trio_start(struct trio *t)
{
	static const uint64_t voters[] = { 1, 2, 3 };
	memset(t, 0, sizeof(*t));
	for (uint64_t id = 1; id <= 3; id++) {
		struct raft_config c;
		raft_config_defaults(&c);
		c.id = id;
		c.voters = voters;
		c.n_voters = 3;
		c.seed = id * 13;
		c.max_msg_bytes = 256; /* many MsgApps for a follower behind */
		CHECK_EQ(raft_new(&c, NULL, 0, 0, NULL, 0, 0, &t->r[id]), 0);
	}
	raft_set_loader(t->r[1], trio_loader, t);
}

/* Runs until quiet: every ready taken, every message delivered (but to
 * and from node 3 while cut). A MsgSnap to node 3 is answered as a
 * transport does: the follower gets the snapshot point. */
static void trio_settle(struct trio *t)
{
	static struct raft_msg q[8192];
	static struct raft_entry qe[8192][16];
	static uint8_t qd[8192][16][32];
	for (int round = 0; round < 2000; round++) {
		size_t nq = 0;
		for (int id = 1; id <= 3; id++) {
			struct raft *r = t->r[id];
			struct raft_ready rd;
			while (raft_has_ready(r)) {
				raft_ready(r, &rd);
				for (size_t i = 0; i < rd.n_entries && id == 1; i++) {
					const struct raft_entry *e = &rd.entries[i];
					CHECK(e->index < 4096 && e->len <= 32);
					if (e->len)
						memcpy(t->data[e->index], e->data, e->len);
					rd.entry_locs[i] = (struct raftlog_loc){ .off = e->index };
				}
				for (size_t i = 0; i < rd.n_msgs; i++) {
					struct raft_msg m = rd.msgs[i];
					if (m.type == RAFT_MSG_SNAP && m.to == 3)
						t->snaps_to_3++;
					if (t->cut3 && (m.to == 3 || m.from == 3))
						continue;
					CHECK(nq < 8192 && m.n_entries <= 16);
					for (size_t k = 0; k < m.n_entries; k++) {
						qe[nq][k] = m.entries[k];
						CHECK(m.entries[k].len <= 32);
						CHECK(m.entries[k].data || !m.entries[k].len);
						if (m.entries[k].len)
							memcpy(qd[nq][k], m.entries[k].data,
							       m.entries[k].len);
						qe[nq][k].data = qd[nq][k];
					}
					m.entries = qe[nq];
					m.snap_conf = NULL;
					q[nq++] = m;
				}
				uint64_t li = rd.n_entries ? rd.entries[rd.n_entries - 1].index : 0;
				uint64_t lt = rd.n_entries ? rd.entries[rd.n_entries - 1].term : 0;
				raft_advance(r, &rd);
				if (li)
					raft_persisted(r, li, lt);
			}
		}
		if (!nq)
			return;
		for (size_t i = 0; i < nq; i++) {
			if (q[i].type == RAFT_MSG_SNAP) {
				static const struct raft_conf_state cs = { .voters = { 1, 2, 3 },
									   .n_voters = 3 };
				q[i].snap_conf = &cs;
			}
			CHECK_EQ(raft_step(t->r[q[i].to], &q[i]), 0);
			if (q[i].type == RAFT_MSG_SNAP)
				raft_report_snapshot(t->r[1], 3, true);
		}
	}
	CHECK(!"the network never went quiet");
}

static void trio_tick(struct trio *t, int ticks)
{
	for (int k = 0; k < ticks; k++) {
		for (int id = 1; id <= 3; id++)
			raft_tick(t->r[id]);
		trio_settle(t);
	}
}

/* Proposes n entries of 20 bytes on the leader, node 1. */
static void trio_propose(struct trio *t, int n)
{
	for (int i = 0; i < n; i++) {
		uint8_t b[20];
		memset(b, 'a' + i % 26, sizeof(b));
		b[0] = (uint8_t)i;
		struct raft_entry e = { .len = sizeof(b), .data = b };
		CHECK_EQ(raft_propose(t->r[1], &e, 1), 0);
		if (i % 8 == 7)
			trio_settle(t);
	}
	trio_settle(t);
}

static void check_same_logs(const struct trio *t, uint64_t from)
{
	const struct raftlog *a = raft_log(t->r[3]);
	for (uint64_t i = from; i <= raftlog_last_index(a); i++) {
		const struct raft_entry *x = raftlog_entry(a, i);
		CHECK(x && x->index == i);
		CHECK(x->len <= 32 && (!x->len || !memcmp(x->data, t->data[i], x->len)));
	}
	CHECK_EQ(raftlog_last_index(a), raftlog_last_index(raft_log(t->r[1])));
	CHECK_EQ(raft_commit_index(t->r[3]), raft_commit_index(t->r[1]));
}

static void test_core_catch_up(void)
{
	struct trio *t = calloc(1, sizeof(*t));
	CHECK(t);
	trio_start(t);
	CHECK_EQ(raft_campaign(t->r[1]), 0);
	trio_settle(t);
	CHECK(raft_is_leader(t->r[1]));
	trio_propose(t, 10);
	uint64_t before = raft_last_index(t->r[3]);
	CHECK_EQ(before, raft_last_index(t->r[1]));

	/* node 3 away while 1,000 entries commit; the leader keeps them
	 * (nothing compacts here) but their data leaves memory */
	t->cut3 = true;
	trio_propose(t, 1000);
	CHECK(raft_last_index(t->r[3]) == before);
	raft_evict(t->r[1], raft_last_index(t->r[1]), 0);
	const struct raftlog *l1 = raft_log(t->r[1]);
	CHECK_EQ(l1->resident, 0);
	CHECK(l1->evicted_to == raft_last_index(t->r[1]));

	/* back: it catches up from the log, read back entry by entry; the
	 * leader's memory is left as it was */
	t->cut3 = false;
	trio_tick(t, 5);
	check_same_logs(t, before + 1);
	CHECK(t->loads >= 1000);
	CHECK_EQ(t->snaps_to_3, 0);
	CHECK_EQ(l1->resident, 0);
	CHECK_EQ(raft_take_load_failure(t->r[1]), 0);

	/* away again, and this time the leader cannot read the entries back:
	 * its MsgApps are dropped and the failure named; compacted past it
	 * at each turn (as raftd's loop does), it sends a snapshot, then the
	 * entries still in memory */
	t->cut3 = true;
	uint64_t away = raft_last_index(t->r[3]);
	trio_propose(t, 300);
	raft_evict(t->r[1], raft_last_index(t->r[1]), 0);
	uint64_t evicted = l1->evicted_to;
	trio_propose(t, 5);
	t->fail_loads = true;
	t->cut3 = false;
	uint64_t failed_max = 0;
	for (int k = 0; k < 20; k++) {
		trio_tick(t, 1);
		uint64_t failed = raft_take_load_failure(t->r[1]);
		if (failed) {
			CHECK(failed > away && failed <= evicted);
			failed_max = failed > failed_max ? failed : failed_max;
			raft_compact(t->r[1], failed);
		}
	}
	CHECK(failed_max > away);
	CHECK(t->snaps_to_3 >= 1);
	CHECK(raft_log(t->r[3])->snap_index > away);
	check_same_logs(t, raftlog_first_index(raft_log(t->r[3])));

	for (int id = 1; id <= 3; id++)
		raft_free(t->r[id]);
	free(t);
}

int main(void)
{
	log_set_level(LOG_LEVEL_WARN);
	wt_count_allocs();
	test_evict_and_load();
	test_refused();
	test_tail_read_ahead();
	test_load_cap();
	test_replay_places();
	test_core_catch_up();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_raftlog_evict: ok\n");
	return 0;
}
