/* --discovery-srv: the initial cluster from DNS SRV records, as etcd 3.4's
 * pkg/srv GetCluster and embed's GetDNSClusterNames make it (see
 * config_int.h). */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "config/config_int.h"
#include "base/log/log.h"

#define SRV_MAX 64

_Static_assert(sizeof(((struct srv_rr *)0)->target) == NS_MAXDNAME, "a target holds any name");

int config_srv_parse(const unsigned char *ans, int n, struct srv_rr *out, size_t max,
		     char *why, size_t wlen)
{
	ns_msg msg;
	ns_rr rr;
	int count = 0;

	if (ns_initparse(ans, n, &msg) < 0) {
		snprintf(why, wlen, "cannot parse the answer");
		return -1;
	}
	for (int i = 0; i < ns_msg_count(msg, ns_s_an) && (size_t)count < max; i++) {
		if (ns_parserr(&msg, ns_s_an, i, &rr) < 0 || ns_rr_type(rr) != ns_t_srv ||
		    ns_rr_rdlen(rr) < 7)
			continue;
		const unsigned char *rd = ns_rr_rdata(rr);
		out[count].port = ns_get16(rd + 4);
		if (dn_expand(ns_msg_base(msg), ns_msg_end(msg), rd + 6, out[count].target,
			      sizeof(out[count].target)) < 0)
			continue;
		count++;
	}
	return count;
}

/* The SRV records of name (_service._tcp.domain): their count, or -1
 * (err says why, as etcd's lookup error does). */
static int srv_lookup(const char *name, struct srv_rr *out, size_t max, char *why, size_t wlen)
{
	unsigned char ans[8192];
	struct __res_state st;
	char bad[64];
	int n, count;

	memset(&st, 0, sizeof(st));
	if (res_ninit(&st) != 0) {
		snprintf(why, wlen, "cannot read the resolver's configuration");
		return -1;
	}
	n = res_nquery(&st, name, ns_c_in, ns_t_srv, ans, sizeof(ans));
	res_nclose(&st);
	if (n < 0) {
		snprintf(why, wlen, "lookup %.200s: no such host", name);
		return -1;
	}
	count = config_srv_parse(ans, n, out, max, bad, sizeof(bad));
	if (count < 0)
		snprintf(why, wlen, "lookup %.200s: %s", name, bad);
	else if (count == 0)
		snprintf(why, wlen, "lookup %.200s: no such host", name);
	return count > 0 ? count : -1;
}

/* host:port resolved as Go's net.ResolveTCPAddr does (the first IPv4
 * address, else the first IPv6 one), as text "ip:port"; -1 when it does
 * not resolve. */
static int srv_resolve(const char *host, const char *port, char *out, size_t len)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *a,
			*pick = NULL;
	char ip[INET6_ADDRSTRLEN];

	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	for (a = res; a && !pick; a = a->ai_next)
		if (a->ai_family == AF_INET)
			pick = a;
	for (a = res; a && !pick; a = a->ai_next)
		if (a->ai_family == AF_INET6)
			pick = a;
	if (!pick ||
	    !inet_ntop(pick->ai_family,
		       pick->ai_family == AF_INET
			       ? (void *)&((struct sockaddr_in *)pick->ai_addr)->sin_addr
			       : (void *)&((struct sockaddr_in6 *)pick->ai_addr)->sin6_addr,
		       ip, sizeof(ip))) {
		freeaddrinfo(res);
		return -1;
	}
	snprintf(out, len, pick->ai_family == AF_INET6 ? "[%s]:%s" : "%s:%s", ip, port);
	freeaddrinfo(res);
	return 0;
}

/* etcd's GetCluster for one service: an entry "name=scheme://target:port"
 * per record whose target resolves; the record that resolves to one of
 * the member's advertised peer URLs is named after the member (a scheme
 * other than that URL's is an error), the others 0, 1, ... Appends to
 * *list (comma-separated, malloc'd). 0, or -1 with why. */
