/*
 * Fuzz target: arbitrary bytes from a client into a gRPC server
 * connection (gatewayd/transport/h2.c + gatewayd/transport/grpc.c), as the event loop would
 * feed them, with handlers of every kind answering at once, later or
 * never. The input is the client's byte stream; when it does not start
 * with the HTTP/2 client preface, the preface is sent first so that the
 * fuzzer spends its time on frames.
 *
 * Checked besides the sanitizers: every call is released and every
 * allocation freed when the connection and the server are freed.
 * Seeds: tests/fuzz/corpus/h2/ (conversations recorded by test_grpc with
 * CETCD_H2_CORPUS_DIR set, and malformed ones).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/h2_client.h"

static const uint8_t fz_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define FZ_PREFACE_LEN (sizeof(fz_preface) - 1)

static struct {
	struct grpc_server *srv;
	uint64_t held[64];
	int nheld;
	int64_t now;
} fz;

static int64_t fz_clock(void *arg)
{
	(void)arg;
	return fz.now;
}

static void fz_echo_message(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	(void)grpc_call_send(call, msg, len);
}

static void fz_finish_ok(struct grpc_call *call)
{
	(void)grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

static void fz_hold(struct grpc_call *call)
{
	if (fz.nheld < 64)
		fz.held[fz.nheld++] = grpc_call_id(call);
	size_t len;
	(void)grpc_call_metadata(call, "token", &len);
}

static void fz_refuse(struct grpc_call *call)
{
	(void)grpc_call_finish(call, GRPC_STATUS_PERMISSION_DENIED,
			       "etcdserver: permission denied \xe2\x9c\x97 100%");
}

static void fz_big(struct grpc_call *call)
{
	uint8_t *p = grpc_call_send_reserve(call, 100000);
	if (p)
		memset(p, 'x', 100000);
	(void)grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

static void fz_cancel(struct grpc_call *call, enum grpc_cancel_reason why)
{
	(void)why;
	if (grpc_call_send(call, "x", 1) != -ECANCELED)
		abort();
}

static const struct grpc_handler fz_echo = {
	.on_message = fz_echo_message, .on_half_close = fz_finish_ok, .on_cancel = fz_cancel
};
static const struct grpc_handler fz_async = { .on_call_start = fz_hold, .on_cancel = fz_cancel };
static const struct grpc_handler fz_deny = { .on_call_start = fz_refuse, .on_cancel = fz_cancel };
static const struct grpc_handler fz_large = { .on_half_close = fz_big, .on_cancel = fz_cancel };

/* Answers the held calls that are still alive; some with a message. */
static void fz_answer(bool all)
{
	int keep = 0;
	for (int i = 0; i < fz.nheld; i++) {
		if (!all && (i & 1)) {
			fz.held[keep++] = fz.held[i];
			continue;
		}
		struct grpc_call *call = grpc_call_find(fz.srv, fz.held[i]);
		if (!call)
			continue;
		if (i % 3 == 0)
			(void)grpc_call_send(call, "reply", 5);
		(void)grpc_call_finish(call, i % 3 == 2 ? GRPC_STATUS_NOT_FOUND : GRPC_STATUS_OK,
				       "done");
	}
	fz.nheld = keep;
}

/* Chunk sizes the input is fed in, cycling. */
static const size_t fz_chunks[] = { 1, 13, 4096, 200, 9, 65536 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tc_mem mem;
	struct tc_transport tt;
	struct grpc_server_config cfg;
	struct h2_conn *conn = NULL;

	tc_mem_init(&mem);
	memset(&fz, 0, sizeof(fz));
	fz.now = 1;
	grpc_server_config_default(&cfg, 1024);
	cfg.max_recv_message_bytes = 8192;
	cfg.max_conn_buffered_bytes = 20000;
	cfg.h2.mem = &mem.mem;
	cfg.h2.max_concurrent_streams = 8;
	cfg.h2.max_header_list_bytes = 4096;
	cfg.now_ns = fz_clock;
	cfg.call_pool_keep = 4;
	if (grpc_server_new(&cfg, &fz.srv) < 0)
		abort();
	if (grpc_server_handle(fz.srv, "/etcdserverpb.KV/Range", &fz_echo, NULL) < 0 ||
	    grpc_server_handle(fz.srv, "/etcdserverpb.Watch/Watch", &fz_echo, NULL) < 0 ||
	    grpc_server_handle(fz.srv, "/etcdserverpb.KV/Put", &fz_async, NULL) < 0 ||
	    grpc_server_handle(fz.srv, "/etcdserverpb.Auth/Authenticate", &fz_deny, NULL) < 0 ||
	    grpc_server_handle(fz.srv, "/etcdserverpb.Maintenance/Snapshot", &fz_large, NULL) < 0 ||
	    grpc_server_conn_new(fz.srv, &conn) < 0)
		abort();
	tc_transport_init(&tt);
	tt.round_limit = 3000; /* partial writes: the backlog path runs too */

	bool ok = true;
	if (size < FZ_PREFACE_LEN || memcmp(data, fz_preface, FZ_PREFACE_LEN) != 0)
		ok = h2_conn_recv(conn, fz_preface, FZ_PREFACE_LEN) == 0;
	size_t off = 0;
	for (unsigned i = 0; ok && off < size; i++) {
		size_t n = fz_chunks[i % (sizeof(fz_chunks) / sizeof(fz_chunks[0]))];
		n = n < size - off ? n : size - off;
		ok = h2_conn_recv(conn, data + off, n) == 0;
		off += n;
		tt.len = tt.round_taken = 0; /* the client read everything */
		int rc = h2_conn_flush(conn, &tt.t);
		ok = ok && (rc == 0 || rc == -EAGAIN);
		fz_answer(false);
		fz.now += 10000000;
		grpc_server_expire(fz.srv);
	}
	if (ok) {
		fz_answer(true);
		h2_conn_shutdown(conn);
		h2_conn_shutdown(conn);
		for (int i = 0; i < 100 && h2_conn_want_write(conn); i++) {
			tt.len = tt.round_taken = 0;
			if (h2_conn_flush(conn, &tt.t) != -EAGAIN)
				break;
		}
	}
	grpc_server_conn_free(conn);
	if (grpc_server_call_count(fz.srv) != 0)
		abort();
	grpc_server_free(fz.srv);
	tc_transport_fini(&tt);
	if (mem.live != 0)
		abort();
	return 0;
}
