/* raftd: a member's Raft process.
 *
 * For now a skeleton: it claims the raftd role in the member region, takes
 * the peer port and refuses peers plainly (peerstub.h), and answers the
 * attach hello of every gatewayd slot, sleeping on its doorbell in between.
 * SIGTERM or SIGINT stops it cleanly.
 */
#include <string.h>

#include "shm/hello.h"
#include "raftd/peerstub.h"
#include "shm/config.h"
#include "shm/log.h"
#include "shm/region.h"
#include "shm/slot.h"

int main(int argc, char **argv)
{
	struct cetcd_config cfg;
	struct shm_region *r;
	struct peerstub peers;
	int status, rc, sig;

	rc = config_daemon_start(&cfg, CONFIG_PROG_RAFTD, "raftd", argc, argv, &r, &status);
	if (rc)
		return status;
	status = 1;

	if (hello_claim_role(r, SHM_ROLE_RAFTD))
		goto out_detach;

	rc = peerstub_listen(&peers, &cfg.listen_peer_urls);
	if (rc) {
		status = CONFIG_EXIT_FATAL;
		goto out_close_peers;
	}
	rc = peerstub_start(&peers);
	if (rc) {
		log_error("cannot start the peer port thread", LOG_ERRNO(rc));
		goto out_close_peers;
	}

	sig = hello_serve_until_signal(r, SHM_ROLE_RAFTD);
	log_info("stopping", LOG_STR("signal", strsignal(sig)));
	status = 0;

out_close_peers:
	peerstub_stop(&peers);
	shm_role_release(r, SHM_ROLE_RAFTD);
out_detach:
	shm_region_detach(r);
	config_free(&cfg);
	return status;
}
