/* A small gRPC client (see grpcc.h). */
#include "launcher/grpcc.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <nghttp2/nghttp2.h>

#include <protobuf-c/protobuf-c.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "base/sock/gwsock.h"
#include "base/tls/tls.h"
#include "config/config.h"

/* Appends n bytes to a growable buffer, bounded by max. */
static int grpcc_append(uint8_t **p, size_t *len, size_t *cap, const void *d, size_t n, size_t max)
{
	if (n > max - *len)
		return -EPROTO;
	if (*len + n > *cap) {
		size_t ncap = *cap ? *cap : 1024;
		uint8_t *np;
		while (ncap < *len + n)
			ncap *= 2;
		np = realloc(*p, ncap);
		if (!np)
			return -ENOMEM;
		*p = np;
		*cap = ncap;
	}
	memcpy(*p + *len, d, n);
	*len += n;
	return 0;
}

static ssize_t grpcc_send_cb(nghttp2_session *s, const uint8_t *data, size_t len, int flags,
			     void *arg)
{
	struct grpcc_call *c = arg;

	(void)s;
	(void)flags;
	if (grpcc_append(&c->out, &c->out_len, &c->out_cap, data, len, SIZE_MAX / 2))
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	return (ssize_t)len;
}

static int grpcc_header_cb(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
			   size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *arg)
{
	struct grpcc_call *c = arg;
	char v[16];

	(void)s;
	(void)flags;
	if (f->hd.stream_id != c->stream_id)
		return 0;
	if ((nlen == 7 && !memcmp(name, ":status", 7)) ||
	    (nlen == 11 && !memcmp(name, "grpc-status", 11))) {
		int n = 0;
		if (vlen == 0 || vlen >= sizeof(v))
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		for (size_t i = 0; i < vlen; i++) {
			if (value[i] < '0' || value[i] > '9')
				return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
			n = n * 10 + (value[i] - '0');
		}
		if (name[0] == ':')
			c->http_status = n;
		else
			c->grpc_status = n;
	} else if (nlen == 12 && !memcmp(name, "grpc-message", 12)) {
		size_t n = vlen < sizeof(c->message) - 1 ? vlen : sizeof(c->message) - 1;
		memcpy(c->message, value, n);
		c->message[n] = '\0';
	}
	return 0;
}

