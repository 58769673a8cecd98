/*
 * etcd 3.4's HTTP/JSON gateway (grpc-gateway) on the client port: POST
 * /v3/<service>/<method> (and /v3beta/...) with a JSON body, answered with
 * JSON, for every service etcd's gateway routes (KV, Watch, Lease,
 * Cluster, Maintenance, Auth, Lock, Election).
 *
 * As in etcd, the gateway is a gRPC client of this very server over one
 * HTTP/2 connection: each request becomes a gRPC call on its own stream
 * of that connection, answered by the same handlers as any client's
 * (gatewayd/services/). Here the connection never leaves the process: an
 * nghttp2 client session's bytes go straight into the server's h2_conn
 * and back (jsongw_turn pumps them), so a call costs HPACK and framing,
 * no socket. Because all the gateway's calls share that one connection,
 * they share its SETTINGS_MAX_CONCURRENT_STREAMS (--max-concurrent-streams)
 * too: past it, new calls wait in the client until a stream ends, as
 * grpc-go's client waits for stream quota (etcd's
 * TestV3Curl_MaxStreams_* observe exactly that).
 *
 * Requests come from HTTP/1.1 connections (http1.h's gateway hook), over
 * TLS or not (TLS clients that offer both get http/1.1 from ALPN).
 * Answers follow grpc-gateway 1.6 as etcd 3.4 uses it (JSONPb with
 * OrigName, proto/json.h): a unary call's message, or its error as
 * {"error","message","code"} with the HTTP status of its gRPC code; a
 * stream's messages as chunks of {"result":...} lines, an error as a
 * final {"error":{...}} chunk. A request body of a streaming call (Watch,
 * LeaseKeepAlive) is a stream of JSON requests.
 *
 * Single-threaded, on the loop's thread; memory from libc.
 */
#ifndef CETCD_GATEWAYD_JSONGW_H
#define CETCD_GATEWAYD_JSONGW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gatewayd/transport/http1.h"

struct gw_server;
struct grpc_call;
struct jsongw;

/* The gateway of s, its loopback connection to s's gRPC server open.
 * Returns 0 or -ENOMEM. */
int jsongw_new(struct gw_server *s, struct jsongw **out);

/* Cancels its calls and frees it (before s's gRPC server). */
void jsongw_free(struct jsongw *g);

/* http1_ops.gateway for the connection owner (a gw_conn of server.c):
 * 1 with *now to answer at once, 0 when the answer comes later, -ENOMEM. */
int jsongw_http1(struct jsongw *g, void *owner, struct http1_conn *h1,
		 const struct http1_gw_req *r, struct http1_gw_answer *now);

/* h1's connection is gone: its request is cancelled. */
void jsongw_http1_drop(struct jsongw *g, struct http1_conn *h1);

/* Some of h1's output was written: a stream held back while its client
 * read slowly may take more. Returns true when the gateway has work for
 * jsongw_turn (a window to give back). */
bool jsongw_http1_drained(struct jsongw *g, struct http1_conn *h1);

/* Moves bytes between the gateway's client and the server, and hands
 * answers to their HTTP connections. Called after a turn's events (new
 * requests reach their handlers in the same turn) and before its flush
 * (answers go out with it). Returns true when it handed the server
 * requests, whose handlers may have staged work for the next turn. */
bool jsongw_turn(struct jsongw *g);

#endif
