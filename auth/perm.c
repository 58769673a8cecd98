/*
 * The permission cache (see perm.h): records are decoded as they come
 * (permission key bytes into one buffer, names into another), and
 * auth_builder_finish sorts the roles and users by name and merges each
 * user's permissions.
 */
#include "auth/perm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/alloc.h"
#include "base/log/errmsg.h"
#include "proto/wire.h"

/* The buckets' names, for messages. */
#define PERM_ROLES "authRoles"
#define PERM_USERS "authUsers"

/* Bytes [off, off + len) of a buffer. */
struct auth_span {
	uint32_t off;
	uint32_t len;
};

/* [begin, end) in the key buffer; end.len 0 means no end. begin < end. */
struct auth_ivl {
	struct auth_span begin;
	struct auth_span end;
};

/* A decoded, well-formed permission of a role. */
struct auth_perm {
	struct auth_ivl ivl;
	int32_t type;  /* AUTH_PB_*, or another value that grants nothing */
};

struct auth_role {
	struct auth_span name;  /* in names */
	uint32_t first_perm;    /* perms[first_perm, first_perm + n_perms) */
	uint32_t n_perms;
};

struct auth_user {
	struct auth_span name;  /* in names */
	uint32_t first_role;    /* role_names[first_role, + n_roles): as the record lists them */
	uint32_t n_roles;
	uint32_t first[2];      /* per enum auth_perm_type: ivls[first, first + n) */
	uint32_t n[2];
	bool root;
};

struct auth_cache {
	bool enabled;
	uint64_t revision;
	struct auth_user *users;      /* sorted by name, names unique */
	size_t n_users;
	struct auth_ivl *ivls;        /* each user's sets, sorted, disjoint, non-adjacent */
	struct auth_span *role_names; /* in names */
	uint8_t *keys;                /* permission keys and ends */
	uint8_t *names;               /* user and role names */
};

struct auth_builder {
	struct auth_cache *c;
	size_t users_cap, ivls_cap, n_ivls, role_names_cap, n_role_names;
	size_t keys_len, keys_cap, names_len, names_cap;
	struct auth_role *roles;
	size_t n_roles, roles_cap;
	struct auth_perm *perms;
	size_t n_perms, perms_cap;
	struct auth_ivl *scratch;    /* one user's set being merged */
	size_t scratch_cap;
	int failed;                  /* the first error, refused ever after */
};

/* ---- memory ---- */

/* Makes the array *v (of *cap elements of elem_size bytes, or NULL with
 * *cap 0) hold at least need elements, doubling; 0 or -ENOMEM (*v and
 * *cap kept). The hook has no realloc: a larger block, copied. */
static int perm_grow(void *v, size_t *cap, size_t need, size_t elem_size)
{
	void **arr = v;
	size_t n = *cap ? *cap : 8;

	if (need <= *cap)
		return 0;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -ENOMEM;
		n *= 2;
	}
	if (elem_size && n > SIZE_MAX / elem_size)
		return -ENOMEM;
	void *p = auth_alloc(n * elem_size);
	if (!p)
		return -ENOMEM;
	if (*cap)
		memcpy(p, *arr, *cap * elem_size);
	auth_free(*arr);
	*arr = p;
	*cap = n;
	return 0;
}

/* ---- bytes ---- */

static int bytes_cmp(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	int r = n ? memcmp(a, b, n) : 0;
	if (r)
		return r;
	return alen < blen ? -1 : alen > blen;
}

static int span_cmp(const uint8_t *buf, struct auth_span a, struct auth_span b)
{
	return bytes_cmp(buf + a.off, a.len, buf + b.off, b.len);
}

/* Appends n bytes (and a 0 byte after them when zero) to *buf. */
static int buf_append(uint8_t **buf, size_t *len, size_t *cap, const void *p, size_t n,
		      bool zero, struct auth_span *out)
{
	size_t need = n + zero;
	if (*len + need >= UINT32_MAX)
		return errmsg_set(-EFBIG, "auth: the auth buckets hold over 4 GiB of permissions and names");
	if (perm_grow(buf, cap, *len + need, 1))
		return -ENOMEM;
	if (n)
		memcpy(*buf + *len, p, n);
	if (zero)
		(*buf)[*len + n] = 0;
	*out = (struct auth_span){ (uint32_t)*len, (uint32_t)need };
	*len += need;
	return 0;
}

