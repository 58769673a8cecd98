/*
 * ring_bench: the shm rings between two processes pinned to different
 * CPUs, through a real member region (default --max-request-bytes).
 * Prints one line per case:
 *
 *   ring_bench case=stream size=64 records_per_sec=N      (and size=4096)
 *   ring_bench case=pingpong size=64 median_ns=N p99_ns=N (and 4096)
 *   ring_bench case=wakeup median_ns=N
 *   ring_bench case=idle cpu_pct=N
 *
 * stream: one side stages records and publishes them in batches of
 * STREAM_BATCH (or whenever the ring is full), the other drains them as
 * the daemons do: peek and consume each, give the bytes back in batches
 * (every STREAM_BATCH records, or whenever it has caught up), both awake;
 * records per second at the consumer. pingpong: round-trip time of one record there and one back,
 * both sides spinning. wakeup: from a push to the consumer running, when
 * the consumer sleeps on its futex doorbell. idle: CPU used by both
 * processes (/proc/self/schedstat of each, else getrusage), attached and
 * asleep on their doorbells,
 * over 5 seconds (percent of one CPU, both summed; the figure that also
 * counts start-up and exit goes to stderr).
 *
 * Usage: ring_bench [case...]   (default: all cases)
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "shm/barrier.h"
#include "shm/doorbell.h"
#include "base/log/errmsg.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"

#define PINGPONG_ROUNDS 200000
#define WAKEUP_ROUNDS 2000
#define IDLE_SECONDS 5

struct shared {
	atomic_int stop;
	atomic_int ready;
	uint64_t samples[PINGPONG_ROUNDS];
};

static char region_path[512];
static struct shared *sh;
static int cpus;

static void die(const char *what, int rc)
{
	fprintf(stderr, "ring_bench: %s: %s\n", what,
		rc < 0 ? strerror(-rc) : "failed");
	exit(1);
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpus < 2)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu % cpus, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		fprintf(stderr, "ring_bench: cannot pin to CPU %d: %s\n", cpu,
			strerror(errno));
}

/* Both sides of a case: side 0 is a gateway holding slot 0, side 1 is
 * raftd. A side's rings: it sends on `out` and receives on `in`. */
struct side {
	struct shm_region *r;
	struct ring *out, *in;
	struct shm_doorbell *db, *peer_db;
};

static void side_attach(int side, struct side *s)
{
	struct shm_slot_ref ref;
	int rc;

	rc = shm_region_attach(region_path, &s->r);
	if (rc)
		die(errmsg_get(rc), rc);
	if (side == 0) {
		rc = shm_slot_claim(s->r, &ref);
		if (rc)
			die("claim a slot", rc);
		s->out = shm_slot_ring(s->r, ref.index, SHM_SLOT_TO_RAFTD);
		s->in = shm_slot_ring(s->r, ref.index, SHM_SLOT_FROM_RAFTD);
		s->db = shm_slot_doorbell(s->r, ref.index);
		s->peer_db = shm_role_doorbell(s->r, SHM_ROLE_RAFTD);
	} else {
		rc = shm_role_claim(s->r, SHM_ROLE_RAFTD);
		if (rc)
			die("claim raftd", rc);
		s->out = shm_slot_ring(s->r, 0, SHM_SLOT_FROM_RAFTD);
		s->in = shm_slot_ring(s->r, 0, SHM_SLOT_TO_RAFTD);
		s->db = shm_role_doorbell(s->r, SHM_ROLE_RAFTD);
		s->peer_db = shm_slot_doorbell(s->r, 0);
	}
	pin(side);
	atomic_fetch_add(&sh->ready, 1);
	while (atomic_load(&sh->ready) < 2)
		shm_cpu_relax();
}

static void push_spin(struct ring *r, uint32_t type, const void *p,
		      uint32_t len)
{
	int rc;

	while ((rc = ring_push(r, type, p, len)) == -EAGAIN)
		shm_cpu_relax();
	if (rc)
		die("push", rc);
}

static void peek_spin(struct ring *r, struct ring_rec *rec)
{
	int rc;

	while ((rc = ring_peek(r, rec)) == -EAGAIN)
		shm_cpu_relax();
	if (rc)
		die("peek", rc);
}

/* Records the stream producer stages before publishing them, and the
 * consumer consumes before giving their bytes back (a power of two), as
 * the daemons publish and release once per loop turn. */
#define STREAM_BATCH 64

