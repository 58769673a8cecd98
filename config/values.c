/* The value syntaxes of etcd's flags, parsed as Go parses them: lists
 * (comma-separated), numbers (strconv with base 0), durations
 * (time.ParseDuration) and URLs (etcd's types.NewURLs over url.Parse),
 * with Go's error wording. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/config_int.h"

/* ---- lists ---- */

void config_strings_free(struct config_strings *s)
{
	for (size_t i = 0; i < s->count; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->count = 0;
}

static void config_url_free(struct config_url *u)
{
	free(u->text);
	free(u->host);
	free(u->port);
}

void config_urls_free(struct config_urls *us)
{
	for (size_t i = 0; i < us->count; i++)
		config_url_free(&us->v[i]);
	free(us->v);
	us->v = NULL;
	us->count = 0;
}

static int config_strcmp_p(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int config_url_cmp(const void *a, const void *b)
{
	return strcmp(((const struct config_url *)a)->text, ((const struct config_url *)b)->text);
}

/* Splits s at commas into out (every piece kept, empty ones too, as Go's
 * strings.Split). unique sorts and drops repeats. 0 or -ENOMEM. */
int config_split(const char *s, bool unique, struct config_strings *out)
{
	struct config_strings res = { 0 };
	size_t n = 1;
	for (const char *p = s; *p; p++)
		n += *p == ',';
	res.v = calloc(n, sizeof(*res.v));
	if (!res.v)
		return -ENOMEM;
	const char *start = s;
	for (size_t i = 0; i < n; i++) {
		const char *end = strchr(start, ',');
		size_t len = end ? (size_t)(end - start) : strlen(start);
		res.v[i] = strndup(start, len);
		if (!res.v[i]) {
			res.count = i;
			config_strings_free(&res);
			return -ENOMEM;
		}
		res.count = i + 1;
		start = end ? end + 1 : start + len;
	}
	if (unique && res.count > 1) {
		size_t w = 1;
		qsort(res.v, res.count, sizeof(*res.v), config_strcmp_p);
		for (size_t r = 1; r < res.count; r++) {
			if (strcmp(res.v[r], res.v[w - 1]) == 0)
				free(res.v[r]);
			else
				res.v[w++] = res.v[r];
		}
		res.count = w;
	}
	*out = res;
	return 0;
}

/* ---- numbers (Go's strconv with base 0) ---- */

/* Parses an unsigned Go integer literal: decimal, 0x, 0o, 0b, or 0-led
 * octal, with '_' allowed between digits. -EINVAL (syntax) or -ERANGE. */
int config_parse_uint_text(const char *s, uint64_t max, uint64_t *out)
{
	unsigned base = 10;
	const char *p = s;
	bool prefixed = false;
	uint64_t v = 0;
	bool any = false;
	bool last_us = false;

	if (*p == '\0')
		return -EINVAL;
	if (p[0] == '0' && p[1] != '\0') {
		switch (p[1]) {
		case 'x': case 'X': base = 16; p += 2; prefixed = true; break;
		case 'o': case 'O': base = 8; p += 2; prefixed = true; break;
		case 'b': case 'B': base = 2; p += 2; prefixed = true; break;
		default: base = 8; p += 1; any = true; break;
		}
	}
	/* an underscore may follow a base prefix or a digit */
	last_us = false;
	bool prev_digit_or_prefix = prefixed || any;
	for (; *p; p++) {
		unsigned d;
		if (*p == '_') {
			if (!prev_digit_or_prefix)
				return -EINVAL;
			prev_digit_or_prefix = false;
			last_us = true;
			continue;
		}
		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'z')
			d = (unsigned)(*p - 'a') + 10;
		else if (*p >= 'A' && *p <= 'Z')
			d = (unsigned)(*p - 'A') + 10;
		else
			return -EINVAL;
		if (d >= base)
			return -EINVAL;
		if (v > (UINT64_MAX - d) / base)
			return -ERANGE;
		v = v * base + d;
		any = true;
		last_us = false;
		prev_digit_or_prefix = true;
	}
	if (!any || last_us)
		return -EINVAL;
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int config_parse_int_text(const char *s, int64_t min, int64_t max, int64_t *out)
{
	bool neg = false;
	uint64_t u;
	if (*s == '+' || *s == '-') {
		neg = *s == '-';
		s++;
	}
	int rc = config_parse_uint_text(s, (uint64_t)INT64_MAX + 1, &u);
	if (rc)
		return rc;
	if (!neg && u > (uint64_t)INT64_MAX)
		return -ERANGE;
	int64_t v = neg ? (int64_t)(0 - u) : (int64_t)u;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/* Go's time.ParseDuration: "300ms", "1.5h", "2h45m", "-1s", "0". Writes
 * Go's message to why on failure. */
int config_parse_duration(const char *s0, int64_t *out, char *why, size_t whylen)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {
		{ "ns", 1ull },
		{ "us", 1000ull },
		{ "\xc2\xb5s", 1000ull }, /* U+00B5 */
		{ "\xce\xbcs", 1000ull }, /* U+03BC */
		{ "ms", 1000000ull },
		{ "s", 1000000000ull },
		{ "m", 60000000000ull },
		{ "h", 3600000000000ull },
	};
	const uint64_t limit = (uint64_t)1 << 63;
	const char *s = s0;
	bool neg = false;
	uint64_t d = 0;

	if (*s == '-' || *s == '+') {
		neg = *s == '-';
		s++;
	}
	if (strcmp(s, "0") == 0) {
		*out = 0;
		return 0;
	}
	if (*s == '\0')
		goto invalid;
	while (*s) {
		uint64_t v = 0, f = 0;
		double scale = 1;
		bool pre = false, post = false;

		if (!(*s == '.' || (*s >= '0' && *s <= '9')))
			goto invalid;
		while (*s >= '0' && *s <= '9') {
			if (v > (limit - 1) / 10)
				goto invalid;
			v = v * 10 + (uint64_t)(*s - '0');
			if (v > limit)
				goto invalid;
			s++;
			pre = true;
		}
		if (*s == '.') {
			s++;
			bool overflow = false;
			while (*s >= '0' && *s <= '9') {
				if (!overflow) {
					if (f > (limit - 1) / 10) {
						overflow = true; /* ignore further digits, as Go */
					} else {
						f = f * 10 + (uint64_t)(*s - '0');
						scale *= 10;
					}
				}
				s++;
				post = true;
			}
		}
		if (!pre && !post)
			goto invalid;
		const char *u = s;
		while (*s && *s != '.' && !(*s >= '0' && *s <= '9'))
			s++;
		if (u == s) {
			snprintf(why, whylen, "time: missing unit in duration \"%s\"", s0);
			return -EINVAL;
		}
		uint64_t unit = 0;
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			if (strlen(units[i].name) == (size_t)(s - u) &&
			    memcmp(units[i].name, u, (size_t)(s - u)) == 0)
				unit = units[i].ns;
		}
		if (!unit) {
			snprintf(why, whylen, "time: unknown unit \"%.*s\" in duration \"%s\"",
				 (int)(s - u), u, s0);
			return -EINVAL;
		}
		if (v > limit / unit)
			goto invalid;
		v *= unit;
		if (f > 0) {
			v += (uint64_t)((double)f * ((double)unit / scale));
			if (v > limit)
				goto invalid;
		}
		d += v;
		if (d > limit)
			goto invalid;
	}
	if (neg) {
		*out = (int64_t)(0 - d);
		return 0;
	}
	if (d > limit - 1)
		goto invalid;
	*out = (int64_t)d;
	return 0;
invalid:
	snprintf(why, whylen, "time: invalid duration \"%s\"", s0);
	return -EINVAL;
}

/* Formats ns as Go's Duration.String would for whole units ("1h0m0s" is
 * written "1h" here: only used in messages). */
void config_format_duration(int64_t ns, char *buf, size_t len)
{
	if (ns % 1000000000 == 0)
		snprintf(buf, len, "%llds", (long long)(ns / 1000000000));
	else if (ns % 1000000 == 0)
		snprintf(buf, len, "%lldms", (long long)(ns / 1000000));
	else
		snprintf(buf, len, "%lldns", (long long)ns);
}

/* ---- URLs (etcd's types.NewURLs over Go's url.Parse) ---- */

/* Parses one URL. On failure writes etcd's message to why. */
int config_parse_url(const char *in, struct config_url *u, char *why, size_t whylen)
{
	const char *s = in;
	size_t len;
	memset(u, 0, sizeof(*u));

	/* strings.TrimSpace */
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\v' || *s == '\f')
		s++;
	len = strlen(s);
	while (len > 0 && strchr(" \t\n\r\v\f", s[len - 1]))
		len--;

	/* scheme: letter, then letters, digits, '+', '-', '.' up to ':' */
	size_t i = 0;
	if (len > 0 && ((s[0] | 0x20) >= 'a' && (s[0] | 0x20) <= 'z')) {
		i = 1;
		while (i < len && (((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z') ||
				   (s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '-' ||
				   s[i] == '.'))
			i++;
	}
	char scheme[sizeof(u->scheme)] = "";
	if (i > 0 && i < len && s[i] == ':' && i < sizeof(scheme)) {
		for (size_t k = 0; k < i; k++)
			scheme[k] = (char)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] + 32 : s[k]);
		scheme[i] = '\0';
	} else {
		i = 0;
	}
	if (strcmp(scheme, "http") && strcmp(scheme, "https") && strcmp(scheme, "unix") &&
	    strcmp(scheme, "unixs")) {
		snprintf(why, whylen, "URL scheme must be http, https, unix, or unixs: %.*s",
			 (int)len, s);
		return -EINVAL;
	}
	const char *rest = s + i + 1;
	size_t rlen = len - i - 1;
	const char *auth = "";
	size_t alen = 0;
	if (rlen >= 2 && rest[0] == '/' && rest[1] == '/') {
		auth = rest + 2;
		alen = strcspn(auth, "/?#");
		if (alen > rlen - 2)
			alen = rlen - 2;
		rest = auth + alen;
		rlen = rlen - 2 - alen;
	}
	if (memchr(auth, '@', alen)) {
		snprintf(why, whylen, "URL must not contain user information: %.*s", (int)len, s);
		return -EINVAL;
	}
	/* net.SplitHostPort */
	const char *host = auth, *port = NULL;
	size_t hlen = 0, plen = 0;
	bool ok = false;
	if (alen > 0 && auth[0] == '[') {
		const char *close = memchr(auth, ']', alen);
		if (close && (size_t)(close - auth) + 1 < alen && close[1] == ':') {
			host = auth + 1;
			hlen = (size_t)(close - auth) - 1;
			port = close + 2;
			plen = alen - (size_t)(port - auth);
			ok = !memchr(port, ':', plen) && !memchr(port, '[', plen) &&
			     !memchr(port, ']', plen);
		}
	} else if (alen > 0) {
		const char *colon = NULL;
		for (size_t k = 0; k < alen; k++)
			if (auth[k] == ':')
				colon = auth + k;
		if (colon) {
			hlen = (size_t)(colon - auth);
			port = colon + 1;
			plen = alen - hlen - 1;
			ok = !memchr(auth, ':', hlen) && !memchr(auth, '[', hlen) &&
			     !memchr(auth, ']', alen);
		}
	}
	if (!ok) {
		snprintf(why, whylen, "URL address does not have the form \"host:port\": %.*s",
			 (int)len, s);
		return -EINVAL;
	}
	if (rlen > 0) {
		snprintf(why, whylen, "URL must not contain a path: %.*s", (int)len, s);
		return -EINVAL;
	}
	snprintf(u->scheme, sizeof(u->scheme), "%s", scheme);
	u->host = strndup(host, hlen);
	u->port = strndup(port, plen);
	if (u->host && u->port &&
	    asprintf(&u->text, "%s://%.*s", scheme, (int)alen, auth) < 0)
		u->text = NULL;
	if (!u->host || !u->port || !u->text) {
		config_url_free(u);
		memset(u, 0, sizeof(*u));
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* A comma-separated URL list into a sorted list without repeats. */
int config_parse_urls(const char *s, struct config_urls *out, char *why, size_t whylen)
{
	struct config_strings parts;
	struct config_urls res = { 0 };
	int rc = config_split(s, false, &parts);
	if (rc) {
		snprintf(why, whylen, "out of memory");
		return rc;
	}
	res.v = calloc(parts.count, sizeof(*res.v));
	if (!res.v) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto out_free_parts;
	}
	for (size_t i = 0; i < parts.count; i++) {
		rc = config_parse_url(parts.v[i], &res.v[res.count], why, whylen);
		if (rc)
			goto out_free_res;
		res.count++;
	}
	qsort(res.v, res.count, sizeof(*res.v), config_url_cmp);
	size_t w = res.count ? 1 : 0;
	for (size_t r = 1; r < res.count; r++) {
		if (strcmp(res.v[r].text, res.v[w - 1].text) == 0)
			config_url_free(&res.v[r]);
		else
			res.v[w++] = res.v[r];
	}
	res.count = w;
	config_strings_free(&parts);
	*out = res;
	return 0;

out_free_res:
	config_urls_free(&res);
out_free_parts:
	config_strings_free(&parts);
	return rc;
}

/* Text of a URL list, comma-joined. */
void config_urls_text(const struct config_urls *us, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < us->count && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", us->v[i].text);
}
