/*
 * Revision bytes as etcd writes them in the key bucket: layout, tombstone
 * mark, byte order equal to revision order, refused malformed keys.
 */
#include "btree_util.h"

#include "stored/mvcc/revision.h"

static void test_layout(void)
{
	t_phase = "layout";
	uint8_t b[REV_MARKED_BYTES];
	rev_encode((struct rev){ 0x0102030405060708ll, 0x1112131415161718ll }, b);
	static const uint8_t want[REV_BYTES] = { 1, 2, 3, 4, 5, 6, 7, 8, '_',
						 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18 };
	T_CHECK(memcmp(b, want, REV_BYTES) == 0);
	rev_encode_tombstone((struct rev){ 2, 0 }, b);
	static const uint8_t tomb[REV_MARKED_BYTES] = { 0, 0, 0, 0, 0, 0, 0, 2, '_',
							0, 0, 0, 0, 0, 0, 0, 0, 't' };
	T_CHECK(memcmp(b, tomb, sizeof(tomb)) == 0);

	struct rev r;
	bool t;
	T_OK(rev_decode(b, REV_MARKED_BYTES, &r, &t));
	T_CHECK(r.main == 2 && r.sub == 0 && t);
	T_OK(rev_decode(want, REV_BYTES, &r, &t));
	T_CHECK(r.main == 0x0102030405060708ll && r.sub == 0x1112131415161718ll && !t);
	T_OK(rev_decode(want, REV_BYTES, &r, NULL));
}

static void test_malformed(void)
{
	t_phase = "malformed";
	uint8_t b[REV_MARKED_BYTES + 1];
	struct rev r;
	rev_encode_tombstone((struct rev){ 9, 1 }, b);
	T_RC(rev_decode(b, 16, &r, NULL), -EINVAL);
	T_RC(rev_decode(b, 19, &r, NULL), -EINVAL);
	T_RC(rev_decode(b, 0, &r, NULL), -EINVAL);
	b[17] = 'x';
	T_RC(rev_decode(b, 18, &r, NULL), -EINVAL);
	b[8] = '-';
	T_RC(rev_decode(b, 17, &r, NULL), -EINVAL);
}

static void test_order(void)
{
	t_phase = "order";
	for (t_step = 0; t_step < 20000; t_step++) {
		struct rev a = { (int64_t)(t_rand() >> (1 + t_below(63))),
				 (int64_t)(t_rand() >> (1 + t_below(63))) };
		struct rev c = a;
		switch (t_below(3)) {
		case 0:
			c.main = (int64_t)(t_rand() >> (1 + t_below(63)));
			break;
		case 1:
			c.sub = (int64_t)(t_rand() >> (1 + t_below(63)));
			break;
		}
		uint8_t ea[REV_BYTES], ec[REV_BYTES];
		rev_encode(a, ea);
		rev_encode(c, ec);
		int m = memcmp(ea, ec, REV_BYTES);
		int want = rev_cmp(a, c);
		T_CHECK((m < 0) == (want < 0) && (m == 0) == (want == 0));
		/* a tombstone sorts right after its revision, before the next */
		uint8_t t[REV_MARKED_BYTES];
		rev_encode_tombstone(a, t);
		T_CHECK(memcmp(t, ea, REV_BYTES) == 0);
		T_CHECK(rev_get_be64(ea) == (uint64_t)a.main);
	}
}

int main(void)
{
	t_set_seed(t_pick_seed());
	test_layout();
	test_malformed();
	test_order();
	printf("test_revision: ok (seed %" PRIu64 ")\n", t_seed);
	return 0;
}
