/*
 * raftpb's peer messages (see raftmsg.h). The encoders follow the field
 * order and always-written fields of etcd 3.4's gogo-generated MarshalTo;
 * the decoders read through proto/wire.h with Unmarshal's rules.
 *
 * Decoding a message runs twice over the bytes: the first pass checks
 * everything and counts the entries and conf state ids, the second, which
 * cannot fail, fills one allocation sized from those counts. Every field
 * number of raftpb's messages is below 16, so every key is one byte.
 */
#include "raftd/raft/raftmsg.h"

#include <errno.h>
#include <string.h>

#include "proto/wire.h"
#include "raftd/alloc.h"

/* Field keys: field number << 3 | wire type. */
#define KEY_V(n) ((uint8_t)((n) << 3 | PROTO_WIRE_VARINT))
#define KEY_B(n) ((uint8_t)((n) << 3 | PROTO_WIRE_BYTES))

/* The conf state lists, in field order (ConfState fields 1..4). */
enum { IDS_VOTERS, IDS_LEARNERS, IDS_VOTERS_OUTGOING, IDS_LEARNERS_NEXT, IDS_LISTS };

/* ---- encoding ---- */

/* gogo writes an int32 enum as uint64(int32): negative ones sign-extend. */
static uint64_t enum_wire(int32_t v)
{
	return (uint64_t)(int64_t)v;
}

static size_t varint_field_size(uint64_t v)
{
	return 1 + proto_varint_len(v);
}

static size_t bytes_field_size(size_t n)
{
	return 1 + proto_varint_len(n) + n;
}

static uint8_t *put_varint(uint8_t *p, uint8_t key, uint64_t v)
{
	*p++ = key;
	return p + proto_varint_put(p, v);
}

/* Key and length of a bytes field or embedded message. */
static uint8_t *put_len(uint8_t *p, uint8_t key, size_t n)
{
	*p++ = key;
	return p + proto_varint_put(p, n);
}

static uint8_t *put_bytes(uint8_t *p, uint8_t key, const uint8_t *data, size_t n)
{
	p = put_len(p, key, n);
	if (n)
		memcpy(p, data, n);
	return p + n;
}

size_t raftmsg_entry_size(const struct raftmsg_entry *e)
{
	size_t n = varint_field_size(enum_wire(e->type)) + varint_field_size(e->term) +
		   varint_field_size(e->index);
	if (e->has_data)
		n += bytes_field_size(e->len);
	return n;
}

size_t raftmsg_entry_encode(const struct raftmsg_entry *e, uint8_t *dst)
{
	uint8_t *p = dst;

	p = put_varint(p, KEY_V(1), enum_wire(e->type));
	p = put_varint(p, KEY_V(2), e->term);
	p = put_varint(p, KEY_V(3), e->index);
	if (e->has_data)
		p = put_bytes(p, KEY_B(4), e->data, e->len);
	return (size_t)(p - dst);
}

static const uint64_t *cs_list(const struct raftmsg_conf_state *cs, unsigned k, size_t *n)
{
	switch (k) {
	case IDS_VOTERS:
		*n = cs->n_voters;
		return cs->voters;
	case IDS_LEARNERS:
		*n = cs->n_learners;
		return cs->learners;
	case IDS_VOTERS_OUTGOING:
		*n = cs->n_voters_outgoing;
		return cs->voters_outgoing;
	default:
		*n = cs->n_learners_next;
		return cs->learners_next;
	}
}

/* ConfState: each list unpacked (gogo's proto2 default), then auto_leave,
 * always written. */
static size_t conf_state_size(const struct raftmsg_conf_state *cs)
{
	size_t n = 2;

	for (unsigned k = 0; k < IDS_LISTS; k++) {
		size_t cnt;
		const uint64_t *ids = cs_list(cs, k, &cnt);
		for (size_t i = 0; i < cnt; i++)
			n += varint_field_size(ids[i]);
	}
	return n;
}

static uint8_t *conf_state_put(uint8_t *p, const struct raftmsg_conf_state *cs)
{
	for (unsigned k = 0; k < IDS_LISTS; k++) {
		size_t cnt;
		const uint64_t *ids = cs_list(cs, k, &cnt);
		for (size_t i = 0; i < cnt; i++)
			p = put_varint(p, KEY_V(k + 1), ids[i]);
	}
	return put_varint(p, KEY_V(5), cs->auto_leave);
}

