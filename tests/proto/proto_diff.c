/*
 * proto_diff: the C half of the differential check of request decoding
 * (tests/proto/proto_diff.sh runs it; tests/tools/protodiff is the Go
 * half, on etcd's own decoders).
 *
 *   proto_diff SEED COUNT CASES VERDICTS
 *
 * writes COUNT cases to CASES, one "<Message> <hex>" line each, for every
 * request type gatewayd decodes (requests.h): a fixed list of corner
 * cases first, then random messages built from the generated
 * descriptors (wrong wire types,
 * unknown fields and groups, over-long varints and keys, field numbers
 * gogo truncates, packed and repeated fields), half of them mutated
 * (bytes flipped, cut, inserted, removed). For each case it writes to
 * VERDICTS what gatewayd makes of it, in protodiff's format: "OK <hex>"
 * with protobuf-c's re-encoding of what it decoded (through
 * proto_check_request and, when needed, proto_check_canonicalize), or
 * "ERR <text>" with the text gatewayd answers after "grpc: error
 * unmarshalling request: ", or "NUL <text>" when gatewayd refuses a
 * string holding a NUL, which etcd's decoder takes (its handlers then
 * refuse such peer URLs; proto_diff.sh counts these apart).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hex/hex.h"
#include "proto/check.h"
#include "proto/wire.h"
#include "requests.h"
#include "rng.h"

#define NKINDS PROTO_TEST_NREQUESTS

/* Corner cases: index in proto_test_requests, hex. tests/integration/
 * proto_grpc.sh sends them to live members, so those of the requests
 * that change a cluster or wait (every kind from WatchRequest on) are
 * ones etcd refuses (main checks it). */
struct corner {
	unsigned kind;
	const char *hex;
};

