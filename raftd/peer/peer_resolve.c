/*
 * Peer host names resolved off the thread that drives the transport (see
 * peer_int.h): getaddrinfo may wait seconds on DNS, and that thread is
 * raftd's loop. Addresses (and unix paths) need no lookup and are used
 * at once; a name's address comes from a cache that a resolver thread of
 * its own fills, and refreshes when a dial finds the entry old, so that a
 * peer whose name moves is followed as etcd's dialer follows it.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "base/clock/clock.h"
#include "raftd/alloc.h"
#include "raftd/peer/peer_int.h"
#include "base/log/log.h"

/* How long a looked-up address is used before a dial asks for it again
 * (the old one is used meanwhile), and how soon a failed lookup is
 * retried. */
#define PEER_NAME_TTL_NS (30ull * 1000 * 1000 * 1000)
#define PEER_NAME_RETRY_NS (1ull * 1000 * 1000 * 1000)
/* Names kept; beyond it the least recently looked-up one is reused. */
#define PEER_NAMES_MAX 64u

struct peer_name {
	struct peer_name *next;
	struct peer_url url;              /* host and port looked up */
	bool pending;                     /* waits for the resolver thread */
	int rc;                           /* of the last lookup; -EAGAIN
					   * before the first ends */
	struct sockaddr_storage ss;       /* when rc == 0 */
	socklen_t sl;
	uint64_t done_ns;                 /* when the last lookup ended */
};

struct peer_resolver {
	pthread_mutex_t mu;
	pthread_cond_t cond;              /* a name became pending, or stop */
	pthread_t thread;
	bool stop;                        /* under mu */
	struct peer_name *names;          /* under mu; entries are never freed
					   * while the thread runs */
	size_t n_names;
};

static void *peer_resolver_main(void *arg)
{
	struct peer_resolver *pr = arg;

	pthread_mutex_lock(&pr->mu);
	while (!pr->stop) {
		struct peer_name *n;
		for (n = pr->names; n && !n->pending; n = n->next)
			;
		if (!n) {
			pthread_cond_wait(&pr->cond, &pr->mu);
			continue;
		}
		struct peer_url u = n->url;
		struct sockaddr_storage ss;
		socklen_t sl = 0;
		pthread_mutex_unlock(&pr->mu);
		int rc = peer_url_sockaddr(&u, &ss, &sl);
		pthread_mutex_lock(&pr->mu);
		if (rc && rc != n->rc) /* once, not at every retry */
			log_warn("cannot resolve a peer's host name; dials to it fail until it resolves",
				 LOG_STR("host", u.host), LOG_ERRNO(rc));
		/* n is still u's entry: only a name that is not pending is
		 * reused for another */
		n->pending = false;
		n->rc = rc;
		if (!rc) {
			n->ss = ss;
			n->sl = sl;
		}
		n->done_ns = clock_now_ns();
	}
	pthread_mutex_unlock(&pr->mu);
	return NULL;
}

static struct peer_resolver *peer_resolver_get(struct peer *p)
{
	struct peer_resolver *pr = p->resolver;

	if (pr)
		return pr;
	pr = raftd_calloc(1, sizeof(*pr));
	if (!pr)
		return NULL;
	pthread_mutex_init(&pr->mu, NULL);
	pthread_cond_init(&pr->cond, NULL);
	int rc = shm_thread_start(&pr->thread, false, peer_resolver_main, pr);
	if (rc) {
		log_warn("cannot start the peer name resolver", LOG_ERRNO(rc));
		pthread_cond_destroy(&pr->cond);
		pthread_mutex_destroy(&pr->mu);
		raftd_free(pr);
		return NULL;
	}
	p->resolver = pr;
	return pr;
}

/* The entry of u's host and port, made (or reused) when there is none;
 * under pr->mu. NULL when out of memory. */
static struct peer_name *peer_name_get_locked(struct peer_resolver *pr, const struct peer_url *u)
{
	struct peer_name *n, *oldest = NULL;

	for (n = pr->names; n; n = n->next) {
		if (!strcmp(n->url.host, u->host) && !strcmp(n->url.port, u->port))
			return n;
		if (!n->pending && (!oldest || n->done_ns < oldest->done_ns))
			oldest = n;
	}
	if (pr->n_names >= PEER_NAMES_MAX && oldest) {
		n = oldest;
	} else {
		n = raftd_calloc(1, sizeof(*n));
		if (!n)
			return NULL;
		n->next = pr->names;
		pr->names = n;
		pr->n_names++;
	}
	memset(&n->url, 0, sizeof(n->url));
	strcpy(n->url.host, u->host);
	strcpy(n->url.port, u->port);
	n->rc = -EAGAIN;
	n->done_ns = 0;
	return n;
}

int peer_resolve(struct peer *p, const struct peer_url *u, struct sockaddr_storage *ss,
		 socklen_t *sl)
{
	struct peer_resolver *pr;
	struct peer_name *n;
	uint64_t now;
	int rc = peer_url_sockaddr_numeric(u, ss, sl);

	if (rc != -EAGAIN)
		return rc;
	pr = peer_resolver_get(p);
	if (!pr)
		return -ENOMEM;
	now = clock_now_ns();
	pthread_mutex_lock(&pr->mu);
	n = peer_name_get_locked(pr, u);
	if (!n) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	rc = n->rc;
	if (!rc) {
		*ss = n->ss;
		*sl = n->sl;
	}
	if (!n->pending && (!n->done_ns ||
			    now - n->done_ns >= (rc ? PEER_NAME_RETRY_NS : PEER_NAME_TTL_NS))) {
		n->pending = true;
		pthread_cond_signal(&pr->cond);
	}
out_unlock:
	pthread_mutex_unlock(&pr->mu);
	return rc;
}

void peer_resolve_free(struct peer *p)
{
	struct peer_resolver *pr = p->resolver;

	if (!pr)
		return;
	pthread_mutex_lock(&pr->mu);
	pr->stop = true;
	pthread_cond_signal(&pr->cond);
	pthread_mutex_unlock(&pr->mu);
	pthread_join(pr->thread, NULL);
	while (pr->names) {
		struct peer_name *n = pr->names;
		pr->names = n->next;
		raftd_free(n);
	}
	pthread_cond_destroy(&pr->cond);
	pthread_mutex_destroy(&pr->mu);
	raftd_free(pr);
	p->resolver = NULL;
}