/* SnapshotMetadata: conf_state, index, term, all always written. */
static size_t metadata_size(const struct raftmsg_snapshot *s)
{
	return bytes_field_size(conf_state_size(&s->conf_state)) + varint_field_size(s->index) +
	       varint_field_size(s->term);
}

size_t raftmsg_snapshot_size(const struct raftmsg_snapshot *s)
{
	size_t n = bytes_field_size(metadata_size(s));
	if (s->has_data)
		n += bytes_field_size(s->len);
	return n;
}

static uint8_t *snapshot_put(uint8_t *p, const struct raftmsg_snapshot *s)
{
	if (s->has_data)
		p = put_bytes(p, KEY_B(1), s->data, s->len);
	p = put_len(p, KEY_B(2), metadata_size(s));
	p = put_len(p, KEY_B(1), conf_state_size(&s->conf_state));
	p = conf_state_put(p, &s->conf_state);
	p = put_varint(p, KEY_V(2), s->index);
	return put_varint(p, KEY_V(3), s->term);
}

size_t raftmsg_snapshot_encode(const struct raftmsg_snapshot *s, uint8_t *dst)
{
	return (size_t)(snapshot_put(dst, s) - dst);
}

size_t raftmsg_size(const struct raftmsg *m)
{
	size_t n = varint_field_size(enum_wire(m->type)) + varint_field_size(m->to) +
		   varint_field_size(m->from) + varint_field_size(m->term) +
		   varint_field_size(m->log_term) + varint_field_size(m->index) +
		   varint_field_size(m->commit) +
		   bytes_field_size(raftmsg_snapshot_size(&m->snapshot)) + 2 +
		   varint_field_size(m->reject_hint);

	for (size_t i = 0; i < m->n_entries; i++)
		n += bytes_field_size(raftmsg_entry_size(&m->entries[i]));
	if (m->has_context)
		n += bytes_field_size(m->context_len);
	return n;
}

size_t raftmsg_encode(const struct raftmsg *m, uint8_t *dst)
{
	uint8_t *p = dst;

	p = put_varint(p, KEY_V(1), enum_wire(m->type));
	p = put_varint(p, KEY_V(2), m->to);
	p = put_varint(p, KEY_V(3), m->from);
	p = put_varint(p, KEY_V(4), m->term);
	p = put_varint(p, KEY_V(5), m->log_term);
	p = put_varint(p, KEY_V(6), m->index);
	for (size_t i = 0; i < m->n_entries; i++) {
		p = put_len(p, KEY_B(7), raftmsg_entry_size(&m->entries[i]));
		p += raftmsg_entry_encode(&m->entries[i], p);
	}
	p = put_varint(p, KEY_V(8), m->commit);
	p = put_len(p, KEY_B(9), raftmsg_snapshot_size(&m->snapshot));
	p = snapshot_put(p, &m->snapshot);
	p = put_varint(p, KEY_V(10), m->reject);
	p = put_varint(p, KEY_V(11), m->reject_hint);
	if (m->has_context)
		p = put_bytes(p, KEY_B(12), m->context, m->context_len);
	return (size_t)(p - dst);
}

size_t raftmsg_conf_change_size(const struct raftmsg_conf_change *cc)
{
	size_t n = varint_field_size(cc->id) + varint_field_size(enum_wire(cc->type)) +
		   varint_field_size(cc->node_id);
	if (cc->has_context)
		n += bytes_field_size(cc->context_len);
	return n;
}

/* ConfChange: id (field 1) comes first, as gogo orders by field number. */
size_t raftmsg_conf_change_encode(const struct raftmsg_conf_change *cc, uint8_t *dst)
{
	uint8_t *p = dst;

	p = put_varint(p, KEY_V(1), cc->id);
	p = put_varint(p, KEY_V(2), enum_wire(cc->type));
	p = put_varint(p, KEY_V(3), cc->node_id);
	if (cc->has_context)
		p = put_bytes(p, KEY_B(4), cc->context, cc->context_len);
	return (size_t)(p - dst);
}

/* ---- decoding ---- */

/*
 * Skips a group whose start key was just read, as gogo's skipRaft does:
 * nested groups balance by wire type only (field numbers are not
 * matched), every other field inside is skipped by its wire type.
 */
static int skip_group(struct proto_reader *r)
{
	size_t depth = 1;
	struct proto_field f;

	while (depth) {
		int32_t num;
		unsigned wire;
		if (proto_read_key(r, &num, &wire))
			return -EBADMSG;
		if (wire == PROTO_WIRE_START_GROUP)
			depth++;
		else if (wire == PROTO_WIRE_END_GROUP)
			depth--;
		else if (proto_read_value(r, wire, &f))
			return -EBADMSG;
	}
	return 0;
}