static int grpcc_data_cb(nghttp2_session *s, uint8_t flags, int32_t stream_id,
			 const uint8_t *data, size_t len, void *arg)
{
	struct grpcc_call *c = arg;

	(void)s;
	(void)flags;
	if (stream_id != c->stream_id)
		return 0;
	if (grpcc_append(&c->body, &c->body_len, &c->body_cap, data, len, GRPCC_MAX_RESPONSE + 5)) {
		c->error = -EPROTO;
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	return 0;
}

static int grpcc_close_cb(nghttp2_session *s, int32_t stream_id, uint32_t error_code, void *arg)
{
	struct grpcc_call *c = arg;

	(void)s;
	if (stream_id == c->stream_id) {
		c->closed = true;
		if (error_code && !c->error)
			c->error = -EPROTO;
	}
	return 0;
}

static ssize_t grpcc_read_req(nghttp2_session *s, int32_t stream_id, uint8_t *buf, size_t len,
			      uint32_t *flags, nghttp2_data_source *src, void *arg)
{
	struct grpcc_call *c = arg;
	size_t n = c->req_len - c->req_off;

	(void)s;
	(void)stream_id;
	(void)src;
	if (n > len)
		n = len;
	memcpy(buf, c->req + c->req_off, n);
	c->req_off += n;
	if (c->req_off == c->req_len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

#define GRPCC_NV(n, v)                                                                    \
	{ (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE }

int grpcc_call_begin(struct grpcc_call *c, const char *authority, const char *path,
		     const void *msg, size_t len)
{
	nghttp2_session_callbacks *cbs;
	nghttp2_data_provider dp = { .read_callback = grpcc_read_req };
	const nghttp2_nv nv[] = {
		GRPCC_NV(":method", "POST"),
		GRPCC_NV(":scheme", "http"),
		GRPCC_NV(":path", path),
		GRPCC_NV(":authority", authority),
		GRPCC_NV("content-type", "application/grpc"),
		GRPCC_NV("te", "trailers"),
	};
	int rc;

	memset(c, 0, sizeof(*c));
	c->grpc_status = -1;
	if (len > UINT32_MAX || !(c->req = malloc(len + 5)))
		return -ENOMEM;
	c->req[0] = 0;
	c->req[1] = (uint8_t)(len >> 24);
	c->req[2] = (uint8_t)(len >> 16);
	c->req[3] = (uint8_t)(len >> 8);
	c->req[4] = (uint8_t)len;
	if (len)
		memcpy(c->req + 5, msg, len);
	c->req_len = len + 5;
	if (nghttp2_session_callbacks_new(&cbs)) {
		free(c->req);
		return -ENOMEM;
	}
	nghttp2_session_callbacks_set_send_callback(cbs, grpcc_send_cb);
	nghttp2_session_callbacks_set_on_header_callback(cbs, grpcc_header_cb);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, grpcc_data_cb);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, grpcc_close_cb);
	rc = nghttp2_session_client_new(&c->sess, cbs, c);
	nghttp2_session_callbacks_del(cbs);
	if (rc) {
		free(c->req);
		return -ENOMEM;
	}
	rc = nghttp2_submit_settings(c->sess, NGHTTP2_FLAG_NONE, NULL, 0);
	if (!rc)
		c->stream_id = nghttp2_submit_request(c->sess, NULL, nv, sizeof(nv) / sizeof(nv[0]),
						      &dp, c);
	if (rc || c->stream_id < 0) {
		grpcc_call_end(c);
		return -ENOMEM;
	}
	return 0;
}

int grpcc_call_send(struct grpcc_call *c)
{
	if (nghttp2_session_send(c->sess)) {
		c->closed = true;
		return c->error = -EPROTO;
	}
	return 0;
}

void grpcc_call_sent(struct grpcc_call *c, size_t n)
{
	memmove(c->out, c->out + n, c->out_len - n);
	c->out_len -= n;
}

int grpcc_call_recv(struct grpcc_call *c, const uint8_t *data, size_t len)
{
	ssize_t n = nghttp2_session_mem_recv(c->sess, data, len);

	if (n < 0 || (size_t)n != len || c->error) {
		c->closed = true;
		return c->error = -EPROTO;
	}
	return 0;
}

int grpcc_message(const uint8_t *data, size_t len, const uint8_t **msg, size_t *mlen)
{
	uint32_t n;

	if (len < 5 || data[0] != 0)
		return -EPROTO;
	n = (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 8 | data[4];
	if (n != len - 5 || n > GRPCC_MAX_RESPONSE)
		return -EPROTO;
	*msg = data + 5;
	*mlen = n;
	return 0;
}

int grpcc_call_result(struct grpcc_call *c, const uint8_t **msg, size_t *len)
{
	if (c->error || c->http_status != 200 || c->grpc_status < 0)
		return -EPROTO;
	if (c->grpc_status > 0)
		return c->grpc_status;
	return grpcc_message(c->body, c->body_len, msg, len);
}

void grpcc_call_end(struct grpcc_call *c)
{
	nghttp2_session_del(c->sess);
	free(c->req);
	free(c->body);
	free(c->out);
	memset(c, 0, sizeof(*c));
}

/* ---- over a socket ---- */

/* Writes what c->out holds, or as much as the socket takes now. */
static int grpcc_write(int fd, struct tls_conn *tls, struct grpcc_call *c, bool *blocked)
{
	*blocked = false;
	while (c->out_len) {
		ssize_t n = tls ? tls_conn_write(tls, c->out, c->out_len) :
				  send(fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (!tls && n < 0)
			n = errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
		if (n == -EAGAIN) {
			*blocked = true;
			return 0;
		}
		if (n <= 0)
			return n ? (int)n : -EPIPE;
		grpcc_call_sent(c, (size_t)n);
	}
	return 0;
}

/* Reads what the socket has and feeds it to the call. */
static int grpcc_read(int fd, struct tls_conn *tls, struct grpcc_call *c)
{
	uint8_t buf[16384];

	while (!c->closed) {
		ssize_t n = tls ? tls_conn_read(tls, buf, sizeof(buf)) :
				  recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (!tls && n < 0)
			n = errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
		if (n == -EAGAIN)
			return 0;
		if (n <= 0) {
			c->closed = true;
			return c->error = n ? (int)n : -ECONNRESET;
		}
		if (grpcc_call_recv(c, buf, (size_t)n))
			return -EPROTO;
	}
	return 0;
}

int grpcc_unary(int fd, struct tls_conn *tls, const char *authority, const char *path,
		const void *msg, size_t len, int timeout_ms, uint8_t **resp, size_t *resp_len,
		char *status_text, size_t cap)
{
	int64_t deadline = clock_now_ms() + timeout_ms;
	struct grpcc_call c;
	const uint8_t *m;
	size_t mlen;
	bool blocked;
	int rc = grpcc_call_begin(&c, authority, path, msg, len);

	if (rc)
		return rc;
	while (!c.closed) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = deadline - clock_now_ms();
		if ((rc = grpcc_call_send(&c)) || (rc = grpcc_write(fd, tls, &c, &blocked)))
			goto out_end;
		if (blocked || (tls && (tls_conn_want(tls) & TLS_WANT_WRITE)))
			pfd.events |= POLLOUT;
		if (left <= 0) {
			rc = -ETIMEDOUT;
			goto out_end;
		}
		if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR) {
			rc = -errno;
			goto out_end;
		}
		if ((pfd.revents & (POLLIN | POLLHUP | POLLERR)) && (rc = grpcc_read(fd, tls, &c)))
			goto out_end;
	}
	rc = grpcc_call_result(&c, &m, &mlen);
	if (rc > 0)
		snprintf(status_text, cap, "%s", c.message);
	if (rc == 0) {
		*resp = malloc(mlen ? mlen : 1);
		if (!*resp) {
			rc = -ENOMEM;
			goto out_end;
		}
		memcpy(*resp, m, mlen);
		*resp_len = mlen;
	}
out_end:
	grpcc_call_end(&c);
	return rc;
}

int grpcc_member_unary(const struct cetcd_config *cfg, const char *path,
		       const struct ProtobufCMessage *req, int timeout_ms, uint8_t **resp,
		       size_t *resp_len, char *status_text, size_t cap)
{
	uint8_t buf[64];
	uint32_t gws = cfg->gateways ? cfg->gateways : 1;
	int rc = -ECONNREFUSED;

	if (protobuf_c_message_get_packed_size(req) > sizeof(buf))
		return -EMSGSIZE;
	size_t n = protobuf_c_message_pack(req, buf);
	for (uint32_t i = 0; i < gws && rc < 0 && rc != -ETIMEDOUT; i++) {
		struct gwsock_addr a;
		int fd;
		if (gwsock_addr_of(cfg->data_dir, i, &a) || gwsock_connect(&a, &fd))
			continue;
		rc = grpcc_unary(fd, NULL, "localhost", path, buf, n, timeout_ms, resp, resp_len,
				 status_text, cap);
		close(fd);
	}
	return rc;
}
