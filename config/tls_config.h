/*
 * TLS settings from etcd's flags: the tls_info of the peer or the client
 * side (base/tls/tls.h) as the configuration gives it, and the line etcd
 * logs when a side starts with TLS. Kept here, above base/tls/, so that
 * the TLS layer knows nothing of the flag table.
 */
#ifndef CETCD_CONFIG_TLS_CONFIG_H
#define CETCD_CONFIG_TLS_CONFIG_H

#include "base/tls/tls.h"

struct cetcd_config;

/* Logs etcd's start-up line for a TLS side, msg ("starting with peer
 * TLS", "starting with client TLS"), with the info as etcd prints it and
 * --cipher-suites. */
void config_tls_log_starting(const char *msg, const struct tls_info *info, const struct cetcd_config *c);

/* The info of a port from the configuration, as etcd's configurePeer-
 * Listeners (peer) and configureClientListeners (client) make it: the
 * flags of that side and --cipher-suites; with auto TLS and no cert and
 * key given, the self-signed certificate of <data-dir>/fixtures/<side>
 * (made by tls_self_cert for the side's listen URLs' hosts); auto TLS
 * with certificates given is ignored with etcd's warning. Returns 0,
 * -ENOMEM, -EINVAL (an unknown cipher suite), or tls_self_cert's codes. */
int config_tls_info(const struct cetcd_config *c, enum tls_side side,
			 struct tls_info *out);

#endif
