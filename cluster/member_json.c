/* A member in etcd's JSON (see member_json.h). */
#include "cluster/member_json.h"
#include "base/hex/hex.h"
#include "cluster/member_json_int.h"

#include "base/log/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- writing ---- */


void mj_add(struct mj_buf *b, const void *data, size_t n)
{
	if (b->failed)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 128;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->failed = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void mj_adds(struct mj_buf *b, const char *s)
{
	mj_add(b, s, strlen(s));
}

/* A JSON string as Go's encoding/json writes it (HTML-safe escapes,
 * U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD). */
void mj_string(struct mj_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strlen(s), i = 0;
	char esc[8];

	mj_add(b, "\"", 1);
	while (i < n) {
		unsigned char c = u[i];
		if (c >= 0x80) {
			size_t k = log_utf8_len(u + i, n - i);
			if (k == 0) {
				mj_adds(b, "\\ufffd");
				i++;
			} else if (k == 3 && c == 0xe2 && u[i + 1] == 0x80 &&
				   (u[i + 2] == 0xa8 || u[i + 2] == 0xa9)) {
				mj_adds(b, u[i + 2] == 0xa8 ? "\\u2028" : "\\u2029");
				i += 3;
			} else {
				mj_add(b, u + i, k);
				i += k;
			}
			continue;
		}
		if (c == '"' || c == '\\') {
			esc[0] = '\\', esc[1] = (char)c;
			mj_add(b, esc, 2);
		} else if (c == '\n') {
			mj_adds(b, "\\n");
		} else if (c == '\r') {
			mj_adds(b, "\\r");
		} else if (c == '\t') {
			mj_adds(b, "\\t");
		} else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
			snprintf(esc, sizeof(esc), "\\u00%c%c", hex[c >> 4], hex[c & 15]);
			mj_add(b, esc, 6);
		} else {
			mj_add(b, &c, 1);
		}
		i++;
	}
	mj_add(b, "\"", 1);
}

void mj_strings(struct mj_buf *b, char *const *v, size_t n)
{
	mj_add(b, "[", 1);
	for (size_t i = 0; i < n; i++) {
		if (i)
			mj_add(b, ",", 1);
		mj_string(b, v[i]);
	}
	mj_add(b, "]", 1);
}

/* Attributes' fields, each after sep ("," or "{") when present. */
static void mj_attributes(struct mj_buf *b, const struct member_info *m, const char *sep)
{
	if (m->name && m->name[0]) {
		mj_adds(b, sep);
		mj_adds(b, "\"name\":");
		mj_string(b, m->name);
		sep = ",";
	}
	if (m->n_client_urls) {
		mj_adds(b, sep);
		mj_adds(b, "\"clientURLs\":");
		mj_strings(b, m->client_urls, m->n_client_urls);
		sep = ",";
	}
	if (sep[0] == '{')
		mj_add(b, "{", 1);
}

int mj_finish(struct mj_buf *b, char **out, size_t *len)
{
	if (b->failed) {
		free(b->p);
		return -ENOMEM;
	}
	*out = b->p;
	*len = b->len;
	return 0;
}

int member_json_encode(const struct member_info *m, char **out, size_t *len)
{
	struct mj_buf b = { 0 };
	char num[24];

	snprintf(num, sizeof(num), "%" PRIu64, m->id);
	mj_adds(&b, "{\"id\":");
	mj_adds(&b, num);
	mj_adds(&b, ",\"peerURLs\":");
	/* a nil slice is "null" in Go; a member always has peer URLs */
	if (m->n_peer_urls)
		mj_strings(&b, m->peer_urls, m->n_peer_urls);
	else
		mj_adds(&b, "null");
	if (m->is_learner)
		mj_adds(&b, ",\"isLearner\":true");
	mj_attributes(&b, m, ",");
	mj_add(&b, "}", 1);
	return mj_finish(&b, out, len);
}

int member_json_encode_context(const struct member_info *m, bool is_promote, char **out,
			       size_t *len)
{
	const char *tail = is_promote ? ",\"isPromote\":true}" : ",\"isPromote\":false}";
	char *p;
	size_t n;
	int rc = member_json_encode(m, &p, &n);
	if (rc)
		return rc;
	/* the member's fields, then ConfigChangeContext's own */
	char *q = realloc(p, n + strlen(tail));
	if (!q) {
		free(p);
		return -ENOMEM;
	}
	memcpy(q + n - 1, tail, strlen(tail) + 1);
	*out = q;
	*len = n - 1 + strlen(tail);
	return 0;
}