/*
 * Reads the next field as the Unmarshal loops do: an end-group key or a
 * field number <= 0 is refused, an unknown group is skipped (f->wire is
 * then PROTO_WIRE_START_GROUP, which no known field has).
 */
static int next_field(struct proto_reader *r, struct proto_field *f)
{
	f->varint = 0;
	f->data = NULL;
	f->len = 0;
	if (proto_read_key(r, &f->num, &f->wire))
		return -EBADMSG;
	if (f->wire == PROTO_WIRE_END_GROUP || f->num <= 0)
		return -EBADMSG;
	if (f->wire == PROTO_WIRE_START_GROUP)
		return skip_group(r);
	return proto_read_value(r, f->wire, f) ? -EBADMSG : 0;
}

/* A known field must have its own wire type (gogo's "wrong wireType"). */
#define WANT(f, w)                               \
	do {                                     \
		if ((f).wire != (w))             \
			return -EBADMSG;         \
	} while (0)

/* Where a decoding pass puts what it finds. The counting pass (fill
 * false) only counts; the filling pass stores at the counts. */
struct dec {
	bool fill;
	struct raftmsg_entry *entries;
	size_t n_entries;
	uint64_t *ids[IDS_LISTS];
	size_t n_ids[IDS_LISTS];
};

static void dec_add_id(struct dec *d, unsigned k, uint64_t id)
{
	if (d->fill)
		d->ids[k][d->n_ids[k]] = id;
	d->n_ids[k]++;
}

/* ConfState, merged into what earlier occurrences gave (lists append). */
static int dec_conf_state(struct dec *d, const uint8_t *p, size_t len,
			  struct raftmsg_conf_state *cs)
{
	struct proto_reader r = proto_reader_init(p, len);
	struct proto_field f;

	while (!proto_reader_done(&r)) {
		if (next_field(&r, &f))
			return -EBADMSG;
		if (f.num >= 1 && f.num <= IDS_LISTS) {
			unsigned k = (unsigned)f.num - 1;
			if (f.wire == PROTO_WIRE_VARINT) {
				dec_add_id(d, k, f.varint);
				continue;
			}
			WANT(f, PROTO_WIRE_BYTES);
			/* gogo bounds each packed varint by the end of the
			 * ConfState, not of the packed run: the last one may
			 * run past the run, and the fields go on after it. */
			struct proto_reader pr = proto_reader_init(f.data, (size_t)(r.end - f.data));
			while (pr.p < f.data + f.len) {
				uint64_t v;
				if (proto_read_varint(&pr, &v))
					return -EBADMSG;
				dec_add_id(d, k, v);
			}
			r.p = pr.p;
		} else if (f.num == 5) {
			WANT(f, PROTO_WIRE_VARINT);
			cs->auto_leave = f.varint != 0;
		}
	}
	return 0;
}

static int dec_metadata(struct dec *d, const uint8_t *p, size_t len, struct raftmsg_snapshot *s)
{
	struct proto_reader r = proto_reader_init(p, len);
	struct proto_field f;

	while (!proto_reader_done(&r)) {
		if (next_field(&r, &f))
			return -EBADMSG;
		switch (f.num) {
		case 1:
			WANT(f, PROTO_WIRE_BYTES);
			if (dec_conf_state(d, f.data, f.len, &s->conf_state))
				return -EBADMSG;
			break;
		case 2:
			WANT(f, PROTO_WIRE_VARINT);
			s->index = f.varint;
			break;
		case 3:
			WANT(f, PROTO_WIRE_VARINT);
			s->term = f.varint;
			break;
		}
	}
	return 0;
}

static int dec_snapshot(struct dec *d, const uint8_t *p, size_t len, struct raftmsg_snapshot *s)
{
	struct proto_reader r = proto_reader_init(p, len);
	struct proto_field f;

	while (!proto_reader_done(&r)) {
		if (next_field(&r, &f))
			return -EBADMSG;
		switch (f.num) {
		case 1:
			WANT(f, PROTO_WIRE_BYTES);
			s->has_data = true;
			s->data = f.data;
			s->len = f.len;
			break;
		case 2:
			WANT(f, PROTO_WIRE_BYTES);
			if (dec_metadata(d, f.data, f.len, s))
				return -EBADMSG;
			break;
		}
	}
	return 0;
}

