#include "gatewayd/noleader.h"

#include <string.h>

#include "base/log/log.h"
#include "config/config.h"
#include "gatewayd/server.h"
#include "gatewayd/services/metrics.h"
#include "shm/status.h"

static const char gw_msg_no_leader[] = "etcdserver: no leader";

/* Whether raftd says this member knows no leader. A record that cannot
 * be read (its writer died mid-write) says nothing: the caller keeps
 * the calls. */
static bool gw_no_leader(struct gw_server *s)
{
	struct status_raftd rs;

	return status_raftd_read(s->r, &rs) == 0 && rs.leader_id == 0;
}

static bool gw_method_streams(const char *path)
{
	int i = metrics_grpc_index(path);

	return i >= 0 && strcmp(metrics_methods[i].type, "unary") != 0;
}

static enum grpc_status gw_noleader_admit(void *arg, struct grpc_call *call, const char *path,
					  const char **message)
{
	struct gw_server *s = arg;
	size_t len;
	const uint8_t *v = grpc_call_metadata(call, "hasleader", &len);

	if (!v || len != 4 || memcmp(v, "true", 4) != 0)
		return GRPC_STATUS_OK;
	if (gw_no_leader(s)) {
		*message = gw_msg_no_leader;
		return GRPC_STATUS_UNAVAILABLE;
	}
	if (gw_method_streams(path))
		grpc_call_tag(call);
	return GRPC_STATUS_OK;
}

void gw_noleader_init(struct gw_server *s)
{
	s->noleader_next_ns = INT64_MAX;
	s->noleader_checks = 0;
	grpc_server_set_admit(s->grpc, gw_noleader_admit, s);
}

int64_t gw_noleader_turn(struct gw_server *s)
{
	int64_t period = (int64_t)s->cfg->election_timeout_ms * 1000000;

	if (grpc_server_tagged_count(s->grpc) == 0) {
		s->noleader_next_ns = INT64_MAX;
		s->noleader_checks = 0;
		return INT64_MAX;
	}
	if (s->noleader_next_ns == INT64_MAX)
		s->noleader_next_ns = s->now_ns + period;
	if (s->noleader_next_ns > s->now_ns)
		return s->noleader_next_ns;
	s->noleader_next_ns = s->now_ns + period;
	if (!gw_no_leader(s)) {
		s->noleader_checks = 0;
		return s->noleader_next_ns;
	}
	if (++s->noleader_checks < GW_NOLEADER_CHECKS)
		return s->noleader_next_ns;
	unsigned n = grpc_server_cancel_tagged(s->grpc, GRPC_STATUS_UNAVAILABLE, gw_msg_no_leader);
	log_warn("no leader: cancelled the streams that require one", LOG_U64("streams", n),
		 LOG_U64("checks", s->noleader_checks));
	s->noleader_next_ns = INT64_MAX;
	s->noleader_checks = 0;
	return INT64_MAX;
}