int member_json_encode_attributes(const struct member_info *m, char **out, size_t *len)
{
	struct mj_buf b = { 0 };
	mj_attributes(&b, m, "{");
	mj_add(&b, "}", 1);
	return mj_finish(&b, out, len);
}

/* ---- reading ---- */


void mj_ws(struct mj_in *in)
{
	while (in->p < in->end &&
	       (*in->p == ' ' || *in->p == '\t' || *in->p == '\n' || *in->p == '\r'))
		in->p++;
}

bool mj_eat(struct mj_in *in, char c)
{
	mj_ws(in);
	if (in->p < in->end && *in->p == (unsigned char)c) {
		in->p++;
		return true;
	}
	return false;
}

static int mj_hex4(struct mj_in *in, uint32_t *out)
{
	uint32_t v = 0;
	if (in->end - in->p < 4)
		return -EBADMSG;
	for (int i = 0; i < 4; i++) {
		int d = hex_digit(*in->p++);
		if (d < 0)
			return -EBADMSG;
		v = v << 4 | (uint32_t)d;
	}
	*out = v;
	return 0;
}

static void mj_put_utf8(struct mj_buf *b, uint32_t r)
{
	char u[4];
	if (r < 0x80) {
		u[0] = (char)r;
		mj_add(b, u, 1);
	} else if (r < 0x800) {
		u[0] = (char)(0xc0 | r >> 6);
		u[1] = (char)(0x80 | (r & 0x3f));
		mj_add(b, u, 2);
	} else if (r < 0x10000) {
		u[0] = (char)(0xe0 | r >> 12);
		u[1] = (char)(0x80 | ((r >> 6) & 0x3f));
		u[2] = (char)(0x80 | (r & 0x3f));
		mj_add(b, u, 3);
	} else {
		u[0] = (char)(0xf0 | r >> 18);
		u[1] = (char)(0x80 | ((r >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((r >> 6) & 0x3f));
		u[3] = (char)(0x80 | (r & 0x3f));
		mj_add(b, u, 4);
	}
}

/* A JSON string, decoded into *out (malloc'ed, NUL-terminated) unless
 * out is NULL (skipped). A string holding NUL is refused: the member's
 * texts are C strings. */
int mj_string_in(struct mj_in *in, char **out)
{
	struct mj_buf b = { 0 };
	int rc = -EBADMSG;

	if (!mj_eat(in, '"'))
		return -EBADMSG;
	mj_add(&b, "", 0);
	while (in->p < in->end && *in->p != '"') {
		unsigned char c = *in->p++;
		if (c < 0x20)
			goto out_free;
		if (c != '\\') {
			mj_add(&b, &c, 1);
			continue;
		}
		if (in->p >= in->end)
			goto out_free;
		c = *in->p++;
		const char *simple = strchr("\"\\/bfnrt", c);
		if (c && simple) {
			static const char map[] = "\"\\/\b\f\n\r\t";
			mj_add(&b, &map[simple - "\"\\/bfnrt"], 1);
			continue;
		}
		if (c != 'u')
			goto out_free;
		uint32_t r, lo;
		if (mj_hex4(in, &r))
			goto out_free;
		if (r >= 0xd800 && r < 0xdc00 && in->end - in->p >= 6 && in->p[0] == '\\' &&
		    in->p[1] == 'u') {
			const unsigned char *save = in->p;
			in->p += 2;
			if (mj_hex4(in, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000)
				r = 0x10000 + ((r - 0xd800) << 10) + (lo - 0xdc00);
			else
				in->p = save;
		}
		if (r == 0)
			goto out_free;
		if (r >= 0xd800 && r < 0xe000)
			r = 0xfffd; /* a lone surrogate, as Go decodes it */
		mj_put_utf8(&b, r);
	}
	if (!mj_eat(in, '"'))
		goto out_free;
	if (b.failed) {
		rc = -ENOMEM;
		goto out_free;
	}
	if (out)
		*out = b.p;
	else
		free(b.p);
	return 0;

out_free:
	free(b.p);
	return rc;
}

static void mj_free_strings(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Replaces *dst (freed) with *src, which is left empty. */
static void mj_move_strings(char ***dst, size_t *n_dst, char ***src, size_t *n_src)
{
	mj_free_strings(*dst, *n_dst);
	*dst = *src;
	*n_dst = *n_src;
	*src = NULL;
	*n_src = 0;
}

/* An array of strings, or null (an empty list). */
static int mj_strings_in(struct mj_in *in, char ***out, size_t *n)
{
	char **v = NULL;
	size_t count = 0;
	int rc;

	mj_ws(in);
	if (in->end - in->p >= 4 && memcmp(in->p, "null", 4) == 0) {
		in->p += 4;
		*out = NULL;
		*n = 0;
		return 0;
	}
	if (!mj_eat(in, '['))
		return -EBADMSG;
	if (!mj_eat(in, ']')) {
		do {
			char **nv = realloc(v, (count + 1) * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				goto out_free;
			}
			v = nv;
			rc = mj_string_in(in, &v[count]);
			if (rc)
				goto out_free;
			count++;
		} while (mj_eat(in, ','));
		if (!mj_eat(in, ']')) {
			rc = -EBADMSG;
			goto out_free;
		}
	}
	*out = v;
	*n = count;
	return 0;

out_free:
	mj_free_strings(v, count);
	return rc;
}

/* A key's string array, replacing what an earlier same key gave. */
static int mj_strings_key(struct mj_in *in, char ***v, size_t *n)
{
	char **nv;
	size_t nn;
	int rc = mj_strings_in(in, &nv, &nn);
	if (!rc)
		mj_move_strings(v, n, &nv, &nn);
	return rc;
}

int mj_skip_value(struct mj_in *in);

/* The rest of an object or array after its opening bracket. */
static int mj_skip_container(struct mj_in *in, char close, bool keys)
{
	if (++in->depth > MJ_MAX_DEPTH)
		return -EBADMSG;
	if (!mj_eat(in, close)) {
		do {
			if (keys && (mj_string_in(in, NULL) || !mj_eat(in, ':')))
				return -EBADMSG;
			int rc = mj_skip_value(in);
			if (rc)
				return rc;
		} while (mj_eat(in, ','));
		if (!mj_eat(in, close))
			return -EBADMSG;
	}
	in->depth--;
	return 0;
}

int mj_skip_value(struct mj_in *in)
{
	mj_ws(in);
	if (in->p >= in->end)
		return -EBADMSG;
	switch (*in->p) {
	case '"':
		return mj_string_in(in, NULL);
	case '{':
		in->p++;
		return mj_skip_container(in, '}', true);
	case '[':
		in->p++;
		return mj_skip_container(in, ']', false);
	}
	static const char *const words[] = { "true", "false", "null" };
	for (size_t i = 0; i < 3; i++) {
		size_t l = strlen(words[i]);
		if ((size_t)(in->end - in->p) >= l && memcmp(in->p, words[i], l) == 0) {
			in->p += l;
			return 0;
		}
	}
	/* a number: JSON's grammar, loosely (digits, sign, fraction, exponent) */
	const unsigned char *start = in->p;
	while (in->p < in->end && strchr("+-0123456789.eE", *in->p) && *in->p)
		in->p++;
	return in->p > start ? 0 : -EBADMSG;
}

int mj_u64_in(struct mj_in *in, uint64_t *out)
{
	uint64_t v = 0;
	const unsigned char *start;

	mj_ws(in);
	start = in->p;
	while (in->p < in->end && *in->p >= '0' && *in->p <= '9') {
		unsigned d = *in->p - '0';
		if (v > (UINT64_MAX - d) / 10)
			return -EBADMSG;
		v = v * 10 + d;
		in->p++;
	}
	if (in->p == start || (in->p - start > 1 && *start == '0'))
		return -EBADMSG;
	if (in->p < in->end && strchr(".eE", *in->p) && *in->p)
		return -EBADMSG;
	*out = v;
	return 0;
}

int mj_bool_in(struct mj_in *in, bool *out)
{
	mj_ws(in);
	if (in->end - in->p >= 4 && memcmp(in->p, "true", 4) == 0) {
		in->p += 4;
		*out = true;
		return 0;
	}
	if (in->end - in->p >= 5 && memcmp(in->p, "false", 5) == 0) {
		in->p += 5;
		*out = false;
		return 0;
	}
	return -EBADMSG;
}

int member_json_decode(const void *p, size_t len, struct member_info *out)
{
	return member_json_decode_context(p, len, out, NULL);
}

int member_json_decode_context(const void *p, size_t len, struct member_info *out,
			       bool *is_promote)
{
	/* a ConfChange without a context hands in NULL and 0 */
	const unsigned char *b = p ? p : (const unsigned char *)"";
	struct mj_in in = { b, b + (p ? len : 0), 0 };
	struct member_info m = { 0 };
	bool has_id = false, has_name = false, has_peers = false, has_clients = false;
	bool has_learner = false, promote = false;
	int rc = -EBADMSG;

	if (!mj_eat(&in, '{'))
		return -EBADMSG;
	if (!mj_eat(&in, '}')) {
		do {
			char *key;
			rc = mj_string_in(&in, &key);
			if (rc)
				goto out_free;
			if (!mj_eat(&in, ':')) {
				free(key);
				rc = -EBADMSG;
				goto out_free;
			}
			/* Go matches keys case-insensitively; etcd writes
			 * them as below */
			if (strcasecmp(key, "id") == 0) {
				rc = mj_u64_in(&in, &m.id);
				has_id = true;
			} else if (strcasecmp(key, "name") == 0) {
				free(m.name);
				m.name = NULL;
				rc = mj_string_in(&in, &m.name);
				has_name = true;
			} else if (strcasecmp(key, "peerURLs") == 0) {
				rc = mj_strings_key(&in, &m.peer_urls, &m.n_peer_urls);
				has_peers = true;
			} else if (strcasecmp(key, "clientURLs") == 0) {
				rc = mj_strings_key(&in, &m.client_urls, &m.n_client_urls);
				has_clients = true;
			} else if (strcasecmp(key, "isLearner") == 0) {
				rc = mj_bool_in(&in, &m.is_learner);
				has_learner = true;
			} else if (is_promote && strcasecmp(key, "isPromote") == 0) {
				rc = mj_bool_in(&in, &promote);
			} else {
				rc = mj_skip_value(&in);
			}
			free(key);
			if (rc)
				goto out_free;
		} while (mj_eat(&in, ','));
		if (!mj_eat(&in, '}')) {
			rc = -EBADMSG;
			goto out_free;
		}
	}
	mj_ws(&in);
	if (in.p != in.end) {
		rc = -EBADMSG;
		goto out_free;
	}

	/* success: move what was present into out */
	if (is_promote)
		*is_promote = promote;
	if (has_id)
		out->id = m.id;
	if (has_learner)
		out->is_learner = m.is_learner;
	if (has_name) {
		free(out->name);
		out->name = m.name;
		m.name = NULL;
	}
	if (has_peers)
		mj_move_strings(&out->peer_urls, &out->n_peer_urls, &m.peer_urls, &m.n_peer_urls);
	if (has_clients)
		mj_move_strings(&out->client_urls, &out->n_client_urls, &m.client_urls,
				&m.n_client_urls);
	rc = 0;

out_free:
	member_info_clear(&m);
	return rc;
}

int member_json_decode_array(const void *p, size_t len, struct member_info **out, size_t *n)
{
	struct mj_in in = { p, (const unsigned char *)p + len, 0 };
	struct member_info *v = NULL;
	size_t count = 0;
	int rc = -EBADMSG;

	mj_ws(&in);
	if (in.end - in.p >= 4 && memcmp(in.p, "null", 4) == 0) {
		in.p += 4;
	} else {
		if (!mj_eat(&in, '['))
			return -EBADMSG;
		if (!mj_eat(&in, ']')) {
			do {
				mj_ws(&in);
				const unsigned char *start = in.p;
				if (in.p >= in.end || *in.p != '{' || mj_skip_value(&in))
					goto out_free;
				struct member_info *nv = realloc(v, (count + 1) * sizeof(*v));
				if (!nv) {
					rc = -ENOMEM;
					goto out_free;
				}
				v = nv;
				memset(&v[count], 0, sizeof(*v));
				rc = member_json_decode(start, (size_t)(in.p - start), &v[count]);
				if (rc)
					goto out_free;
				count++;
				rc = -EBADMSG;
			} while (mj_eat(&in, ','));
			if (!mj_eat(&in, ']'))
				goto out_free;
		}
	}
	mj_ws(&in);
	if (in.p != in.end)
		goto out_free;
	*out = v;
	*n = count;
	return 0;

out_free:
	for (size_t i = 0; i < count; i++)
		member_info_clear(&v[i]);
	free(v);
	return rc;
}
