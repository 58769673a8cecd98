/*
 * Unit tests for base/log/errmsg.c, the one error slot:
 * - errmsg_set returns its code and errmsg_get(code) gives the text back
 * - the text is given only for the code it was recorded with: any other
 *   code (an older or unrelated failure) gets strerror's text
 * - a newer recording replaces an older one
 * - a message may wrap the slot's own text
 * - long messages are cut to ERRMSG_MAX - 1 bytes, NUL-terminated
 * - each thread has its own slot
 */
#include <pthread.h>

#include "shm_testlib.h"

#include "base/log/errmsg.h"

static void test_set_get(void)
{
	CHECK_EQ(errmsg_set(-EUCLEAN, "page %d is bad; restore from a snapshot", 7), -EUCLEAN);
	CHECK(strcmp(errmsg_get(-EUCLEAN), "page 7 is bad; restore from a snapshot") == 0);
	/* another code: strerror's text, never the recorded one */
	CHECK(strcmp(errmsg_get(-EIO), strerror(EIO)) == 0);
	CHECK(strcmp(errmsg_get(-ENOENT), strerror(ENOENT)) == 0);
	CHECK(errmsg_get(0) != NULL);
	CHECK(strstr(errmsg_get(0), "page 7") == NULL);
	/* still there for its own code */
	CHECK(strstr(errmsg_get(-EUCLEAN), "page 7") != NULL);

	/* a newer failure replaces it, even with the same code */
	CHECK_EQ(errmsg_set(-EIO, "disk %s failed", "sda"), -EIO);
	CHECK(strcmp(errmsg_get(-EIO), "disk sda failed") == 0);
	CHECK(strcmp(errmsg_get(-EUCLEAN), strerror(EUCLEAN)) == 0);
	CHECK_EQ(errmsg_set(-EIO, "disk %s failed", "sdb"), -EIO);
	CHECK(strcmp(errmsg_get(-EIO), "disk sdb failed") == 0);

	/* context added around the text from below */
	CHECK_EQ(errmsg_set(-EIO, "opening the db: %s", errmsg_get(-EIO)), -EIO);
	CHECK(strcmp(errmsg_get(-EIO), "opening the db: disk sdb failed") == 0);
}

static int vset_wrap(int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rc = errmsg_vset(rc, fmt, ap);
	va_end(ap);
	return rc;
}

static void test_vset_and_truncation(void)
{
	char big[3 * ERRMSG_MAX];

	CHECK_EQ(vset_wrap(-EPROTO, "layout %u, want %u", 9u, 2u), -EPROTO);
	CHECK(strcmp(errmsg_get(-EPROTO), "layout 9, want 2") == 0);

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[0] = 'A';
	CHECK_EQ(errmsg_set(-E2BIG, "%s", big), -E2BIG);
	CHECK_EQ(strlen(errmsg_get(-E2BIG)), ERRMSG_MAX - 1);
	CHECK_EQ(errmsg_get(-E2BIG)[0], 'A');
	CHECK_EQ(errmsg_get(-E2BIG)[ERRMSG_MAX - 2], 'x');
	/* a long message wrapping itself is cut the same way */
	CHECK_EQ(errmsg_set(-E2BIG, "more: %s", errmsg_get(-E2BIG)), -E2BIG);
	CHECK_EQ(strlen(errmsg_get(-E2BIG)), ERRMSG_MAX - 1);
	CHECK(strncmp(errmsg_get(-E2BIG), "more: Ax", 8) == 0);
}

struct peer {
	pthread_barrier_t *bar;
	int seen_before;        /* errmsg_get(-EUCLEAN) held the main text */
	int own_ok;
};

static void *peer_run(void *arg)
{
	struct peer *p = arg;

	/* the main thread has recorded -EUCLEAN: not visible here */
	pthread_barrier_wait(p->bar);
	p->seen_before = strstr(errmsg_get(-EUCLEAN), "main thread") != NULL;
	errmsg_set(-EUCLEAN, "peer thread page %d", 9);
	pthread_barrier_wait(p->bar);
	/* the main thread recorded again in between */
	pthread_barrier_wait(p->bar);
	p->own_ok = strcmp(errmsg_get(-EUCLEAN), "peer thread page 9") == 0;
	return NULL;
}

static void test_threads(void)
{
	pthread_barrier_t bar;
	pthread_t th;
	struct peer p = { .bar = &bar };

	CHECK_EQ(pthread_barrier_init(&bar, NULL, 2), 0);
	CHECK_EQ(pthread_create(&th, NULL, peer_run, &p), 0);
	errmsg_set(-EUCLEAN, "main thread page %d", 1);
	pthread_barrier_wait(&bar);
	pthread_barrier_wait(&bar);
	/* the peer's recording did not touch this thread's slot */
	CHECK(strcmp(errmsg_get(-EUCLEAN), "main thread page 1") == 0);
	errmsg_set(-EUCLEAN, "main thread page %d", 2);
	pthread_barrier_wait(&bar);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(p.seen_before, 0);
	CHECK_EQ(p.own_ok, 1);
	CHECK_EQ(pthread_barrier_destroy(&bar), 0);
}

int main(void)
{
	test_set_get();
	test_vset_and_truncation();
	test_threads();
	printf("test_errmsg: ok\n");
	return 0;
}
