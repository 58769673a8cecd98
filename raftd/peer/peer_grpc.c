/*
 * The client API on the peer port. etcd 3.4 serves its whole gRPC API on
 * its peer listeners too (embed's servePeers splits HTTP/2 from rafthttp's
 * HTTP/1.1 with cmux), and answers GET /members/hashkv there for the
 * corruption checks of other members. In cetcd the API is gatewayd's, so
 * the peer transport hands such a connection over: once the TLS
 * handshake is done (when the peer URLs are https), a connection whose
 * first bytes are the HTTP/2 client preface, or whose first request is
 * GET /members/hashkv or POST /leases or /leases/internal (etcd's
 * leasehttp: a follower renewing a lease at the leader), is relayed, byte for byte both ways, to a gatewayd
 * over its local socket (base/sock/gwsock.h). The gatewayds are taken in turn;
 * one that does not answer is passed over for the next.
 *
 * A relay is two connections of the transport's loop joined by their
 * `relay` pointers: the peer's (kind SERVER, state RELAY) and the
 * gatewayd's (kind RELAY). What one reads is queued on the other's output
 * and written as the socket takes it; nothing blocks the loop. When
 * either side ends, what is queued for the other is written out and then
 * that one is closed too. HTTP/2's flow control bounds what a side has
 * queued; a side holding more than PEER_RELAY_MAX_QUEUED is broken and
 * the relay is closed.
 *
 * Timeouts, as etcd's peer listener times every connection (rafthttp's
 * ConnReadTimeout and ConnWriteTimeout, 5 s, on each read and write):
 * until the connection is relayed, its first request head (or the
 * preface) must come whole within PEER_IO_TIMEOUT_NS (peer_conn.c); once
 * relayed, the gatewayd, which knows whether a request is in progress,
 * closes a handed connection whose client stays silent that long
 * (gatewayd/server.c), and the relay follows. Here a side whose queued
 * bytes make no progress for PEER_IO_TIMEOUT_NS is closed, and the relay
 * with it: a client that stops reading, or one end of a relay that ended
 * while the other does not take the rest.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "raftd/alloc.h"
#include "raftd/peer/peer_int.h"
#include "base/sock/gwsock.h"
#include "cluster/hashkv.h"
#include "cluster/leasehttp.h"
#include "base/log/log.h"

/* Bytes one side of a relay may have queued and unwritten. */
#define PEER_RELAY_MAX_QUEUED (64u << 20)

static const char peer_h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define PEER_H2_PREFACE_LEN (sizeof(peer_h2_preface) - 1)

int peer_grpc_init(struct peer *p, const char *data_dir, uint32_t gateways)
{
	if (!data_dir || !gateways)
		return 0;
	p->gw_addrs = raftd_calloc(gateways, sizeof(*p->gw_addrs));
	if (!p->gw_addrs)
		return -ENOMEM;
	for (uint32_t i = 0; i < gateways; i++) {
		int rc = gwsock_addr_of(data_dir, i, &p->gw_addrs[i]);
		if (rc) {
			raftd_free(p->gw_addrs);
			p->gw_addrs = NULL;
			return rc;
		}
	}
	p->n_gw = gateways;
	return 0;
}

void peer_grpc_fini(struct peer *p)
{
	raftd_free(p->gw_addrs);
	p->gw_addrs = NULL;
	p->n_gw = 0;
}

/* Connects to the next gatewayd that answers. 0 with *fd, or the error of
 * the last one tried (-ENOENT when there is none). */
static int peer_grpc_dial(struct peer *p, int *fd)
{
	int rc = -ENOENT;

	for (uint32_t k = 0; k < p->n_gw; k++) {
		uint32_t i = (p->gw_next + k) % p->n_gw;
		rc = gwsock_connect(&p->gw_addrs[i], fd);
		if (rc == 0) {
			p->gw_next = (i + 1) % p->n_gw;
			return 0;
		}
	}
	return rc;
}

/* Starts relaying c: its unread bytes (c->in) go first. On failure c is
 * closed. */
