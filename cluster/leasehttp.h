/*
 * POST /leases and POST /leases/internal: how etcd 3.4 members renew a
 * lease and read its remaining time at the leader over the peer URLs
 * (lease/leasehttp). Renewals and remaining times are the leader's alone;
 * a follower asked by a client forwards the call to the leader's peer URL
 * and relays the answer (etcdserver's LeaseRenew and LeaseTimeToLive).
 *
 *   /leases           body: etcdserverpb.LeaseKeepAliveRequest
 *                     200:  etcdserverpb.LeaseKeepAliveResponse
 *   /leases/internal  body: leasepb.LeaseInternalRequest
 *                          { LeaseTimeToLiveRequest = 1 }
 *                     200:  leasepb.LeaseInternalResponse
 *                          { LeaseTimeToLiveResponse = 1 }
 *
 * Both answer "application/protobuf"; an unknown lease is 404 "lease not
 * found", a member whose lessor is not the primary 400 with its error, a
 * leader that did not catch up in time 408, a body that does not decode
 * 400 "error unmarshalling request".
 *
 * The encoders and decoders of both sides are here: the server side is
 * gatewayd's (raftd's peer port hands it the request), the client side
 * raftd's. The decoders read bytes from other members: every length is
 * checked and bad input is an error, never a crash
 * (tests/fuzz/fuzz_leasehttp.c).
 */
#ifndef CETCD_CLUSTER_LEASEHTTP_H
#define CETCD_CLUSTER_LEASEHTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LEASEHTTP_PATH "/leases"
#define LEASEHTTP_INTERNAL_PATH "/leases/internal"

/* etcd's texts (lease.ErrLeaseNotFound, lease.ErrNotPrimary,
 * leasehttp.ErrLeaseHTTPTimeout). */
#define LEASEHTTP_ERR_NOT_FOUND "lease not found"
#define LEASEHTTP_ERR_NOT_PRIMARY "not a primary lessor"
#define LEASEHTTP_ERR_TIMEOUT "waiting for node to catch up its applied index has timed out"
#define LEASEHTTP_ERR_UNMARSHAL "error unmarshalling request"

/* The largest request body read: both requests are a few varints. */
#define LEASEHTTP_MAX_REQUEST 1024u

struct leasehttp_req {
	bool internal;   /* /leases/internal (time to live), else /leases */
	int64_t id;
	bool keys;       /* internal: the lease's keys wanted */
};

/* Encodes r as its path's body into buf (LEASEHTTP_MAX_REQUEST bytes
 * suffice). Returns the length. */
size_t leasehttp_request_encode(const struct leasehttp_req *r, uint8_t *buf);

/* Decodes the body of a request to /leases (internal false) or
 * /leases/internal into *out. 0, or -EBADMSG. */
int leasehttp_request_decode(bool internal, const uint8_t *body, size_t len,
			     struct leasehttp_req *out);

/* The TTL field of a LeaseKeepAliveResponse or LeaseTimeToLiveResponse
 * (field 3 of both; 0 when absent). 0, or -EBADMSG. */
int leasehttp_response_ttl(const uint8_t *resp, size_t len, int64_t *ttl);

/*
 * The client side: the body of a 200 answer to r. Finds the response
 * message (the body itself for /leases, its field 1 for /leases/internal)
 * and checks that it names r->id. 0 with *resp and *resp_len pointing
 * into body; -EBADMSG (not such a message, or no response in it),
 * -ESRCH (another lease's: etcd's "lease: renew id mismatch").
 */
int leasehttp_response_decode(const struct leasehttp_req *r, const uint8_t *body, size_t len,
			      const uint8_t **resp, size_t *resp_len);

/*
 * Writes resp (a response message) with its header (field 1) replaced by
 * hdr (an encoded ResponseHeader, hdr_len bytes) into out, which has room
 * for resp_len + hdr_len + 16 bytes. Returns the length written, or
 * -EBADMSG if resp is not a well-formed message.
 */
long leasehttp_reheader(const uint8_t *resp, size_t resp_len, const uint8_t *hdr, size_t hdr_len,
			uint8_t *out);

#endif