static const struct corner corners[] = {
	{ 1, "0a01612001" },             /* prev_kv as it should be */
	{ 1, "0a0161220100" },           /* prev_kv length-delimited */
	{ 1, "0a016121aaaaaaaaaaaaaaaa" }, /* prev_kv as fixed64 */
	{ 1, "0a01612501000000" },       /* prev_kv as fixed32 */
	{ 1, "0a01612b2c" },             /* ignore_value as a group */
	{ 1, "0a01612e" },               /* wire type 6 on ignore_value */
	{ 1, "0a01612a0100" },           /* ignore_value, length-delimited */
	{ 1, "0a01613001" },             /* ignore_lease, varint */
	{ 1, "0a0161320100" },           /* ignore_lease, length-delimited */
	{ 1, "0a0161390000000000000000" }, /* unknown field 7, fixed64 */
	{ 1, "00" },                     /* illegal tag 0 */
	{ 1, "02" },                     /* illegal tag 0, wire type 2 */
	{ 1, "8080808080808080800100" },  /* tag whose number is 2^60 */
	{ 1, "f8ffffff0f01" },           /* field number int32 -1 */
	{ 1, "a0808080800101" },          /* field 2^32 + 4: gogo reads PrevKv */
	{ 1, "0a0161" },                 /* fine */
	{ 1, "0a05" },                   /* length past the end */
	{ 1, "0affffffffffffffffff01" }, /* negative length */
	{ 1, "0a80808080808080808080" }, /* length varint over 10 bytes */
	{ 1, "0a8180808080808080807f61" }, /* 10-byte length, bit 63 set: negative */
	{ 1, "0c" },                     /* end group at top level */
	{ 1, "0b" },                     /* start group on a bytes field */
	{ 1, "0a01617a01" },             /* field 15 wire 2 cut short */
	{ 1, "0a016138" },               /* field 7 varint missing */
	{ 1, "0a0161f8ffff0701" },       /* unknown field 2^28-1 */
	{ 1, "0a01619b01080110029c01" }, /* unknown group with fields */
	{ 1, "0a01619b019b01080110029c019c01" }, /* nested groups */
	{ 1, "0a01619b01" },             /* group never ended */
	{ 1, "0a01619b01a401" },         /* group ended by another number */
	{ 1, "0a01619b010e9c01" },       /* wire type 6 inside a group */
	{ 1, "0a0161a301" },             /* unknown field, wire type 3, cut */
	{ 1, "0a0161a601" },             /* unknown field, wire type 6 */
	{ 1, "0a0161a701" },             /* unknown field, wire type 7 */
	{ 1, "0a0161a1" "01020304050607" }, /* unknown fixed64 cut short */
	{ 1, "0a0161a501020304" },       /* unknown fixed32 */
	{ 1, "0a0161a2ffffffffffffffffff01" }, /* unknown, negative length */
	{ 1, "0a0161a0ffffffffffffffffffff01" }, /* unknown varint overflow */
	{ 1, "0a0161a201ffffffffffffffff7f61" }, /* unknown, length overflows an int */
	{ 1, "0a0161a201f5ffffffffffffff7f61" }, /* unknown, length + key + prefix = 2^63 */
	{ 1, "0a016120ffffffffffffffffff01" }, /* prev_kv 10-byte varint */
	{ 1, "0a0161208080808080808080800200" }, /* prev_kv: only bit 64 set, then tag 0 */
	{ 1, "0a016120ffffffffffffffffffff01" }, /* prev_kv varint overflow */
	{ 1, "8a0001610a0162" },         /* over-long key for field 1, twice */
	{ 0, "0a01614001" },             /* keys_only */
	{ 0, "0a0161420100" },           /* keys_only length-delimited */
	{ 0, "0a0161390000000000000000" }, /* serializable as fixed64 */
	{ 0, "0a01614a0100" },           /* count_only length-delimited */
	{ 0, "28ffffffffffffffffff01" },   /* sort_order: enum out of range */
	{ 0, "0a016150ffffffffffffffffff01" }, /* min_mod_revision -1 */
	{ 2, "0a0161180122" },           /* prev_kv, then cut */
	{ 2, "0a0161190000000000000000" }, /* prev_kv as fixed64 */
	{ 3, "0a020000" },               /* Compare: illegal tag 0 */
	{ 3, "0a020a00" },               /* Compare.result length-delimited */
	{ 3, "0a03180161" },             /* Compare.key as varint */
	{ 3, "0a0420012a00" },           /* Compare.version length-delimited */
	{ 3, "0a043a016164" },           /* Compare.value, then an end group */
	{ 3, "12040a020000" },           /* RequestOp -> RangeRequest tag 0 */
	{ 3, "120422020000" },           /* RequestOp -> TxnRequest tag 0 */
	{ 3, "1206120420012001" },       /* RequestOp -> PutRequest twice */
	{ 3, "12020801" },               /* RequestOp.request_range varint */
	{ 3, "1a021a00" },               /* failure -> delete_range, empty */
	{ 3, "120a220812060a0400000000" }, /* nested txn with a bad range */
	{ 3, "1204120220011204120218011204" }, /* oneof repeated, cut */
	{ 4, "080118" },                 /* CompactionRequest cut */
	{ 4, "0801120100" },             /* physical length-delimited */
	{ 4, "0801110000000000000000" },  /* physical as fixed64 */
	{ 4, "0801220100" },             /* unknown field */
	{ 4, "08ffffffffffffffffff01" },  /* revision -1 */
	{ 5, "0801" },                   /* StatusRequest: unknown field */
	{ 5, "00" },
	{ 5, "0c" },
	{ 6, "1a0161" },                 /* MemberListRequest: unknown field */
	{ 6, "0b0c" },                   /* empty group */
	{ 6, "" },
	{ 8, "0a00" },                   /* LeaseGrantRequest.TTL length-delimited */
	{ 8, "083c10ffffffffffffffffffff01" }, /* ID varint overflow */
	{ 9, "0d00000000" },             /* LeaseRevokeRequest.ID as fixed32 */
	{ 11, "0801120100" },            /* LeaseTimeToLiveRequest.keys length-delimited */
	{ 12, "00" },                    /* LeaseLeasesRequest: illegal tag 0 */
	{ 13, "0801" },                  /* MemberAddRequest.peerURLs as a varint */
	{ 13, "0a01611200" },            /* isLearner length-delimited */
	{ 13, "0a016110" },              /* isLearner without its value */
	{ 13, "0a05616263" },            /* a peer URL past the end */
	{ 13, "0affffffffffffffffff01" }, /* a peer URL of negative length */
	{ 14, "0a00" },                  /* MemberRemoveRequest.ID length-delimited */
	{ 15, "08011001" },              /* MemberUpdateRequest.peerURLs as a varint */
	{ 15, "0801120a" },              /* a peer URL past the end */
	{ 16, "0f" },                    /* MemberPromoteRequest: wire type 7 */
	{ 17, "0a00" },                  /* AlarmRequest.action length-delimited */
	{ 17, "080118021d" },           /* alarm, then a fixed32 cut */
	{ 17, "18ffffffffffffffffffff01" }, /* alarm varint overflow */
	{ 18, "0c" },                    /* HashRequest: end group */
	{ 19, "0a00" },                  /* HashKVRequest.revision length-delimited */
	{ 21, "09" },                    /* MoveLeaderRequest.targetID fixed64, cut */
	{ 22, "0801" },                  /* CampaignRequest.name as a varint */
	{ 22, "0a01611a05" },            /* value past the end */
	{ 22, "0a0161150000" },          /* lease as fixed32, cut */
	{ 23, "0a020801" },              /* ProclaimRequest: LeaderKey.name as a varint */
	{ 23, "0a0118" },                /* LeaderKey.rev without its value */
	{ 23, "0a00" "1205" },           /* value past the end */
	{ 24, "0a" },                    /* LeaderRequest.name without its length */
	{ 25, "0a021000" },              /* ResignRequest: LeaderKey.key as a varint */
	{ 25, "0a0400000000" },          /* LeaderKey: illegal tag 0 */
	{ 26, "1200" },                  /* LockRequest.lease length-delimited */
	{ 26, "0a01619b01" },            /* a group never ended */
	{ 27, "0801" },                  /* UnlockRequest.key as a varint */
	/* the streams: grpc-go answers a message it cannot decode with
	 * "grpc: failed to unmarshal the received message " and the text */
	{ 7, "08" },                     /* WatchRequest: create_request as a varint */
	{ 7, "0a020801" },               /* WatchCreateRequest.key as a varint */
	{ 7, "0a0c" },                   /* create_request past the end */
	{ 7, "0a0110" },                 /* start_revision without its value */
	{ 7, "0a032a0180" },             /* packed filters, varint cut */
	{ 7, "0a052d00000000" },         /* filters as fixed32 */
	{ 7, "0a0228ff" },               /* filters varint cut by the length */
	{ 7, "0a0b2af6ffffffffffffff7f00" }, /* packed filters whose end wraps an int: none read, then tag 0 */
	{ 7, "0a0b2af5ffffffffffffff7f00" }, /* one byte shorter: the end is INT64_MAX, past the message */
	{ 7, "0a0130" },                 /* prev_kv without its value */
	{ 7, "0a00" "12020a00" },        /* create, then a cancel with watch_id as bytes */
	{ 7, "1a0100" },                 /* WatchProgressRequest: illegal tag 0 */
	{ 10, "08" },                    /* LeaseKeepAliveRequest.ID cut */
	{ 20, "00" },                    /* SnapshotRequest: illegal tag 0 */
};
#define NCORNERS (sizeof(corners) / sizeof(corners[0]))