static int stream(int side, uint32_t size, uint64_t count)
{
	static uint8_t buf[4096];
	struct ring_rec rec;
	struct side s;
	uint64_t i, t0 = 0;

	side_attach(side, &s);
	if (side == 0) {
		for (i = 0; i < count; i++) {
			int rc;

			while ((rc = ring_stage(s.out, 1, buf, size)) == -EAGAIN) {
				ring_publish(s.out); /* full: let the consumer see it all */
				shm_cpu_relax();
			}
			if (rc)
				die("stage", rc);
			if ((i & (STREAM_BATCH - 1)) == STREAM_BATCH - 1)
				ring_publish(s.out);
		}
		ring_publish(s.out);
		return 0;
	}
	for (i = 0; i < count; i++) {
		if (!ring_has_data(s.in))
			ring_release_consumed(s.in); /* caught up: give it all back */
		peek_spin(s.in, &rec);
		if (i == 0)
			t0 = clock_now_ns();
		ring_consume(s.in, &rec);
		if ((i & (STREAM_BATCH - 1)) == STREAM_BATCH - 1)
			ring_release_consumed(s.in);
	}
	ring_release_consumed(s.in);
	sh->samples[0] = clock_now_ns() - t0;
	return 0;
}

static int pingpong(int side, uint32_t size)
{
	static uint8_t buf[4096];
	struct ring_rec rec;
	struct side s;
	uint64_t t0;
	int i;

	side_attach(side, &s);
	for (i = -1000; i < PINGPONG_ROUNDS; i++) {
		if (side == 0) {
			t0 = clock_now_ns();
			push_spin(s.out, 1, buf, size);
			peek_spin(s.in, &rec);
			ring_release(s.in, &rec);
			if (i >= 0)
				sh->samples[i] = clock_now_ns() - t0;
		} else {
			peek_spin(s.in, &rec);
			ring_release(s.in, &rec);
			push_spin(s.out, 1, buf, size);
		}
	}
	return 0;
}

static int wakeup(int side)
{
	struct ring_rec rec;
	struct side s;
	uint64_t t0;
	int i, rc;

	side_attach(side, &s);
	for (i = 0; i < WAKEUP_ROUNDS; i++) {
		if (side == 0) {
			/* Wait until the consumer is asleep in the kernel. */
			while (!shm_doorbell_is_sleeping(s.peer_db))
				usleep(20);
			usleep(200);
			t0 = clock_now_ns();
			push_spin(s.out, 1, &t0, sizeof(t0));
			peek_spin(s.in, &rec); /* the consumer's ack */
			ring_release(s.in, &rec);
			continue;
		}
		while ((rc = ring_peek(s.in, &rec)) == -EAGAIN)
			shm_doorbell_sleep(s.db, ring_wait_ready, s.in,
					   SHM_DOORBELL_BACKSTOP_MS);
		if (rc)
			die("peek", rc);
		memcpy(&t0, rec.data, sizeof(t0));
		sh->samples[i] = clock_now_ns() - t0;
		ring_release(s.in, &rec);
		push_spin(s.out, 2, NULL, 0);
	}
	return 0;
}

static bool stop_or_data(void *arg)
{
	return atomic_load(&sh->stop) || ring_has_data(arg);
}

/* CPU time this process has used, in ns: the scheduler's own count from
 * /proc/self/schedstat (exact), or getrusage (tick-sampled) without it. */
static uint64_t cpu_self_ns(void)
{
	unsigned long long ns;
	struct rusage ru;
	FILE *f = fopen("/proc/self/schedstat", "r");

	if (f) {
		int n = fscanf(f, "%llu", &ns);

		fclose(f);
		if (n == 1)
			return ns;
	}
	getrusage(RUSAGE_SELF, &ru);
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) *
	       1000000000u +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) *
	       1000u;
}

/* Both sides as an idle member's daemons would be: asleep on their
 * doorbells with the usual backstop, until told to stop. Each reports the
 * CPU time it used from the moment both were attached until the stop. */
static int idle(int side)
{
	struct ring_rec rec;
	struct side s;
	uint64_t cpu0;

	side_attach(side, &s);
	cpu0 = cpu_self_ns();
	while (!atomic_load(&sh->stop)) {
		shm_doorbell_wait(s.db, s.peer_db, stop_or_data, s.in, 50,
				  SHM_DOORBELL_BACKSTOP_MS);
		while (ring_peek(s.in, &rec) == 0)
			ring_release(s.in, &rec);
	}
	sh->samples[side] = cpu_self_ns() - cpu0;
	return 0;
}

enum bench_case { STREAM, PINGPONG, WAKEUP, IDLE };

