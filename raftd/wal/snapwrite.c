/* .snap files written by a thread of their own (see snapwrite.h). */
#include "raftd/wal/snapwrite.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "raftd/alloc.h"
#include "base/thread/thread.h"
#include "base/log/log.h"

struct snapwrite {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int efd;
	char *dir;
	unsigned max_snapshots;
	/* under mu */
	bool stop;
	bool has_job;       /* submitted, not taken by the worker yet */
	bool busy;          /* submitted, not reaped yet */
	bool done;          /* the worker finished it: rc says how */
	int rc;
	struct snap job;
};

static void *snapwrite_main(void *arg)
{
	struct snapwrite *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->stop && !w->has_job)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->has_job)
			break;
		w->has_job = false;
		struct snap job = w->job;
		pthread_mutex_unlock(&w->mu);

		int rc = snap_save(w->dir, &job);
		if (!rc) {
			(void)snap_release_dbs(w->dir, job.index);
			if (snap_purge(w->dir, w->max_snapshots) < 0)
				log_warn("failed to purge snap files; retried at the next snapshot",
					 LOG_STR("snap-dir", w->dir));
		}
		raftd_free(job.data);

		pthread_mutex_lock(&w->mu);
		w->job.data = NULL;
		w->rc = rc;
		w->done = true;
		uint64_t one = 1;
		while (write(w->efd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int snapwrite_start(const char *dir, unsigned max_snapshots, struct snapwrite **out)
{
	struct snapwrite *w = raftd_calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	w->max_snapshots = max_snapshots;
	w->dir = raftd_malloc(strlen(dir) + 1);
	if (!w->dir) {
		rc = -ENOMEM;
		goto out_free;
	}
	strcpy(w->dir, dir);
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0) {
		rc = -errno;
		goto out_free;
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	rc = shm_thread_start(&w->thread, false, snapwrite_main, w);
	if (rc)
		goto out_close;
	*out = w;
	return 0;

out_close:
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	close(w->efd);
out_free:
	raftd_free(w->dir);
	raftd_free(w);
	return rc;
}

void snapwrite_stop(struct snapwrite *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	raftd_free(w->job.data); /* submitted, never taken */
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	close(w->efd);
	raftd_free(w->dir);
	raftd_free(w);
}

bool snapwrite_busy(const struct snapwrite *w)
{
	return w->busy;
}

int snapwrite_submit(struct snapwrite *w, struct snap *s)
{
	if (w->busy)
		return -EBUSY;
	pthread_mutex_lock(&w->mu);
	w->job = *s;
	w->has_job = true;
	w->done = false;
	w->busy = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	memset(s, 0, sizeof(*s));
	return 0;
}

int snapwrite_event_fd(const struct snapwrite *w)
{
	return w->efd;
}

int snapwrite_reap(struct snapwrite *w, uint64_t *index, uint64_t *term)
{
	uint64_t v;
	int rc = -EAGAIN;

	while (read(w->efd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&w->mu);
	if (w->busy && w->done) {
		rc = w->rc;
		*index = w->job.index;
		*term = w->job.term;
		w->busy = false;
		w->done = false;
	}
	pthread_mutex_unlock(&w->mu);
	return rc;
}
