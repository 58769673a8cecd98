/* stored: a member's apply process.
 *
 * For now a skeleton: it claims the stored role in the member region and
 * answers the attach hello of every gatewayd slot, sleeping on its doorbell
 * in between. SIGTERM or SIGINT stops it cleanly.
 */
#include <string.h>

#include "shm/hello.h"
#include "shm/config.h"
#include "shm/log.h"
#include "shm/region.h"
#include "shm/slot.h"

int main(int argc, char **argv)
{
	struct cetcd_config cfg;
	struct shm_region *r;
	int status, rc, sig;

	rc = config_daemon_start(&cfg, CONFIG_PROG_STORED, "stored", argc, argv, &r, &status);
	if (rc)
		return status;
	status = 1;

	if (hello_claim_role(r, SHM_ROLE_STORED))
		goto out_detach;

	sig = hello_serve_until_signal(r, SHM_ROLE_STORED);
	log_info("stopping", LOG_STR("signal", strsignal(sig)));
	status = 0;
	shm_role_release(r, SHM_ROLE_STORED);
out_detach:
	shm_region_detach(r);
	config_free(&cfg);
	return status;
}