int raftmsg_entry_decode(const uint8_t *p, size_t len, struct raftmsg_entry *out)
{
	struct proto_reader r = proto_reader_init(p, len);
	struct proto_field f;

	memset(out, 0, sizeof(*out));
	while (!proto_reader_done(&r)) {
		if (next_field(&r, &f))
			goto bad;
		switch (f.num) {
		case 1:
			if (f.wire != PROTO_WIRE_VARINT)
				goto bad;
			out->type = (int32_t)(uint32_t)f.varint;
			break;
		case 2:
			if (f.wire != PROTO_WIRE_VARINT)
				goto bad;
			out->term = f.varint;
			break;
		case 3:
			if (f.wire != PROTO_WIRE_VARINT)
				goto bad;
			out->index = f.varint;
			break;
		case 4:
			if (f.wire != PROTO_WIRE_BYTES)
				goto bad;
			out->has_data = true;
			out->data = f.data;
			out->len = f.len;
			break;
		}
	}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -EBADMSG;
}

/* Message: one pass (see struct dec). */
static int dec_message(struct dec *d, const uint8_t *p, size_t len, struct raftmsg *m)
{
	struct proto_reader r = proto_reader_init(p, len);
	struct proto_field f;
	struct raftmsg_entry e;
	uint64_t *scalar;

	while (!proto_reader_done(&r)) {
		if (next_field(&r, &f))
			return -EBADMSG;
		scalar = NULL;
		switch (f.num) {
		case 1:
			WANT(f, PROTO_WIRE_VARINT);
			m->type = (int32_t)(uint32_t)f.varint;
			break;
		case 2: scalar = &m->to; break;
		case 3: scalar = &m->from; break;
		case 4: scalar = &m->term; break;
		case 5: scalar = &m->log_term; break;
		case 6: scalar = &m->index; break;
		case 8: scalar = &m->commit; break;
		case 11: scalar = &m->reject_hint; break;
		case 7:
			WANT(f, PROTO_WIRE_BYTES);
			if (raftmsg_entry_decode(f.data, f.len, &e))
				return -EBADMSG;
			if (d->fill)
				d->entries[d->n_entries] = e;
			d->n_entries++;
			break;
		case 9:
			WANT(f, PROTO_WIRE_BYTES);
			if (dec_snapshot(d, f.data, f.len, &m->snapshot))
				return -EBADMSG;
			break;
		case 10:
			WANT(f, PROTO_WIRE_VARINT);
			m->reject = f.varint != 0;
			break;
		case 12:
			WANT(f, PROTO_WIRE_BYTES);
			m->has_context = true;
			m->context = f.data;
			m->context_len = f.len;
			break;
		}
		if (scalar) {
			WANT(f, PROTO_WIRE_VARINT);
			*scalar = f.varint;
		}
	}
	return 0;
}

/* Sizes the block for what a counting pass found: entries, then the id
 * lists. -ENOMEM when the size does not fit a size_t. */
static int dec_alloc_size(const struct dec *d, size_t *bytes)
{
	size_t n = 0, ids = 0;

	for (unsigned k = 0; k < IDS_LISTS; k++)
		ids += d->n_ids[k];
	if (d->n_entries > SIZE_MAX / sizeof(struct raftmsg_entry) ||
	    ids > SIZE_MAX / sizeof(uint64_t))
		return -ENOMEM;
	n = d->n_entries * sizeof(struct raftmsg_entry);
	if (ids * sizeof(uint64_t) > SIZE_MAX - n)
		return -ENOMEM;
	*bytes = n + ids * sizeof(uint64_t);
	return 0;
}

/* Lays out a filling pass over block, sized by the counting pass d. */
static void dec_layout(struct dec *fill, const struct dec *count, void *block)
{
	uint64_t *ids;

	memset(fill, 0, sizeof(*fill));
	fill->fill = true;
	fill->entries = block;
	ids = (uint64_t *)(fill->entries + count->n_entries);
	for (unsigned k = 0; k < IDS_LISTS; k++) {
		fill->ids[k] = ids;
		ids += count->n_ids[k];
	}
}

/* Points the conf state's lists at a filling pass's arrays. */
static void dec_set_lists(const struct dec *d, struct raftmsg_conf_state *cs)
{
	cs->voters = d->n_ids[IDS_VOTERS] ? d->ids[IDS_VOTERS] : NULL;
	cs->n_voters = d->n_ids[IDS_VOTERS];
	cs->learners = d->n_ids[IDS_LEARNERS] ? d->ids[IDS_LEARNERS] : NULL;
	cs->n_learners = d->n_ids[IDS_LEARNERS];
	cs->voters_outgoing = d->n_ids[IDS_VOTERS_OUTGOING] ? d->ids[IDS_VOTERS_OUTGOING] : NULL;
	cs->n_voters_outgoing = d->n_ids[IDS_VOTERS_OUTGOING];
	cs->learners_next = d->n_ids[IDS_LEARNERS_NEXT] ? d->ids[IDS_LEARNERS_NEXT] : NULL;
	cs->n_learners_next = d->n_ids[IDS_LEARNERS_NEXT];
}