/* A key for a message: printable ASCII as is, other bytes as \xNN, cut at
 * 48 bytes. */
static const char *printable(const uint8_t *p, size_t len, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < len && o + 5 < cap; i++) {
		if (i == 48) {
			o += (size_t)snprintf(out + o, cap - o, "...");
			break;
		}
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
			out[o++] = (char)p[i];
		else
			o += (size_t)snprintf(out + o, cap - o, "\\x%02x", p[i]);
	}
	out[o < cap ? o : cap - 1] = 0;
	return out;
}

int auth_record_corrupt(const char *bucket, const void *key, size_t key_len, const char *what)
{
	char k[256];
	return errmsg_set(-EUCLEAN,
			  "auth: the %s entry \"%s\" %s; the db's auth buckets are corrupt, "
			  "restore the db from a snapshot",
			  bucket, printable(key, key_len, k, sizeof(k)), what);
}

/* ---- authpb decoding (gogo's rules: unknown fields skipped, a repeated
 * scalar field's last value wins, a wrong wire type is an error) ---- */

/* Reads the next field of r into f; "" on success, else what is wrong. */
static const char *next_field(struct proto_reader *r, struct proto_field *f)
{
	switch (proto_read_field(r, f)) {
	case 0:
		return "";
	case -EINVAL:
		return "has a field numbered 0 or less";
	case -EPROTO:
		return "has a field of an invalid wire type";
	default:
		return "ends inside a field";
	}
}

/* NULL when field f has wire type want, else what is wrong (bad). */
static const char *wire_check(const struct proto_field *f, unsigned want, const char *bad)
{
	return f->wire == want ? NULL : bad;
}

/* Calls field(f, arg) for each field of the message [p, p + len), until
 * one answers what is wrong; NULL or that answer. */
static const char *fields_walk(const uint8_t *p, size_t len,
			       const char *(*field)(const struct proto_field *f, void *arg), void *arg)
{
	struct proto_reader r = proto_reader_init(p, len);
	struct proto_field f;
	const char *bad;

	while (!proto_reader_done(&r))
		if (*(bad = next_field(&r, &f)) || (bad = field(&f, arg)))
			return bad;
	return NULL;
}

/* An authpb.Permission as read. */
struct perm_pb {
	int32_t type;
	const uint8_t *key, *end;
	size_t key_len, end_len;
};

static const char *perm_field(const struct proto_field *f, void *arg)
{
	struct perm_pb *pm = arg;
	const char *bad;

	switch (f->num) {
	case 1:
		if ((bad = wire_check(f, PROTO_WIRE_VARINT, "has a permission type that is no varint")))
			return bad;
		pm->type = (int32_t)f->varint;
		break;
	case 2:
		if ((bad = wire_check(f, PROTO_WIRE_BYTES, "has a permission key that is no bytes")))
			return bad;
		pm->key = f->data;
		pm->key_len = f->len;
		break;
	case 3:
		if ((bad = wire_check(f, PROTO_WIRE_BYTES, "has a permission range_end that is no bytes")))
			return bad;
		pm->end = f->data;
		pm->end_len = f->len;
		break;
	}
	return NULL;
}

/* Whether a permission's interval is well-formed (begin < end in etcd's
 * order, where the empty string is above all): its key is not empty, and
 * its end is none, key + "\0", or above key. */
static bool perm_well_formed(const uint8_t *key, size_t key_len, const uint8_t *end, size_t end_len)
{
	if (key_len == 0)
		return false;
	if (end_len == 0 || (end_len == 1 && end[0] == 0))
		return true;
	return bytes_cmp(key, key_len, end, end_len) < 0;
}

static int builder_fail(struct auth_builder *b, int rc)
{
	if (rc && !b->failed)
		b->failed = rc;
	return rc;
}