static int srv_cluster(const struct cetcd_config *c, const char *scheme, const char *service,
		       char **list, char *why, size_t wlen)
{
	struct srv_rr *rrs = calloc(SRV_MAX, sizeof(*rrs));
	char name[NS_MAXDNAME + 64], addr[128], mine[128], port[8], entry[NS_MAXDNAME + 160];
	int n, temp = 0, found = 0;

	if (!rrs) {
		snprintf(why, wlen, "out of memory");
		return -1;
	}
	snprintf(name, sizeof(name), "_%s._tcp.%s", service, c->discovery_srv);
	n = srv_lookup(name, rrs, SRV_MAX, why, wlen);
	for (int i = 0; i < n; i++) {
		const struct config_url *me = NULL;
		size_t tl = strlen(rrs[i].target);
		if (tl && rrs[i].target[tl - 1] == '.')
			rrs[i].target[tl - 1] = '\0'; /* the URL takes no trailing dot */
		snprintf(port, sizeof(port), "%u", rrs[i].port);
		if (srv_resolve(rrs[i].target, port, addr, sizeof(addr))) {
			snprintf(why, wlen, "lookup %s: no such host", rrs[i].target);
			continue;
		}
		for (size_t j = 0; j < c->initial_advertise_peer_urls.count && !me; j++) {
			const struct config_url *u = &c->initial_advertise_peer_urls.v[j];
			if (srv_resolve(u->host, u->port, mine, sizeof(mine)) == 0 &&
			    strcmp(mine, addr) == 0)
				me = u;
		}
		if (me && strcmp(me->scheme, scheme) != 0) {
			snprintf(why, wlen,
				 "bootstrap at %s://%s:%s from DNS for %s has scheme mismatch with expected peer %s",
				 scheme, rrs[i].target, port, service, me->text);
			continue;
		}
		char tmp[16];
		snprintf(tmp, sizeof(tmp), "%d", temp);
		if (!me)
			temp++;
		snprintf(entry, sizeof(entry), "%s=%s://%s%s%s:%s", me ? c->name : tmp, scheme,
			 strchr(rrs[i].target, ':') ? "[" : "", rrs[i].target,
			 strchr(rrs[i].target, ':') ? "]" : "", port);
		log_info("got bootstrap from DNS for etcd-server", LOG_STR("node", entry));
		char *s;
		if (asprintf(&s, "%s%s%s", *list, **list ? "," : "", entry) < 0) {
			free(rrs);
			snprintf(why, wlen, "out of memory");
			return -1;
		}
		free(*list);
		*list = s;
		found++;
	}
	free(rrs);
	return found ? 0 : -1;
}

int config_srv_cluster(struct cetcd_config *c, struct config_error *err)
{
	char service[300], why_ssl[512] = "", why[512] = "";
	const char *sfx = c->discovery_srv_name[0] ? "-" : "";
	char *list = strdup("");
	int ssl, plain;

	if (!list) {
		config_errorf(err, 1, "out of memory");
		return -ENOMEM;
	}
	snprintf(service, sizeof(service), "etcd-server-ssl%s%s", sfx, c->discovery_srv_name);
	ssl = srv_cluster(c, "https", service, &list, why_ssl, sizeof(why_ssl));
	snprintf(service, sizeof(service), "etcd-server%s%s", sfx, c->discovery_srv_name);
	plain = srv_cluster(c, "http", service, &list, why, sizeof(why));
	if (ssl && plain) {
		free(list);
		config_errorf(err, 1, "error querying DNS SRV records for _etcd-server-ssl%s%s %s",
			      sfx, c->discovery_srv_name, why_ssl);
		return -EINVAL;
	}
	free(c->initial_cluster);
	c->initial_cluster = list;
	/* only a member of the discovered cluster may bootstrap from it */
	size_t nl = strlen(c->name);
	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (strncmp(p, c->name, nl) == 0 && p[nl] == '=')
			return 0;
	config_errorf(err, 1, "cannot find local etcd member \"%s\" in SRV records", c->name);
	return -EINVAL;
}
