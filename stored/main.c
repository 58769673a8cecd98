/* stored: a member's apply process.
 *
 * It claims the stored role in the member region, opens (or creates)
 * <data-dir>/member/snap/db, and runs the apply loop (stored/loop.h):
 * committed entries from raftd in, the store changed in batches, roots
 * published to readers, results to the gateways, checkpoints. It answers
 * the attach hello of every gatewayd slot on the way. SIGTERM, SIGINT or
 * SIGHUP (config_stop_signals) stops it cleanly: a last checkpoint, whose index is published as durable.
 */
#include "auth/bcrypt.h"
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "auth/token.h"
#include "config/config.h"
#include "base/diskio/diskio.h"
#include "shm/doorbell.h"
#include "shm/hello.h"
#include "base/log/log.h"
#include "cluster/member.h"
#include "shm/region.h"
#include "shm/slot.h"
#include "shm/tokens.h"
#include "stored/loop.h"

/* Set by the signal handler, which also rings the loop's doorbell so that
 * the loop wakes at once rather than at the backstop. */
static volatile sig_atomic_t stored_signal;
static struct shm_doorbell *stored_signal_bell;

static void stored_on_signal(int sig)
{
	int saved = errno;
	stored_signal = sig;
	if (stored_signal_bell)
		shm_doorbell_ring(stored_signal_bell);
	errno = saved;
}

/* Installs the handler for the stop signals, then unblocks them
 * (config_daemon_start blocked them so that none is lost before). */
static void stored_signals(struct shm_region *r)
{
	struct sigaction sa = { .sa_handler = stored_on_signal };
	sigset_t set;

	stored_signal_bell = shm_role_doorbell(r, SHM_ROLE_STORED);
	sigemptyset(&sa.sa_mask);
	config_stop_signals(&set);
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&set, sig) == 1)
			sigaction(sig, &sa, NULL);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

/* etcd's backend batching onto stored's checkpoints. A checkpoint is
 * stored's durable commit of the db (loop.h), as the commit of etcd's
 * batch txn is bbolt's: --backend-batch-interval bounds the time between
 * them, --backend-batch-limit the entries applied in between (etcd counts
 * the txn's bucket writes; a negative limit commits after each, as etcd's
 * does). Readers see each applied batch at once either way. 0 keeps etcd's
 * defaults (100 ms, 10000, 1000 revisions per compaction batch). */
static void stored_batch_opts(const struct cetcd_config *c, struct stored_loop_opts *o)
{
	int64_t ms = (c->backend_batch_interval_ns + 999999) / 1000000;
	int64_t lim = c->backend_batch_limit, cl = c->experimental_compaction_batch_limit;

	o->checkpoint_ms = ms > UINT32_MAX ? UINT32_MAX : (uint32_t)ms;
	o->checkpoint_entries = lim < 0 ? 1 : lim > UINT32_MAX ? UINT32_MAX : (uint32_t)lim;
	o->compact_step = cl > UINT32_MAX ? UINT32_MAX : (uint32_t)cl;
}

int main(int argc, char **argv)
{
	struct stored_loop_opts o = { 0 };
	struct diskio_fault_opts db_fault;
	bool db_fault_on;
	struct stored_loop *l = NULL;
	struct auth_token_opts *tokens = NULL;
	struct cetcd_config cfg;
	struct shm_region *r;
	int status, rc;

	rc = config_daemon_start(&cfg, CONFIG_PROG_STORED, "stored", argc, argv, &r, &status);
	if (rc)
		return status;
	status = 1;
	if (auth_token_opts_from_config(&cfg, &tokens)) {
		status = CONFIG_EXIT_FATAL;
		goto out_detach;
	}
	o.auth_tokens = tokens;

	/* stopped while raftd had not resolved the ids yet: a clean stop */
	if (member_ids_wait(&cfg, r, &o.member_id, &o.cluster_id)) {
		status = 0;
		goto out_detach;
	}

	if (hello_claim_role(r, SHM_ROLE_STORED))
		goto out_detach;
	/* invariant 13 (docs/invariants.md): a stored that died mid-write
	 * left those token entries unreadable; nothing else writes them */
	size_t torn = shm_tokens_recover(r);
	if (torn)
		log_warn("cleared simple-token entries a stopped stored left mid-write",
			 LOG_U64("entries", torn));
	stored_signals(r);

	/* tests only (diskio.h): a db that fails as the test asks */
	if (diskio_test_fault("db", &db_fault, &db_fault_on)) {
		status = CONFIG_EXIT_FATAL;
		goto out_release;
	}
	if (db_fault_on) {
		o.io_open = diskio_fault_open_arg;
		o.io_open_arg = &db_fault;
	}
	o.data_dir = cfg.data_dir;
	stored_batch_opts(&cfg, &o);
	/* 0 or less warns of every entry, as etcd's does */
	o.warn_apply_ns = cfg.experimental_warning_apply_duration_ns > 0
				  ? cfg.experimental_warning_apply_duration_ns
				  : 1;
	o.lease.min_ttl = lessor_min_ttl(cfg.election_timeout_ms, cfg.heartbeat_interval_ms);
	o.lease.extend_ns = (int64_t)cfg.election_timeout_ms * 1000000;
	o.lease.checkpoint_ns = cfg.lease_checkpoint_interval_ns;
	o.lease.checkpoint = true;
	o.request_timeout_ns = (int64_t)config_request_timeout_ms(&cfg) * 1000000;
	o.bcrypt_cost = bcrypt_cost_or_default(cfg.bcrypt_cost);
	if ((uint64_t)o.bcrypt_cost != cfg.bcrypt_cost)
		log_warn("use default bcrypt cost instead of the invalid given cost",
			 LOG_I64("min-cost", BCRYPT_MIN_COST), LOG_I64("max-cost", BCRYPT_MAX_COST),
			 LOG_I64("default-cost", BCRYPT_DEFAULT_COST),
			 LOG_U64("given-cost", cfg.bcrypt_cost));
	rc = stored_loop_open(r, &o, &l);
	if (rc)
		goto out_release;
	config_daemon_ready();
	rc = stored_loop_run(l, &stored_signal);
	config_daemon_stopping();
	if (rc)
		goto out_free;
	log_info("stopping", LOG_STR("signal", strsignal(stored_signal)));
	if (stored_loop_checkpoint(l) == 0)
		status = 0;

out_free:
	stored_loop_free(l);
out_release:
	shm_role_release(r, SHM_ROLE_STORED);
out_detach:
	shm_region_detach(r);
	auth_token_opts_free(tokens);
	config_free(&cfg);
	return status;
}