static int run_side(enum bench_case c, int side, uint32_t size)
{
	switch (c) {
	case STREAM:
		return stream(side, size, size <= 64 ? 20000000 : 2000000);
	case PINGPONG:
		return pingpong(side, size);
	case WAKEUP:
		return wakeup(side);
	case IDLE:
		return idle(side);
	}
	return 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Runs a case: a fresh region, two processes. Returns the CPU seconds
 * both used. */
static double run_case(enum bench_case c, uint32_t size)
{
	struct shm_region_params p = { .slot_count = 4,
				       .max_request_bytes = 1536 * 1024 };
	struct rusage before, after;
	struct shm_region *l;
	pid_t pid[2];
	int i, st, rc;

	rc = shm_region_create(region_path, &p, &l);
	if (rc)
		die(errmsg_get(rc), rc);
	atomic_store(&sh->stop, 0);
	atomic_store(&sh->ready, 0);
	getrusage(RUSAGE_CHILDREN, &before);
	fflush(stdout);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		if (pid[i] < 0)
			die("fork", -errno);
		if (pid[i] == 0)
			_exit(run_side(c, i, size));
	}
	if (c == IDLE) {
		while (atomic_load(&sh->ready) < 2)
			usleep(1000);
		sleep(IDLE_SECONDS);
		atomic_store(&sh->stop, 1);
		shm_doorbell_ring(shm_slot_doorbell(l, 0));
		shm_doorbell_ring(shm_role_doorbell(l, SHM_ROLE_RAFTD));
	}
	for (i = 0; i < 2; i++) {
		if (waitpid(pid[i], &st, 0) < 0 || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0)
			die("a benchmark process failed", 0);
	}
	getrusage(RUSAGE_CHILDREN, &after);
	shm_region_detach(l);
	return (after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
	       (after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
	       (after.ru_utime.tv_usec - before.ru_utime.tv_usec) / 1e6 +
	       (after.ru_stime.tv_usec - before.ru_stime.tv_usec) / 1e6;
}

static bool wanted(int argc, char **argv, const char *name)
{
	int i;

	if (argc < 2)
		return true;
	for (i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	static const uint32_t sizes[] = { 64, 4096 };
	char dir[256];
	double cpu;
	size_t i;

	cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (cpus < 2)
		fprintf(stderr, "ring_bench: one CPU only; processes not "
			"pinned\n");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap", -errno);
	snprintf(dir, sizeof(dir), "%s/ring_bench.XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(dir))
		die("mkdtemp", -errno);
	snprintf(region_path, sizeof(region_path), "%s/member.shm", dir);

	for (i = 0; i < 2 && wanted(argc, argv, "stream"); i++) {
		uint64_t n = sizes[i] <= 64 ? 20000000 : 2000000;

		run_case(STREAM, sizes[i]);
		printf("ring_bench case=stream size=%u records_per_sec=%.0f\n",
		       sizes[i], n / (sh->samples[0] / 1e9));
	}
	for (i = 0; i < 2 && wanted(argc, argv, "pingpong"); i++) {
		run_case(PINGPONG, sizes[i]);
		qsort(sh->samples, PINGPONG_ROUNDS, sizeof(uint64_t), cmp_u64);
		printf("ring_bench case=pingpong size=%u median_ns=%llu "
		       "p99_ns=%llu\n", sizes[i],
		       (unsigned long long)sh->samples[PINGPONG_ROUNDS / 2],
		       (unsigned long long)
		       sh->samples[PINGPONG_ROUNDS * 99 / 100]);
	}
	if (wanted(argc, argv, "wakeup")) {
		run_case(WAKEUP, 0);
		qsort(sh->samples, WAKEUP_ROUNDS, sizeof(uint64_t), cmp_u64);
		printf("ring_bench case=wakeup median_ns=%llu\n",
		       (unsigned long long)sh->samples[WAKEUP_ROUNDS / 2]);
	}
	if (wanted(argc, argv, "idle")) {
		cpu = run_case(IDLE, 0);
		printf("ring_bench case=idle cpu_pct=%.4f\n",
		       (sh->samples[0] + sh->samples[1]) / 1e9 / IDLE_SECONDS *
		       100);
		fflush(stdout);
		fprintf(stderr, "ring_bench: idle case, including start-up and "
			"exit of both processes (getrusage): %.4f%% of one "
			"CPU\n",
			cpu / IDLE_SECONDS * 100);
	}
	unlink(region_path);
	rmdir(dir);
	return 0;
}