/* The first kind whose corner cases proto_grpc.sh must not see taken. */
#define CORNER_REFUSED_FROM 7

/* Corner cases compared with etcd's decoder only, not written when COUNT
 * is 0 (as proto_grpc.sh runs it): requests etcd takes and then acts on
 * (an election's session grants a lease, a watch is created). */
static const struct corner decode_only[] = {
	{ 23, "0a0318b17d0a00" },        /* Proclaim: the leader twice, one LeaderKey */
	{ 25, "0a04180120010a021802" },  /* Resign: lease of one LeaderKey, rev of the other */
	{ 7, "0a050a01612a002801" },     /* filters packed and empty, then an unknown field */
	{ 7, "0a0c2af6ffffffffffffff7f2801" }, /* packed filters whose end wraps an int, then a filter */
};
#define NDECODE_ONLY (sizeof(decode_only) / sizeof(decode_only[0]))

static unsigned below(unsigned n)
{
	return (unsigned)(proto_test_rnd() % n);
}

#define BUF_CAP 1536

struct buf {
	uint8_t d[BUF_CAP];
	size_t n;
};

static bool room(const struct buf *b, size_t n)
{
	return b->n + n <= BUF_CAP;
}

static void put_bytes(struct buf *b, const void *p, size_t n)
{
	if (!room(b, n))
		return;
	memcpy(b->d + b->n, p, n);
	b->n += n;
}

/* A varint, now and then longer than needed, and rarely over 10 bytes. */
static void put_varint(struct buf *b, uint64_t v)
{
	uint8_t t[16];
	size_t n = proto_varint_put(t, v);
	unsigned r = below(64);

	if (r == 0 || r == 1) { /* padded up to 10 bytes */
		size_t want = n + 1 + below(PROTO_VARINT_MAX_BYTES - (unsigned)n + 1);
		if (want > PROTO_VARINT_MAX_BYTES)
			want = PROTO_VARINT_MAX_BYTES;
		while (n < want) {
			t[n - 1] |= 0x80;
			t[n++] = 0;
		}
	} else if (r == 2) { /* 11 bytes: overflow */
		while (n < 11) {
			t[n - 1] |= 0x80;
			t[n++] = 0;
		}
	}
	put_bytes(b, t, n);
}