static void peer_grpc_relay(struct peer_conn *c, const char *what)
{
	struct peer *p = c->p;
	struct peer_conn *g;
	int fd, rc = peer_grpc_dial(p, &fd);

	if (rc) {
		/* out of descriptors: accepting more would only fail the
		 * same way; otherwise (the gateways' queues are full, none
		 * runs) a warning a connection would flood the log */
		if (accept_backoff_exhausted(rc))
			peer_accept_pause(p, rc, "cannot hand a peer-port connection to a gateway for now; closing it");
		else
			accept_backoff_warn(&p->relay_warn, clock_now_ns(), rc,
					    "cannot hand a peer-port connection to a gateway; closing it",
					    p->n_conns);
		peer_conn_close(c);
		return;
	}
	g = peer_conn_new(p, fd, PEER_CONN_RELAY);
	if (!g) {
		close(fd);
		log_warn("cannot relay a peer-port connection: out of memory",
			 LOG_STR("remote-addr", c->addr));
		peer_conn_close(c);
		return;
	}
	snprintf(g->addr, sizeof(g->addr), "gateway");
	g->state = c->state = PEER_ST_RELAY;
	g->deadline_ns = c->deadline_ns = 0;
	g->relay = c;
	c->relay = g;
	log_debug("relaying a peer-port connection to a gateway",
		  LOG_STR("remote-addr", c->addr), LOG_STR("protocol", what));
	peer_grpc_input(c);
}

int peer_grpc_sniff(struct peer_conn *c)
{
	size_t n = peer_buf_size(&c->in);

	if (!c->p->n_gw)
		return 0;
	if (n > PEER_H2_PREFACE_LEN)
		n = PEER_H2_PREFACE_LEN;
	if (memcmp(peer_buf_data(&c->in), peer_h2_preface, n))
		return 0;
	if (n < PEER_H2_PREFACE_LEN)
		return -EAGAIN;
	peer_grpc_relay(c, "grpc");
	return 1;
}

bool peer_grpc_route(struct peer_conn *c)
{
	const char *what = "hashkv";

	if (!c->p->n_gw)
		return false;
	if (http_str_eq(c->head.path, LEASEHTTP_PATH) ||
	    http_str_eq(c->head.path, LEASEHTTP_INTERNAL_PATH))
		what = "leases";
	else if (!http_str_eq(c->head.path, HASHKV_PATH))
		return false;
	/* the head is still in c->in, unparsed for the gateway */
	memset(&c->head.headers, 0, sizeof(c->head.headers));
	c->head.n_headers = 0;
	peer_grpc_relay(c, what);
	return true;
}

/* Closes c once what it has queued is written out. */
static void peer_grpc_end(struct peer_conn *c)
{
	c->relay = NULL;
	if (!peer_buf_size(&c->out))
		peer_conn_close(c);
	else
		c->close_after = true;
}

void peer_grpc_input(struct peer_conn *c)
{
	struct peer_conn *o = c->relay;
	size_t n = peer_buf_size(&c->in);

	if (!o) {
		peer_buf_consume(&c->in, n); /* the other side is gone */
		return;
	}
	if (n) {
		/* queued bytes have PEER_IO_TIMEOUT_NS to start going out;
		 * each write gives them as long again (peer_conn_flush) */
		if (!peer_buf_size(&o->out))
			o->deadline_ns = clock_now_ns() + PEER_IO_TIMEOUT_NS;
		if (peer_buf_size(&o->out) + n > PEER_RELAY_MAX_QUEUED ||
		    peer_buf_append(&o->out, peer_buf_data(&c->in), n)) {
			log_warn("closed a relayed peer-port connection: its other side does not take its bytes",
				 LOG_STR("local-member-id", c->p->self_str),
				 LOG_STR("remote-addr", c->kind == PEER_CONN_RELAY ? o->addr : c->addr),
				 LOG_U64("queued-bytes", peer_buf_size(&o->out)));
			peer_conn_close(c);
			return;
		}
		peer_buf_consume(&c->in, n);
		if (peer_conn_flush(o))
			return; /* o failed and was closed, and c with it */
	}
	if (c->eof)
		peer_conn_close(c);
}

void peer_grpc_written(struct peer_conn *c)
{
	if (!c->relay && c->close_after && !peer_buf_size(&c->out))
		peer_conn_close(c);
}

void peer_grpc_closed(struct peer_conn *c)
{
	struct peer_conn *o = c->relay;

	if (!o)
		return;
	c->relay = NULL;
	peer_grpc_end(o);
}