/*
 * Runs the counting pass, then allocates and runs the filling pass, for a
 * message (m, and s its snapshot) or a snapshot alone (m NULL, s). *block
 * is the allocation (NULL when nothing needed one).
 */
static int dec_two_pass(const uint8_t *p, size_t len, struct raftmsg *m,
			struct raftmsg_snapshot *s, void **block)
{
	struct dec count = { 0 }, fill;
	size_t bytes;
	int rc;

	*block = NULL;
	rc = m ? dec_message(&count, p, len, m) : dec_snapshot(&count, p, len, s);
	if (rc)
		return rc;
	if ((rc = dec_alloc_size(&count, &bytes)) != 0)
		return rc;
	if (bytes == 0)
		return 0; /* the counting pass has set every field */
	*block = raftd_malloc(bytes);
	if (!*block)
		return -ENOMEM;
	dec_layout(&fill, &count, *block);
	if (m) {
		memset(m, 0, sizeof(*m));
		dec_message(&fill, p, len, m);
		m->entries = count.n_entries ? fill.entries : NULL;
		m->n_entries = count.n_entries;
	} else {
		memset(s, 0, sizeof(*s));
		dec_snapshot(&fill, p, len, s);
	}
	dec_set_lists(&fill, &s->conf_state);
	return 0;
}

int raftmsg_decode(const uint8_t *p, size_t len, struct raftmsg *out)
{
	void *block;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = dec_two_pass(p, len, out, &out->snapshot, &block);
	if (rc) {
		memset(out, 0, sizeof(*out));
		return rc;
	}
	out->alloc = block;
	return 0;
}

int raftmsg_snapshot_decode(const uint8_t *p, size_t len, struct raftmsg_snapshot *out,
			    void **alloc)
{
	int rc;

	memset(out, 0, sizeof(*out));
	rc = dec_two_pass(p, len, NULL, out, alloc);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

void raftmsg_release(struct raftmsg *m)
{
	raftd_free(m->alloc);
	memset(m, 0, sizeof(*m));
}

int raftmsg_conf_change_decode(const uint8_t *p, size_t len, struct raftmsg_conf_change *out)
{
	struct proto_reader r = proto_reader_init(p, len);
	struct proto_field f;

	memset(out, 0, sizeof(*out));
	while (!proto_reader_done(&r)) {
		if (next_field(&r, &f))
			goto bad;
		if (f.num >= 1 && f.num <= 3) {
			if (f.wire != PROTO_WIRE_VARINT)
				goto bad;
			if (f.num == 1)
				out->id = f.varint;
			else if (f.num == 2)
				out->type = (int32_t)(uint32_t)f.varint;
			else
				out->node_id = f.varint;
		} else if (f.num == 4) {
			if (f.wire != PROTO_WIRE_BYTES)
				goto bad;
			out->has_context = true;
			out->context = f.data;
			out->context_len = f.len;
		}
	}
	return 0;
bad:
	memset(out, 0, sizeof(*out));
	return -EBADMSG;
}

/* ---- contexts ---- */

bool raftmsg_is_campaign_transfer(const struct raftmsg *m)
{
	return m->context_len == RAFTMSG_CAMPAIGN_TRANSFER_LEN &&
	       memcmp(m->context, RAFTMSG_CAMPAIGN_TRANSFER, RAFTMSG_CAMPAIGN_TRANSFER_LEN) == 0;
}

void raftmsg_read_ctx_put(uint8_t out[RAFTMSG_READ_CTX_LEN], uint64_t id)
{
	for (unsigned i = 0; i < RAFTMSG_READ_CTX_LEN; i++)
		out[i] = (uint8_t)(id >> (56 - 8 * i));
}

int raftmsg_read_ctx_get(const uint8_t *p, size_t len, uint64_t *id)
{
	uint64_t v = 0;

	if (len != RAFTMSG_READ_CTX_LEN)
		return -EINVAL;
	for (unsigned i = 0; i < RAFTMSG_READ_CTX_LEN; i++)
		v = v << 8 | p[i];
	*id = v;
	return 0;
}