/* Adds one permission (kept only when it grants something). */
static int add_perm(struct auth_builder *b, int32_t type, const uint8_t *key, size_t key_len,
		    const uint8_t *end, size_t end_len)
{
	struct auth_perm pm = { .type = type };
	int rc;

	if (!perm_well_formed(key, key_len, end, end_len) ||
	    (type != AUTH_PB_READ && type != AUTH_PB_WRITE && type != AUTH_PB_READWRITE))
		return 0;
	if (perm_grow(&b->perms, &b->perms_cap, b->n_perms + 1, sizeof(*b->perms)))
		return -ENOMEM;
	rc = buf_append(&b->c->keys, &b->keys_len, &b->keys_cap, key, key_len, false, &pm.ivl.begin);
	if (rc)
		return rc;
	if (end_len == 0) /* one key: [key, key + "\0") */
		rc = buf_append(&b->c->keys, &b->keys_len, &b->keys_cap, key, key_len, true,
				&pm.ivl.end);
	else if (!(end_len == 1 && end[0] == 0))
		rc = buf_append(&b->c->keys, &b->keys_len, &b->keys_cap, end, end_len, false,
				&pm.ivl.end);
	if (rc)
		return rc;
	b->perms[b->n_perms++] = pm;
	return 0;
}

int auth_builder_begin(struct auth_builder **out)
{
	struct auth_builder *b = auth_alloc(sizeof(*b));
	if (!b)
		return -ENOMEM;
	memset(b, 0, sizeof(*b));
	b->c = auth_alloc(sizeof(*b->c));
	if (!b->c) {
		auth_free(b);
		return -ENOMEM;
	}
	memset(b->c, 0, sizeof(*b->c));
	/* the buffers exist from the start: a span of an empty name or key
	 * then points into one (no arithmetic on NULL) */
	if (perm_grow(&b->c->keys, &b->keys_cap, 1, 1) ||
	    perm_grow(&b->c->names, &b->names_cap, 1, 1)) {
		auth_builder_abort(b);
		return -ENOMEM;
	}
	*out = b;
	return 0;
}

int auth_builder_state(struct auth_builder *b, const uint8_t *enabled, size_t enabled_len,
		       const uint8_t *revision, size_t revision_len)
{
	if (b->failed)
		return b->failed;
	if (enabled) {
		if (enabled_len != 1 || enabled[0] > 1)
			return builder_fail(b, auth_record_corrupt("auth", "authEnabled", 11, "is not one byte 0 or 1"));
		b->c->enabled = enabled[0] == 1;
	}
	if (revision) {
		if (revision_len != 8)
			return builder_fail(b, auth_record_corrupt("auth", "authRevision", 12, "is not 8 bytes"));
		uint64_t v = 0;
		for (int i = 0; i < 8; i++)
			v = v << 8 | revision[i];
		b->c->revision = v;
	}
	return 0;
}

/* What a record's field callbacks share: the builder, the failure that
 * is not the record's fault (rc, with the answer rec_failed), and the
 * user being read. */
struct rec_ctx {
	struct auth_builder *b;
	int rc;
	struct auth_user u;
	const uint8_t *name;
	size_t name_len;
};
static const char rec_failed[] = "";

/* Walks the fields of the record key -> val of bucket with field; 0, the
 * callback's rc, or the record's corruption. */
static int record_walk(const char *bucket, const void *key, size_t key_len, const uint8_t *val,
		       size_t val_len, const char *(*field)(const struct proto_field *, void *),
		       struct rec_ctx *x)
{
	const char *bad = fields_walk(val, val_len, field, x);
	if (bad == rec_failed)
		return x->rc;
	return bad ? auth_record_corrupt(bucket, key, key_len, bad) : 0;
}

