/* Work off the loop, on one worker thread of the gateway (see offload.h). */
#include "gatewayd/offload.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/log/log.h"
#include "base/thread/thread.h"
#include "gatewayd/server.h"

/* Shared by the loop and the worker (a detached thread). The loop pushes
 * to todo and takes done; the worker takes from todo, pushes to done and
 * writes the eventfd. */
struct gw_offload {
	struct gw_src src;                      /* the eventfd (first: the
						 * loop's events point here) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct gw_offload_job *todo, *todo_tail; /* FIFO */
	struct gw_offload_job *done;             /* newest first */
	uint32_t jobs;                           /* in todo, running, or in done */
	bool stop;                               /* the gateway let go */
	bool started;                            /* the worker runs */
	atomic_int refs;
};

static void gw_offload_free_list(struct gw_offload_job *j)
{
	while (j) {
		struct gw_offload_job *next = j->next;
		j->free(j);
		j = next;
	}
}

static void gw_offload_put(struct gw_offload *o)
{
	if (atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) != 1)
		return;
	gw_offload_free_list(o->todo);
	gw_offload_free_list(o->done);
	close(o->src.fd);
	pthread_cond_destroy(&o->cv);
	pthread_mutex_destroy(&o->mu);
	free(o);
}

static void *gw_offload_worker(void *arg)
{
	struct gw_offload *o = arg;
	const uint64_t one = 1;

	pthread_mutex_lock(&o->mu);
	for (;;) {
		while (!o->stop && !o->todo)
			pthread_cond_wait(&o->cv, &o->mu);
		if (o->stop)
			break;
		struct gw_offload_job *j = o->todo;
		o->todo = j->next;
		if (!o->todo)
			o->todo_tail = NULL;
		pthread_mutex_unlock(&o->mu);
		j->work(j);
		pthread_mutex_lock(&o->mu);
		j->next = o->done;
		o->done = j;
		if (write(o->src.fd, &one, sizeof(one)) < 0) {
			/* EAGAIN: the counter is full, the loop wakes anyway */
		}
	}
	pthread_mutex_unlock(&o->mu);
	gw_offload_put(o);
	return NULL;
}

int gw_offload_queue(struct gw_server *s, struct gw_offload_job *j)
{
	struct gw_offload *o = s->offload;
	int rc = 0;

	pthread_mutex_lock(&o->mu);
	if (o->jobs >= GW_OFFLOAD_MAX_JOBS) {
		rc = -EBUSY;
	} else if (!o->started) {
		atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
		rc = shm_thread_start(&(pthread_t){ 0 }, true, gw_offload_worker, o);
		if (rc) {
			atomic_fetch_sub_explicit(&o->refs, 1, memory_order_relaxed);
			log_warn("cannot start the gateway's worker thread", LOG_ERRNO(rc));
		}
		o->started = rc == 0;
	}
	if (rc == 0) {
		j->next = NULL;
		if (o->todo_tail)
			o->todo_tail->next = j;
		else
			o->todo = j;
		o->todo_tail = j;
		o->jobs++;
		pthread_cond_signal(&o->cv);
	}
	pthread_mutex_unlock(&o->mu);
	return rc;
}

void gw_offload_ready(struct gw_server *s)
{
	struct gw_offload *o = s->offload;
	struct gw_offload_job *done, *fifo = NULL;
	uint64_t ticks;

	if (read(o->src.fd, &ticks, sizeof(ticks)) < 0) {
		/* EAGAIN: a turn before took what rang */
	}
	pthread_mutex_lock(&o->mu);
	done = o->done;
	o->done = NULL;
	pthread_mutex_unlock(&o->mu);
	while (done) { /* oldest first */
		struct gw_offload_job *next = done->next;
		done->next = fifo;
		fifo = done;
		done = next;
	}
	while (fifo) {
		struct gw_offload_job *next = fifo->next;
		fifo->done(s, fifo);
		fifo->free(fifo);
		pthread_mutex_lock(&o->mu);
		o->jobs--;
		pthread_mutex_unlock(&o->mu);
		fifo = next;
	}
}

struct gw_src *gw_offload_src(struct gw_server *s)
{
	return &s->offload->src;
}

int gw_offload_init(struct gw_server *s, int src_kind)
{
	struct gw_offload *o = calloc(1, sizeof(*o));
	int rc;

	if (!o)
		return -ENOMEM;
	o->src.kind = src_kind;
	o->src.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (o->src.fd < 0) {
		rc = -errno;
		free(o);
		return rc;
	}
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
	atomic_init(&o->refs, 1);
	s->offload = o;
	return 0;
}

void gw_offload_fini(struct gw_server *s)
{
	struct gw_offload *o = s->offload;

	if (!o)
		return;
	s->offload = NULL;
	pthread_mutex_lock(&o->mu);
	o->stop = true;
	pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
	gw_offload_put(o);
}
