/* TLS settings from etcd's flags (tls_config.h). */
#include "config/tls_config.h"

#include <errno.h>
#include <stdio.h>

#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "config/config.h"

void config_tls_log_starting(const char *msg, const struct tls_info *info, const struct cetcd_config *c)
{
	char text[2048], suites[1024] = "";

	tls_info_string(info, text, sizeof(text));
	for (size_t i = 0, n = 0; i < c->cipher_suites.count && n < sizeof(suites); i++)
		n += (size_t)snprintf(suites + n, sizeof(suites) - n, "%s%s", i ? "," : "",
				      c->cipher_suites.v[i]);
	log_info(msg, LOG_STR("tls-info", text), LOG_STR("cipher-suites", suites));
}

int config_tls_info(const struct cetcd_config *c, enum tls_side side,
			 struct tls_info *out)
{
	const bool peer = side == TLS_SIDE_PEER;
	const struct config_urls *urls = peer ? &c->listen_peer_urls : &c->listen_client_urls;
	struct tls_info in = {
		.side = side,
		.cert_file = peer ? c->peer_cert_file : c->cert_file,
		.key_file = peer ? c->peer_key_file : c->key_file,
		.trusted_ca_file = peer ? c->peer_trusted_ca_file : c->trusted_ca_file,
		.crl_file = peer ? c->peer_crl_file : c->client_crl_file,
		.allowed_cn = peer ? c->peer_cert_allowed_cn : NULL,
		.allowed_hostname = peer ? c->peer_cert_allowed_hostname :
					   c->client_cert_allowed_hostname,
		.client_cert_auth = peer ? c->peer_client_cert_auth : c->client_cert_auth,
		/* etcd's peer listener checks client SANs; its client
		 * listener does not */
		.check_client_san = peer && !c->experimental_peer_skip_client_san_verification,
		.cipher_suite_count = c->cipher_suites.count,
		.cipher_suites = c->cipher_suites.v,
	};
	const bool autotls = peer ? c->peer_auto_tls : c->auto_tls;
	const char *hosts[64];
	char dir[4096];
	int rc;

	for (size_t i = 0; i < in.cipher_suite_count; i++) {
		const char *name;
		if ((rc = tls_cipher_suite(in.cipher_suites[i], &name)))
			return rc;
	}
	rc = tls_info_copy(out, &in);
	if (rc || !autotls)
		return rc;
	if (!tls_info_is_empty(out)) {
		log_warn(peer ? "ignoring peer auto TLS since certs given" :
				"ignoring client auto TLS since certs given");
		return 0;
	}
	if (urls->count > sizeof(hosts) / sizeof(hosts[0])) {
		rc = errmsg_set(-E2BIG, "tls: too many listen URLs (%zu) for one certificate",
				urls->count);
		goto out_free;
	}
	for (size_t i = 0; i < urls->count; i++)
		hosts[i] = urls->v[i].host;
	if ((size_t)snprintf(dir, sizeof(dir), "%s/fixtures/%s", c->data_dir,
			     peer ? "peer" : "client") >= sizeof(dir)) {
		rc = errmsg_set(-ENAMETOOLONG, "tls: the data dir's path is too long: %s",
				c->data_dir);
		goto out_free;
	}
	rc = tls_self_cert(dir, hosts, urls->count, out);
	if (rc == 0)
		return 0;
out_free:
	tls_info_free(out);
	return rc;
}