static const char *role_field(const struct proto_field *f, void *arg)
{
	struct rec_ctx *x = arg;
	struct perm_pb pm = { .type = AUTH_PB_READ };
	const char *bad;

	if (f->num == 1)
		return wire_check(f, PROTO_WIRE_BYTES, "has a name that is no bytes");
	if (f->num != 2)
		return NULL;
	if ((bad = wire_check(f, PROTO_WIRE_BYTES, "has a permission that is no message")) ||
	    (bad = fields_walk(f->data, f->len, perm_field, &pm)))
		return bad;
	x->rc = add_perm(x->b, pm.type, pm.key, pm.key_len, pm.end, pm.end_len);
	return x->rc ? rec_failed : NULL;
}

int auth_builder_role(struct auth_builder *b, const void *key, size_t key_len, const uint8_t *val,
		      size_t val_len)
{
	struct rec_ctx x = { .b = b };
	struct auth_role role = { .first_perm = (uint32_t)b->n_perms };
	int rc;

	if (b->failed)
		return b->failed;
	rc = record_walk(PERM_ROLES, key, key_len, val, val_len, role_field, &x);
	if (rc)
		return builder_fail(b, rc);
	role.n_perms = (uint32_t)(b->n_perms - role.first_perm);
	if (perm_grow(&b->roles, &b->roles_cap, b->n_roles + 1, sizeof(*b->roles)))
		return builder_fail(b, -ENOMEM);
	rc = buf_append(&b->c->names, &b->names_len, &b->names_cap, key, key_len, false, &role.name);
	if (rc)
		return builder_fail(b, rc);
	b->roles[b->n_roles++] = role;
	return 0;
}

/* A field of an authpb.UserAddOptions (its one field is a varint). */
static const char *options_field(const struct proto_field *f, void *arg)
{
	(void)arg;
	if (f->num == 1 && f->wire != PROTO_WIRE_VARINT)
		return "has a no_password option that is no varint";
	return NULL;
}

/* Keeps the role name f holds for the user being read. */
static int user_role_add(struct rec_ctx *x, const struct proto_field *f)
{
	struct auth_builder *b = x->b;
	struct auth_span s;
	int rc;

	if (perm_grow(&b->c->role_names, &b->role_names_cap, b->n_role_names + 1,
		      sizeof(*b->c->role_names)))
		return -ENOMEM;
	rc = buf_append(&b->c->names, &b->names_len, &b->names_cap, f->data, f->len, false, &s);
	if (rc)
		return rc;
	b->c->role_names[b->n_role_names++] = s;
	if (f->len == (sizeof(AUTH_ROOT_ROLE) - 1) && !memcmp(f->data, AUTH_ROOT_ROLE, f->len))
		x->u.root = true;
	return 0;
}

static const char *user_field(const struct proto_field *f, void *arg)
{
	struct rec_ctx *x = arg;

	if (f->num < 1 || f->num > 4)
		return NULL;
	if (f->wire != PROTO_WIRE_BYTES)
		return "has a field 1 to 4 that is not length-delimited";
	if (f->num == 1) {
		x->name = f->data;
		x->name_len = f->len;
	} else if (f->num == 4) {
		return fields_walk(f->data, f->len, options_field, NULL);
	} else if (f->num == 3) {
		x->rc = user_role_add(x, f);
		return x->rc ? rec_failed : NULL;
	}
	return NULL;
}

int auth_builder_user(struct auth_builder *b, const void *key, size_t key_len, const uint8_t *val,
		      size_t val_len)
{
	struct rec_ctx x = { .b = b, .u = { .first_role = (uint32_t)b->n_role_names } };
	int rc;

	if (b->failed)
		return b->failed;
	rc = record_walk(PERM_USERS, key, key_len, val, val_len, user_field, &x);
	if (rc)
		return builder_fail(b, rc);
	if (x.name_len != key_len || (key_len && memcmp(x.name, key, key_len)))
		return builder_fail(b, auth_record_corrupt(PERM_USERS, key, key_len,
					       "holds a user of another name"));
	x.u.n_roles = (uint32_t)(b->n_role_names - x.u.first_role);
	if (perm_grow(&b->c->users, &b->users_cap, b->c->n_users + 1, sizeof(*b->c->users)))
		return builder_fail(b, -ENOMEM);
	rc = buf_append(&b->c->names, &b->names_len, &b->names_cap, key, key_len, false, &x.u.name);
	if (rc)
		return builder_fail(b, rc);
	b->c->users[b->c->n_users++] = x.u;
	return 0;
}