static uint64_t rand_int(void)
{
	switch (below(6)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return below(300);
	case 3: return (uint64_t)-(int64_t)below(1000) ; /* negative int64 */
	case 4: return proto_test_rnd() >> below(64);
	default: return below(1u << 20);
	}
}

static void put_rand_bytes(struct buf *b, size_t n)
{
	for (size_t i = 0; i < n && room(b, 1); i++)
		b->d[b->n++] = (uint8_t)(below(4) ? 'a' + below(26) : below(256));
}

static void gen_message(struct buf *b, const ProtobufCMessageDescriptor *d, unsigned depth);

/* A value of wire type wire; for a message field, a message of type sub. */
static void gen_value(struct buf *b, unsigned wire, const ProtobufCMessageDescriptor *sub,
		      unsigned depth)
{
	struct buf *in;

	switch (wire) {
	case PROTO_WIRE_VARINT:
		put_varint(b, rand_int());
		break;
	case PROTO_WIRE_FIXED64:
		put_rand_bytes(b, 8);
		break;
	case PROTO_WIRE_FIXED32:
		put_rand_bytes(b, 4);
		break;
	case PROTO_WIRE_BYTES:
		if (below(40) == 0) { /* a length near or past what an int holds */
			put_varint(b, (below(2) ? (uint64_t)INT64_MAX : UINT64_MAX) - below(40));
			break;
		}
		in = malloc(sizeof(*in));
		if (!in)
			abort();
		in->n = 0;
		if (sub && depth < 6)
			gen_message(in, sub, depth + 1);
		else
			put_rand_bytes(in, below(4) ? below(12) : below(200));
		put_varint(b, in->n);
		put_bytes(b, in->d, in->n);
		free(in);
		break;
	case PROTO_WIRE_START_GROUP: /* a group's fields, then its end */
		for (unsigned i = below(3); i > 0; i--) {
			unsigned w = below(3);
			put_varint(b, (uint64_t)(1 + below(20)) << 3 | w);
			gen_value(b, w, NULL, depth + 1);
		}
		if (below(8))
			put_varint(b, (uint64_t)(1 + below(20)) << 3 | PROTO_WIRE_END_GROUP);
		break;
	default: /* 4, 6, 7: no value */
		break;
	}
}

static void gen_message(struct buf *b, const ProtobufCMessageDescriptor *d, unsigned depth)
{
	for (unsigned i = below(7); i > 0 && room(b, 64); i--) {
		uint64_t num;
		unsigned wire;
		const ProtobufCMessageDescriptor *sub = NULL;

		if (d->n_fields > 0 && below(6)) {
			const ProtobufCFieldDescriptor *f = &d->fields[below(d->n_fields)];
			num = f->id;
			wire = below(12) ? proto_check_declared_wire(f->type) : below(8);
			if (f->type == PROTOBUF_C_TYPE_MESSAGE)
				sub = f->descriptor;
			if (below(40) == 0)
				num += 1ull << 32; /* gogo keeps the low 32 bits */
		} else {
			static const uint64_t nums[] = { 15, 16, 100, 2047, 2048, 4096,
							 (1u << 29) - 1, (1u << 29), 0x7fffffff };
			num = below(2) ? nums[below(sizeof(nums) / sizeof(nums[0]))]
				       : 1 + below(40);
			wire = below(10) ? (unsigned[]){ 0, 1, 2, 3, 5 }[below(5)] : below(8);
			const ProtobufCFieldDescriptor *f =
				protobuf_c_message_descriptor_get_field(d, (unsigned)num);
			if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE && wire == PROTO_WIRE_BYTES)
				sub = f->descriptor;
		}
		put_varint(b, num << 3 | wire);
		gen_value(b, wire, sub, depth);
	}
}

