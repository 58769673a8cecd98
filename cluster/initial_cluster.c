/* etcd's --initial-cluster (see initial_cluster.h). */
#include "cluster/initial_cluster.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static bool member_is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* A copy of s[0..len) without surrounding white space and with the scheme
 * (up to "://") lower-cased; NULL when out of memory. */
static char *member_url_canon(const char *s, size_t len)
{
	while (len > 0 && member_is_space(*s)) {
		s++;
		len--;
	}
	while (len > 0 && member_is_space(s[len - 1]))
		len--;
	char *u = strndup(s, len);
	if (!u)
		return NULL;
	char *sep = strstr(u, "://");
	for (char *p = u; sep && p < sep; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p + 32);
	return u;
}

void initial_cluster_free(struct initial_cluster *c)
{
	for (size_t i = 0; i < c->count; i++)
		member_info_clear(&c->v[i]);
	free(c->v);
	memset(c, 0, sizeof(*c));
}

/* The member named name[0..len), added if new; NULL when out of memory. */
static struct member_info *member_get(struct initial_cluster *c, const char *name, size_t len)
{
	for (size_t i = 0; i < c->count; i++)
		if (strlen(c->v[i].name) == len && memcmp(c->v[i].name, name, len) == 0)
			return &c->v[i];
	struct member_info *v = realloc(c->v, (c->count + 1) * sizeof(*v));
	if (!v)
		return NULL;
	c->v = v;
	v = &c->v[c->count];
	memset(v, 0, sizeof(*v));
	v->name = strndup(name, len);
	if (!v->name)
		return NULL;
	c->count++;
	return v;
}

static int member_add_url(struct member_info *m, const char *url, size_t len)
{
	char **v = realloc(m->peer_urls, (m->n_peer_urls + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	m->peer_urls = v;
	v[m->n_peer_urls] = member_url_canon(url, len);
	if (!v[m->n_peer_urls])
		return -ENOMEM;
	m->n_peer_urls++;
	return 0;
}

static int member_info_cmp(const void *a, const void *b)
{
	const struct member_info *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

int initial_cluster_parse(const char *initial_cluster, const char *token,
			  struct initial_cluster *out)
{
	struct initial_cluster c = { 0 };
	const char *p = initial_cluster;
	uint64_t *ids = NULL;
	int rc = 0;

	while (*p) {
		size_t len = strcspn(p, ",");
		const char *eq = memchr(p, '=', len);
		if (len > 0) {
			if (!eq) {
				rc = -EINVAL;
				goto out_free;
			}
			struct member_info *m = member_get(&c, p, (size_t)(eq - p));
			if (!m) {
				rc = -ENOMEM;
				goto out_free;
			}
			rc = member_add_url(m, eq + 1, len - (size_t)(eq - p) - 1);
			if (rc)
				goto out_free;
		}
		p += len;
		if (*p == ',')
			p++;
	}
	if (c.count == 0) {
		rc = -EINVAL;
		goto out_free;
	}
	for (size_t i = 0; i < c.count; i++) {
		struct member_info *m = &c.v[i];
		member_urls_sort(m->peer_urls, m->n_peer_urls);
		rc = member_id_compute((const char *const *)m->peer_urls, m->n_peer_urls, token,
				       &m->id);
		if (rc)
			goto out_free;
	}
	qsort(c.v, c.count, sizeof(*c.v), member_info_cmp);
	ids = malloc(c.count * sizeof(*ids));
	if (!ids) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < c.count; i++) {
		if (i > 0 && c.v[i].id == c.v[i - 1].id) {
			rc = -EEXIST;
			goto out_free;
		}
		ids[i] = c.v[i].id;
	}
	c.cluster_id = member_cluster_id(ids, c.count);
	free(ids);
	*out = c;
	return 0;

out_free:
	free(ids);
	initial_cluster_free(&c);
	return rc;
}

const struct member_info *initial_cluster_find(const struct initial_cluster *c, const char *name)
{
	for (size_t i = 0; i < c->count; i++)
		if (strcmp(c->v[i].name, name) == 0)
			return &c->v[i];
	return NULL;
}