/* ---- finishing: sort, merge ---- */

static int role_cmp(const void *a, const void *b, void *names)
{
	return span_cmp(names, ((const struct auth_role *)a)->name, ((const struct auth_role *)b)->name);
}

static int user_cmp(const void *a, const void *b, void *names)
{
	return span_cmp(names, ((const struct auth_user *)a)->name, ((const struct auth_user *)b)->name);
}

static int ivl_begin_cmp(const void *a, const void *b, void *keys)
{
	return span_cmp(keys, ((const struct auth_ivl *)a)->begin, ((const struct auth_ivl *)b)->begin);
}

static const struct auth_role *role_find(const struct auth_builder *b, struct auth_span name)
{
	size_t lo = 0, hi = b->n_roles;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = span_cmp(b->c->names, b->roles[mid].name, name);
		if (r == 0)
			return &b->roles[mid];
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Merges the n intervals of scratch into the sorted, disjoint,
 * non-adjacent set appended to the cache's intervals; *first, *count
 * receive where it is. */
static int merge_set(struct auth_builder *b, size_t n, uint32_t *first, uint32_t *count)
{
	const uint8_t *keys = b->c->keys;
	struct auth_ivl *s = b->scratch;
	size_t out = 0;

	if (n == 0) {
		*first = *count = 0;
		return 0;
	}
	qsort_r(s, n, sizeof(*s), ivl_begin_cmp, (void *)keys);
	for (size_t i = 1; i < n; i++) {
		struct auth_ivl *cur = &s[out];
		if (cur->end.len == 0)
			break; /* no end: it holds every later interval */
		if (span_cmp(keys, s[i].begin, cur->end) <= 0) {
			if (s[i].end.len == 0 || span_cmp(keys, s[i].end, cur->end) > 0)
				cur->end = s[i].end;
		} else {
			s[++out] = s[i];
		}
	}
	out++;
	if (perm_grow(&b->c->ivls, &b->ivls_cap, b->n_ivls + out, sizeof(*b->c->ivls)))
		return -ENOMEM;
	memcpy(b->c->ivls + b->n_ivls, s, out * sizeof(*s));
	*first = (uint32_t)b->n_ivls;
	*count = (uint32_t)out;
	b->n_ivls += out;
	return 0;
}

/* Collects user u's permissions of type t from its roles into scratch and
 * merges them. */
static int merge_user(struct auth_builder *b, struct auth_user *u, enum auth_perm_type t)
{
	size_t n = 0;

	for (uint32_t i = 0; i < u->n_roles; i++) {
		const struct auth_role *role = role_find(b, b->c->role_names[u->first_role + i]);
		if (!role)
			continue; /* etcd skips a role that does not exist */
		for (uint32_t j = 0; j < role->n_perms; j++) {
			const struct auth_perm *pm = &b->perms[role->first_perm + j];
			bool take = pm->type == AUTH_PB_READWRITE ||
				    (t == AUTH_PERM_READ ? pm->type == AUTH_PB_READ
							 : pm->type == AUTH_PB_WRITE);
			if (!take)
				continue;
			if (perm_grow(&b->scratch, &b->scratch_cap, n + 1, sizeof(*b->scratch)))
				return -ENOMEM;
			b->scratch[n++] = pm->ivl;
		}
	}
	return merge_set(b, n, &u->first[t], &u->n[t]);
}

static void builder_free(struct auth_builder *b)
{
	auth_free(b->roles);
	auth_free(b->perms);
	auth_free(b->scratch);
	auth_free(b);
}

void auth_builder_abort(struct auth_builder *b)
{
	if (!b)
		return;
	auth_cache_free(b->c);
	builder_free(b);
}

int auth_builder_finish(struct auth_builder *b, struct auth_cache **out)
{
	struct auth_cache *c = b->c;
	int rc = b->failed;

	if (rc)
		goto out_abort;
	if (b->n_roles)
		qsort_r(b->roles, b->n_roles, sizeof(*b->roles), role_cmp, c->names);
	for (size_t i = 1; i < b->n_roles; i++)
		if (role_cmp(&b->roles[i - 1], &b->roles[i], c->names) == 0) {
			rc = auth_record_corrupt(PERM_ROLES, c->names + b->roles[i].name.off,
				     b->roles[i].name.len, "is there twice");
			goto out_abort;
		}
	if (c->n_users)
		qsort_r(c->users, c->n_users, sizeof(*c->users), user_cmp, c->names);
	for (size_t i = 0; i < c->n_users; i++) {
		if (i && user_cmp(&c->users[i - 1], &c->users[i], c->names) == 0) {
			rc = auth_record_corrupt(PERM_USERS, c->names + c->users[i].name.off,
				     c->users[i].name.len, "is there twice");
			goto out_abort;
		}
		if ((rc = merge_user(b, &c->users[i], AUTH_PERM_READ)) ||
		    (rc = merge_user(b, &c->users[i], AUTH_PERM_WRITE)))
			goto out_abort;
	}
	builder_free(b);
	*out = c;
	return 0;

out_abort:
	auth_builder_abort(b);
	return rc;
}

void auth_cache_free(struct auth_cache *c)
{
	if (!c)
		return;
	auth_free(c->users);
	auth_free(c->ivls);
	auth_free(c->role_names);
	auth_free(c->keys);
	auth_free(c->names);
	auth_free(c);
}

/* ---- questions ---- */

bool auth_cache_enabled(const struct auth_cache *c)
{
	return c->enabled;
}

uint64_t auth_cache_revision(const struct auth_cache *c)
{
	return c->revision;
}

size_t auth_cache_user_count(const struct auth_cache *c)
{
	return c->n_users;
}

const struct auth_user *auth_cache_user(const struct auth_cache *c, const void *name, size_t len)
{
	size_t lo = 0, hi = c->n_users;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct auth_user *u = &c->users[mid];
		int r = bytes_cmp(c->names + u->name.off, u->name.len, name, len);
		if (r == 0)
			return u;
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

bool auth_user_is_root(const struct auth_user *u)
{
	return u->root;
}

bool auth_user_has_role(const struct auth_cache *c, const struct auth_user *u, const void *role,
			size_t len)
{
	for (uint32_t i = 0; i < u->n_roles; i++) {
		struct auth_span s = c->role_names[u->first_role + i];
		if (s.len == len && !memcmp(c->names + s.off, role, len))
			return true;
	}
	return false;
}

size_t auth_user_interval_count(const struct auth_user *u, enum auth_perm_type t)
{
	return u->n[t];
}

/* The interval of u's set t with the greatest begin <= key, or NULL. */
static const struct auth_ivl *ivl_at(const struct auth_cache *c, const struct auth_user *u,
				     enum auth_perm_type t, const uint8_t *key, size_t key_len)
{
	if (u->n[t] == 0)
		return NULL;
	const struct auth_ivl *set = c->ivls + u->first[t];
	size_t lo = 0, hi = u->n[t];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bytes_cmp(c->keys + set[mid].begin.off, set[mid].begin.len, key, key_len) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &set[lo - 1] : NULL;
}

bool auth_user_permitted(const struct auth_cache *c, const struct auth_user *u,
			 enum auth_perm_type t, const uint8_t *key, size_t key_len,
			 const uint8_t *range_end, size_t range_end_len)
{
	bool to_end = range_end_len == 1 && range_end[0] == 0;

	if (key_len == 0) /* the empty key is above every interval's begin */
		return false;
	const struct auth_ivl *iv = ivl_at(c, u, t, key, key_len);
	if (!iv)
		return false;
	if (iv->end.len == 0)
		return true;
	if (to_end)
		return false;
	const uint8_t *end = c->keys + iv->end.off;
	if (range_end_len == 0 || bytes_cmp(range_end, range_end_len, key, key_len) <= 0)
		return bytes_cmp(key, key_len, end, iv->end.len) < 0; /* the key alone */
	return bytes_cmp(range_end, range_end_len, end, iv->end.len) <= 0;
}
