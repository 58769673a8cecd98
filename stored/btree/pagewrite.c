/* A second thread for a commit's page writes (see pagewrite.h). */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "base/thread/thread.h"
#include "stored/alloc.h"
#include "stored/btree/pagewrite.h"

/* Writes the thread takes from the queue at a time. */
#define PAGEWRITE_TAKE 64

/*
 * q[head, head + n) are queued; the thread copies up to PAGEWRITE_TAKE of
 * them out under mu and writes them unlocked, with `busy` set. It takes
 * writes only once PAGEWRITE_WAKE are queued (or at stop), so a commit of
 * a few pages never wakes it: pagewrite_drain writes those itself. All
 * fields are under mu.
 */
struct pagewrite {
	struct diskio *io;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t work;   /* PAGEWRITE_WAKE queued, or stop */
	pthread_cond_t idle;   /* the thread finished a batch */
	struct diskio_write *q;
	size_t head, n, cap;
	bool busy;
	bool sleeping;         /* the thread waits on `work`, nobody signalled it yet */
	bool stop;
	int rc;                /* first error since the last drain */
};

static void pagewrite_note(struct pagewrite *p, int rc)
{
	if (rc < 0 && p->rc == 0)
		p->rc = rc;
}

static void *pagewrite_main(void *arg)
{
	struct pagewrite *p = arg;
	struct diskio_write w[PAGEWRITE_TAKE];

	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->n < PAGEWRITE_WAKE && !p->stop) {
			p->sleeping = true;
			pthread_cond_wait(&p->work, &p->mu);
		}
		p->sleeping = false;
		if (p->n == 0)
			break;
		size_t k = p->n < PAGEWRITE_TAKE ? p->n : PAGEWRITE_TAKE;
		memcpy(w, p->q + p->head, k * sizeof(*w));
		p->head += k;
		p->n -= k;
		if (p->n == 0)
			p->head = 0;
		p->busy = true;
		pthread_mutex_unlock(&p->mu);
		int rc = diskio_write_batch(p->io, w, k, false);
		pthread_mutex_lock(&p->mu);
		p->busy = false;
		pagewrite_note(p, rc);
		pthread_cond_broadcast(&p->idle);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int pagewrite_start(struct diskio *io, struct pagewrite **out)
{
	struct pagewrite *p = stored_calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	p->io = io;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->idle, NULL);
	rc = shm_thread_start(&p->thread, false, pagewrite_main, p);
	if (rc) {
		pthread_cond_destroy(&p->idle);
		pthread_cond_destroy(&p->work);
		pthread_mutex_destroy(&p->mu);
		stored_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void pagewrite_stop(struct pagewrite *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	pthread_cond_destroy(&p->idle);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->mu);
	stored_free(p->q);
	stored_free(p);
}

int pagewrite_push(struct pagewrite *p, const void *buf, size_t len, uint64_t off)
{
	pthread_mutex_lock(&p->mu);
	if (p->head + p->n == p->cap) {
		if (p->head > 0) {
			memmove(p->q, p->q + p->head, p->n * sizeof(*p->q));
			p->head = 0;
		}
		int rc = stored_reserve((void **)&p->q, &p->cap, p->n + 1, sizeof(*p->q), 256);
		if (rc < 0) {
			pthread_mutex_unlock(&p->mu);
			return rc;
		}
	}
	p->q[p->head + p->n++] = (struct diskio_write){ buf, len, off };
	if (p->sleeping && p->n >= PAGEWRITE_WAKE) {
		p->sleeping = false;
		pthread_cond_signal(&p->work);
	}
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/*
 * The writes still queued are the caller's to write: it is the only
 * producer, so nothing is pushed until it returns and the thread never
 * touches the queue while it is empty. They are written unlocked, beside
 * the batch the thread may be writing, and then it waits for that batch.
 */
int pagewrite_drain(struct pagewrite *p)
{
	pthread_mutex_lock(&p->mu);
	size_t k = p->n;
	/* (no queue is allocated before the first write is queued) */
	const struct diskio_write *w = k ? p->q + p->head : NULL;
	p->head = p->n = 0;
	if (k) {
		pthread_mutex_unlock(&p->mu);
		int rc = diskio_write_batch(p->io, w, k, false);
		pthread_mutex_lock(&p->mu);
		pagewrite_note(p, rc);
	}
	while (p->busy)
		pthread_cond_wait(&p->idle, &p->mu);
	int rc = p->rc;
	p->rc = 0;
	pthread_mutex_unlock(&p->mu);
	return rc;
}
