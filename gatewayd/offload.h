/*
 * Work a gateway's loop must not wait for (a bcrypt hash or check, tens
 * of milliseconds at etcd's default cost), done on one worker thread of
 * the gateway, started at the first job.
 *
 * The loop queues a job (gw_offload_queue); the worker runs job->work,
 * in the order queued, and rings an eventfd; the loop, woken on it
 * (gw_offload_ready), runs job->done and then job->free for each, oldest
 * first. A gateway that stops while a job runs does not wait for it: the
 * state is freed by whichever of the loop and the worker lets go last,
 * and jobs that never ran are freed with it (done is not run).
 *
 * Lock order: the state's mutex only. Memory: jobs are the caller's
 * (job->free frees one); the state is malloc'd.
 */
#ifndef CETCD_GATEWAYD_OFFLOAD_H
#define CETCD_GATEWAYD_OFFLOAD_H

struct gw_server;
struct gw_src;

/* Jobs waiting, running or done but not taken, at most. */
#define GW_OFFLOAD_MAX_JOBS 256u

/* A job; callers embed it first in their own struct. */
struct gw_offload_job {
	struct gw_offload_job *next;
	void (*work)(struct gw_offload_job *j);                      /* on the worker */
	void (*done)(struct gw_server *s, struct gw_offload_job *j); /* on the loop */
	void (*free)(struct gw_offload_job *j);                      /* last, either side */
};

/* The state of s (s->offload), its eventfd of epoll kind src_kind. 0,
 * -ENOMEM, or eventfd's error. */
int gw_offload_init(struct gw_server *s, int src_kind);
/* The eventfd's epoll source. */
struct gw_src *gw_offload_src(struct gw_server *s);
/* Queues j. 0; -EBUSY when GW_OFFLOAD_MAX_JOBS are queued already; or
 * the error of starting the worker. On failure j stays the caller's. */
int gw_offload_queue(struct gw_server *s, struct gw_offload_job *j);
/* The loop woke on the eventfd: done, then free, of every finished job. */
void gw_offload_ready(struct gw_server *s);
/* Lets the worker go (it ends after the job it is on). */
void gw_offload_fini(struct gw_server *s);

#endif
