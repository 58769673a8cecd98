/* The auto-compactor (--auto-compaction-mode, --auto-compaction-retention):
 * etcd 3.4's v3compactor, Periodic and Revision. */
#ifndef CETCD_LAUNCHER_COMPACTOR_H
#define CETCD_LAUNCHER_COMPACTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * When to compact and to which revision, apart from any clock or I/O, so
 * that a test drives it with made-up times. Each round: compactor_sample
 * (periodic mode records the store's revision), then, one interval later
 * (compactor_interval_ns), compactor_due says whether to compact and at
 * which revision, and compactor_done takes the outcome.
 *
 * Periodic (retention P, a duration): the revision is sampled every
 * min(P, 1h)/10; the last P/interval + 1 samples are kept, so the oldest
 * is the revision of P ago; the first compaction comes P after the start,
 * the next ones min(P, 1h) after the last success, each at the oldest
 * sample. Revision (retention N): every 5 minutes, the current revision
 * minus N, when above 0 and not what was compacted last. While paused
 * (this member does not lead) nothing is due; periodic mode keeps
 * sampling, so a new leader compacts at once if its last success is old.
 */
struct compactor {
	bool periodic;
	int64_t retention;        /* ns (periodic) or revisions */
	int64_t interval_ns;      /* between rounds */
	int64_t compact_every_ns; /* periodic: min(P, 1h) */
	int64_t base_ns;          /* periodic: P before the first compaction */
	int64_t last_success_ns;  /* periodic: start, then each success */
	int64_t prev;             /* revision: last compacted, 0 for none */
	int64_t *revs;            /* periodic: samples, oldest first */
	size_t nrevs, keep;       /* keep: P/interval + 1 */
};

/* etcd's revision-mode interval. */
#define COMPACTOR_REVISION_INTERVAL_NS (5LL * 60 * 1000000000)

/* Sets c up for a mode ("periodic" or "revision") and retention (config's
 * auto_compaction_retention_value, > 0) at time now_ns. revision_interval_ns
 * is the revision mode's interval (COMPACTOR_REVISION_INTERVAL_NS but in
 * tests). Returns 0, -EINVAL (another mode, a retention <= 0, a periodic
 * retention under 10 ns: no interval), or -ENOMEM. */
int compactor_init(struct compactor *c, const char *mode, int64_t retention, int64_t now_ns,
		   int64_t revision_interval_ns);
void compactor_free(struct compactor *c);

/* Records the store's current revision (periodic mode; nothing else). */
void compactor_sample(struct compactor *c, int64_t rev);

/* After an interval: the revision to compact now, or 0. leading: whether
 * this member leads (otherwise paused). rev: the store's current revision. */
int64_t compactor_due(struct compactor *c, int64_t now_ns, bool leading, int64_t rev);

/* The outcome of compacting at rev (ok: done, or compacted already). */
void compactor_done(struct compactor *c, int64_t now_ns, int64_t rev, bool ok);

/* Set in the environment of the launcher's own program when it is to run
 * as the member's auto-compactor; and the process's name. */
#define COMPACTOR_ENV "CETCD_AUTO_COMPACTOR"
#define COMPACTOR_NAME "auto-compact"

/* For tests only: the revision mode's interval in milliseconds instead of
 * 5 minutes. */
#define COMPACTOR_TEST_INTERVAL_ENV "CETCD_TEST_ONLY_REVISION_COMPACTION_INTERVAL_MS"

/* The auto-compactor's process: compacts while this member leads until a
 * stop signal. The process's exit status. */
int compactor_main(int argc, char **argv);

#endif