static void mutate(struct buf *b)
{
	for (unsigned k = 1 + below(3); k > 0; k--) {
		size_t at = b->n ? below((unsigned)b->n) : 0;
		switch (below(6)) {
		case 0:
			if (b->n)
				b->d[at] ^= (uint8_t)(1u << below(8));
			break;
		case 1:
			b->n = at; /* cut */
			break;
		case 2:
			if (room(b, 1)) {
				memmove(b->d + at + 1, b->d + at, b->n - at);
				b->d[at] = (uint8_t)(below(2) ? below(256) : 0x80);
				b->n++;
			}
			break;
		case 3:
			if (b->n) {
				memmove(b->d + at, b->d + at + 1, b->n - at - 1);
				b->n--;
			}
			break;
		case 4:
			if (b->n)
				b->d[at] = (uint8_t)(unsigned[]){ 0x00, 0x80, 0xff, 0x0c, 0x0b }[below(5)];
			break;
		default:
			if (b->n)
				b->d[at] = (uint8_t)((b->d[at] & ~7u) | below(8)); /* wire type */
			break;
		}
	}
}

/* What gatewayd makes of b as desc, in protodiff's format, and "NUL
 * <text>" for bytes etcd takes but gatewayd refuses for a NUL in a
 * string (proto_check_request's -EILSEQ). Returns proto_check_request's
 * verdict. */
static int verdict(FILE *out, const ProtobufCMessageDescriptor *desc, const struct buf *b)
{
	static uint8_t canon[5 * BUF_CAP + 16], packed[8 * BUF_CAP];
	char text[PROTO_CHECK_TEXT_MAX];
	const uint8_t *p = b->d;
	size_t len = b->n;
	bool canonical;
	int rc = proto_check_request(desc, p, len, text, &canonical);

	if (rc == 0 && !canonical) {
		if (proto_check_canonicalize(desc, p, len, canon, &len) != 0) {
			fprintf(out, "CANONICALIZE FAILED\n");
			return rc;
		}
		p = canon;
	}
	if (rc != 0) {
		fprintf(out, "%s %s\n", rc == -EILSEQ ? "NUL" : "ERR", text);
		return rc;
	}
	ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, p);
	if (!m) {
		fprintf(out, "UNPACK FAILED\n");
		return rc;
	}
	size_t n = protobuf_c_message_get_packed_size(m);
	if (n > sizeof(packed)) {
		fprintf(out, "TOO BIG\n");
	} else {
		protobuf_c_message_pack(m, packed);
		fprintf(out, "OK ");
		for (size_t i = 0; i < n; i++)
			fprintf(out, "%02x", packed[i]);
		fprintf(out, "\n");
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return rc;
}

static int emit(FILE *cases, FILE *verdicts, unsigned kind, const struct buf *b)
{
	fprintf(cases, "%s ", proto_test_requests[kind].name);
	if (b->n == 0)
		fprintf(cases, "-");
	for (size_t i = 0; i < b->n; i++)
		fprintf(cases, "%02x", b->d[i]);
	fprintf(cases, "\n");
	return verdict(verdicts, proto_test_requests[kind].desc, b);
}

int main(int argc, char **argv)
{
	static struct buf b;
	FILE *cases, *verdicts;
	unsigned long count;

	if (argc != 5) {
		fprintf(stderr, "usage: proto_diff SEED COUNT CASES VERDICTS\n");
		return 2;
	}
	proto_test_seed(strtoull(argv[1], NULL, 10));
	count = strtoul(argv[2], NULL, 10);
	cases = fopen(argv[3], "w");
	verdicts = fopen(argv[4], "w");
	if (!cases || !verdicts) {
		perror("proto_diff: open");
		return 1;
	}
	for (size_t i = 0; i < NCORNERS + (count ? NDECODE_ONLY : 0); i++) {
		const struct corner *c = i < NCORNERS ? &corners[i] : &decode_only[i - NCORNERS];
		const char *h = c->hex;
		ssize_t n = hex_decode(h, strlen(h), b.d);
		if (n < 0) {
			fprintf(stderr, "proto_diff: corner case %zu is not hex: %s\n", i, h);
			return 1;
		}
		b.n = (size_t)n;
		if (emit(cases, verdicts, c->kind, &b) == 0 && c->kind >= CORNER_REFUSED_FROM &&
		    i < NCORNERS) {
			fprintf(stderr, "proto_diff: corner case %zu (%s %s) is taken; it must be one etcd refuses\n",
				i, proto_test_requests[c->kind].name, c->hex);
			return 1;
		}
	}
	for (unsigned long i = 0; i < count; i++) {
		unsigned kind = below(NKINDS);
		b.n = 0;
		gen_message(&b, proto_test_requests[kind].desc, 0);
		if (below(2))
			mutate(&b);
		emit(cases, verdicts, kind, &b);
	}
	if (fclose(cases) || fclose(verdicts)) {
		perror("proto_diff: write");
		return 1;
	}
	return 0;
}
