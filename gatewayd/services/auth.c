/* etcdserverpb.Auth in gatewayd: every management RPC goes through Raft
 * as etcd's EtcdServer proposes it, and stored applies it (stored/auth.h),
 * answering with etcd's response or error.
 *
 * UserAdd (unless no_password) and UserChangePassword first have their
 * password hashed as etcd 3.5's server does, into the request's
 * hashedPassword, so that no member hashes at apply; the password is sent
 * too, which etcd 3.4 members of a mixed cluster hash themselves (and
 * cetcd ignores when hashedPassword is there). A client's own
 * hashedPassword is replaced, as etcd 3.5 replaces it. Hashing costs tens
 * of milliseconds at etcd's default cost, so it runs on a worker thread
 * of this gateway (started at the first password), never on the loop: the
 * loop queues the request's bytes, the worker hashes and rings an
 * eventfd, and the loop proposes the request with its hash, unless the
 * call ended meanwhile (then nothing is proposed, as etcd proposes
 * nothing for a cancelled request).
 *
 * Authenticate is not served here yet: its password check and token are
 * still to come. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "auth/bcrypt.h"
#include "base/log/log.h"
#include "base/thread/thread.h"
#include "config/config.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/server.h"

/* InternalRaftRequest's field numbers (proto/etcdserverpb/raft_internal.proto). */
#define AUTH_IRR_ENABLE 1000u
#define AUTH_IRR_DISABLE 1011u
#define AUTH_IRR_USER_ADD 1100u
#define AUTH_IRR_USER_DELETE 1101u
#define AUTH_IRR_USER_GET 1102u
#define AUTH_IRR_USER_CHANGE_PASSWORD 1103u
#define AUTH_IRR_USER_GRANT_ROLE 1104u
#define AUTH_IRR_USER_REVOKE_ROLE 1105u
#define AUTH_IRR_USER_LIST 1106u
#define AUTH_IRR_ROLE_LIST 1107u
#define AUTH_IRR_ROLE_ADD 1200u
#define AUTH_IRR_ROLE_DELETE 1201u
#define AUTH_IRR_ROLE_GET 1202u
#define AUTH_IRR_ROLE_GRANT_PERMISSION 1203u
#define AUTH_IRR_ROLE_REVOKE_PERMISSION 1204u

/* Passwords waiting for or being hashed, at most (then "too many
 * requests", as a full pending table answers). */
#define AUTH_MAX_JOBS 256u

/* A password to hash for a call. */
struct auth_job {
	struct auth_job *next;
	uint64_t call_id;         /* grpc_call_id; the call may be gone by the end */
	uint32_t field;           /* AUTH_IRR_USER_ADD or _CHANGE_PASSWORD */
	const ProtobufCMessageDescriptor *desc;
	uint8_t *msg;             /* the request's bytes (owned, wiped when freed) */
	size_t len;
	const char *password;     /* into a copy of the password (owned) */
	size_t password_len;
	int cost;
	int rc;                   /* bcrypt_hash's, once done */
	char hash[BCRYPT_HASH_SIZE];
};

/*
 * Shared by the loop and the worker (a detached thread), freed by
 * whichever lets go last (refs), so that a gateway that stops while a
 * password of a high cost is being hashed does not wait for it.
 * Lock order: mu only. The loop pushes to todo and takes done; the worker
 * takes from todo and pushes to done, then writes efd.
 */
struct auth_state {
	struct gw_src src;        /* efd in the loop's epoll (first: the loop's
				   * events point here) */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct auth_job *todo, *todo_tail; /* FIFO */
	struct auth_job *done;    /* newest first */
	uint32_t jobs;            /* in todo, done or being hashed */
	bool stop;                /* the gateway let go */
	bool started;             /* the worker runs */
	atomic_int refs;
};

static void auth_job_free(struct auth_job *j)
{
	if (!j)
		return;
	if (j->msg) {
		explicit_bzero(j->msg, j->len);
		free(j->msg);
	}
	if (j->password) {
		explicit_bzero((char *)j->password, j->password_len);
		free((char *)j->password);
	}
	explicit_bzero(j->hash, sizeof(j->hash));
	free(j);
}

static void auth_jobs_free(struct auth_job *j)
{
	while (j) {
		struct auth_job *next = j->next;
		auth_job_free(j);
		j = next;
	}
}

static void auth_state_put(struct auth_state *st)
{
	if (atomic_fetch_sub_explicit(&st->refs, 1, memory_order_acq_rel) != 1)
		return;
	auth_jobs_free(st->todo);
	auth_jobs_free(st->done);
	close(st->src.fd);
	pthread_cond_destroy(&st->cv);
	pthread_mutex_destroy(&st->mu);
	free(st);
}

static void *auth_worker(void *arg)
{
	struct auth_state *st = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&st->mu);
	while (!st->stop) {
		struct auth_job *j = st->todo;
		if (!j) {
			pthread_cond_wait(&st->cv, &st->mu);
			continue;
		}
		st->todo = j->next;
		if (!st->todo)
			st->todo_tail = NULL;
		pthread_mutex_unlock(&st->mu);
		j->rc = bcrypt_hash(j->password, j->password_len, j->cost, j->hash);
		pthread_mutex_lock(&st->mu);
		j->next = st->done;
		st->done = j;
		if (write(st->src.fd, &one, sizeof(one)) < 0) {
			/* the counter is far from full: the loop reads it each time */
		}
	}
	pthread_mutex_unlock(&st->mu);
	auth_state_put(st);
	return NULL;
}

/* Queues j for the worker (started if need be). 0, or -EBUSY (too many
 * waiting), or the error of starting the thread; j is the caller's on
 * failure. */
static int auth_queue(struct gw_server *s, struct auth_job *j)
{
	struct auth_state *st = s->auth;
	int rc = 0;

	pthread_mutex_lock(&st->mu);
	if (st->jobs >= AUTH_MAX_JOBS) {
		rc = -EBUSY;
	} else if (!st->started) {
		atomic_fetch_add_explicit(&st->refs, 1, memory_order_relaxed);
		rc = shm_thread_start(&(pthread_t){ 0 }, true, auth_worker, st);
		if (rc) {
			atomic_fetch_sub_explicit(&st->refs, 1, memory_order_relaxed);
			log_warn("cannot start the thread that hashes passwords", LOG_ERRNO(rc));
		}
		st->started = rc == 0;
	}
	if (rc == 0) {
		j->next = NULL;
		if (st->todo_tail)
			st->todo_tail->next = j;
		else
			st->todo = j;
		st->todo_tail = j;
		st->jobs++;
		pthread_cond_signal(&st->cv);
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

/* Hashes the request's password off the loop, then proposes it
 * (auth_service_ready); the request's bytes are msg, len (gw_unpack's). */
static void auth_hash_then_propose(struct gw_server *s, struct grpc_call *call, uint32_t field,
				   const ProtobufCMessageDescriptor *desc, const uint8_t *msg,
				   size_t len, const char *password)
{
	struct auth_job *j = calloc(1, sizeof(*j));
	size_t plen = strlen(password);
	int rc;

	if (!j || !(j->msg = malloc(len ? len : 1)) || !(j->password = malloc(plen + 1))) {
		auth_job_free(j);
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	memcpy(j->msg, msg, len);
	j->len = len;
	memcpy((char *)j->password, password, plen + 1);
	j->password_len = plen;
	j->call_id = grpc_call_id(call);
	j->field = field;
	j->desc = desc;
	j->cost = bcrypt_cost_or_default(s->cfg->bcrypt_cost);
	rc = auth_queue(s, j);
	if (rc) {
		auth_job_free(j);
		s->stats.too_many++;
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "etcdserver: too many requests");
	}
}

/* A hashed job back on the loop: its request, with hashedPassword set,
 * proposed for its call (if the call still waits). */
static void auth_job_propose(struct gw_server *s, struct auth_job *j)
{
	struct grpc_call *call = grpc_call_find(s->grpc, j->call_id);
	ProtobufCMessage *m;
	uint8_t *buf;
	size_t n;

	if (!call)
		return;
	if (j->rc) {
		log_warn("failed to bcrypt hash password", LOG_ERRNO(j->rc));
		grpc_call_finish(call, j->rc == -EINVAL ? GRPC_STATUS_INVALID_ARGUMENT
							: GRPC_STATUS_UNKNOWN,
				 j->rc == -EINVAL ? "etcdserver: the password cannot be hashed"
						  : "etcdserver: cannot hash the password");
		return;
	}
	m = protobuf_c_message_unpack(j->desc, gw_pb_alloc(s), j->len, j->msg);
	if (!m) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	if (j->desc == &etcdserverpb__auth_user_add_request__descriptor)
		((Etcdserverpb__AuthUserAddRequest *)m)->hashedpassword = j->hash;
	else
		((Etcdserverpb__AuthUserChangePasswordRequest *)m)->hashedpassword = j->hash;
	n = protobuf_c_message_get_packed_size(m);
	buf = gw_scratch(s, n ? n : 1);
	if (!buf) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	protobuf_c_message_pack(m, buf);
	gw_propose(s, call, j->field, buf, n);
	explicit_bzero(buf, n);
}

void auth_service_ready(struct gw_server *s)
{
	struct auth_state *st = s->auth;
	struct auth_job *done, *fifo = NULL;
	uint64_t ticks;

	if (read(st->src.fd, &ticks, sizeof(ticks)) < 0) {
		/* EAGAIN: a turn before took what rang */
	}
	pthread_mutex_lock(&st->mu);
	done = st->done;
	st->done = NULL;
	pthread_mutex_unlock(&st->mu);
	while (done) { /* oldest first */
		struct auth_job *next = done->next;
		done->next = fifo;
		fifo = done;
		done = next;
	}
	while (fifo) {
		struct auth_job *next = fifo->next;
		auth_job_propose(s, fifo);
		auth_job_free(fifo);
		pthread_mutex_lock(&st->mu);
		st->jobs--;
		pthread_mutex_unlock(&st->mu);
		fifo = next;
	}
}

/* ---- the RPCs ---- */

#define AUTH_PLAIN(fn, desc, field)                                                       \
	static void fn(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,   \
		       size_t len)                                                        \
	{                                                                                 \
		if (gw_unpack(s, call, &desc, &msg, &len))                                \
			gw_propose(s, call, field, msg, len);                             \
	}
AUTH_PLAIN(auth_enable, etcdserverpb__auth_enable_request__descriptor, AUTH_IRR_ENABLE)
AUTH_PLAIN(auth_disable, etcdserverpb__auth_disable_request__descriptor, AUTH_IRR_DISABLE)
AUTH_PLAIN(auth_user_get, etcdserverpb__auth_user_get_request__descriptor, AUTH_IRR_USER_GET)
AUTH_PLAIN(auth_user_list, etcdserverpb__auth_user_list_request__descriptor, AUTH_IRR_USER_LIST)
AUTH_PLAIN(auth_user_delete, etcdserverpb__auth_user_delete_request__descriptor,
	   AUTH_IRR_USER_DELETE)
AUTH_PLAIN(auth_user_grant_role, etcdserverpb__auth_user_grant_role_request__descriptor,
	   AUTH_IRR_USER_GRANT_ROLE)
AUTH_PLAIN(auth_user_revoke_role, etcdserverpb__auth_user_revoke_role_request__descriptor,
	   AUTH_IRR_USER_REVOKE_ROLE)
AUTH_PLAIN(auth_role_add, etcdserverpb__auth_role_add_request__descriptor, AUTH_IRR_ROLE_ADD)
AUTH_PLAIN(auth_role_get, etcdserverpb__auth_role_get_request__descriptor, AUTH_IRR_ROLE_GET)
AUTH_PLAIN(auth_role_list, etcdserverpb__auth_role_list_request__descriptor, AUTH_IRR_ROLE_LIST)
AUTH_PLAIN(auth_role_delete, etcdserverpb__auth_role_delete_request__descriptor,
	   AUTH_IRR_ROLE_DELETE)
AUTH_PLAIN(auth_role_grant_permission,
	   etcdserverpb__auth_role_grant_permission_request__descriptor,
	   AUTH_IRR_ROLE_GRANT_PERMISSION)
AUTH_PLAIN(auth_role_revoke_permission,
	   etcdserverpb__auth_role_revoke_permission_request__descriptor,
	   AUTH_IRR_ROLE_REVOKE_PERMISSION)
#undef AUTH_PLAIN

static void auth_user_add(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			  size_t len)
{
	const ProtobufCMessageDescriptor *d = &etcdserverpb__auth_user_add_request__descriptor;
	Etcdserverpb__AuthUserAddRequest *r = gw_unpack(s, call, d, &msg, &len);

	if (!r)
		return;
	/* nothing to hash: proposed as it came (an empty name is refused
	 * at apply, as etcd's store refuses it) */
	if ((r->options && r->options->no_password) || !*r->name) {
		gw_propose(s, call, AUTH_IRR_USER_ADD, msg, len);
		return;
	}
	auth_hash_then_propose(s, call, AUTH_IRR_USER_ADD, d, msg, len, r->password);
}

static void auth_user_change_password(struct gw_server *s, struct grpc_call *call,
				      const uint8_t *msg, size_t len)
{
	const ProtobufCMessageDescriptor *d =
		&etcdserverpb__auth_user_change_password_request__descriptor;
	Etcdserverpb__AuthUserChangePasswordRequest *r = gw_unpack(s, call, d, &msg, &len);

	if (r)
		auth_hash_then_propose(s, call, AUTH_IRR_USER_CHANGE_PASSWORD, d, msg, len,
				       r->password);
}

struct gw_src *auth_service_src(struct gw_server *s)
{
	return &s->auth->src;
}

int auth_service_register(struct gw_server *s, int src_kind)
{
	static const struct {
		const char *path;
		gw_unary_fn fn;
	} methods[] = {
		{ "/etcdserverpb.Auth/AuthEnable", auth_enable },
		{ "/etcdserverpb.Auth/AuthDisable", auth_disable },
		{ "/etcdserverpb.Auth/UserAdd", auth_user_add },
		{ "/etcdserverpb.Auth/UserGet", auth_user_get },
		{ "/etcdserverpb.Auth/UserList", auth_user_list },
		{ "/etcdserverpb.Auth/UserDelete", auth_user_delete },
		{ "/etcdserverpb.Auth/UserChangePassword", auth_user_change_password },
		{ "/etcdserverpb.Auth/UserGrantRole", auth_user_grant_role },
		{ "/etcdserverpb.Auth/UserRevokeRole", auth_user_revoke_role },
		{ "/etcdserverpb.Auth/RoleAdd", auth_role_add },
		{ "/etcdserverpb.Auth/RoleGet", auth_role_get },
		{ "/etcdserverpb.Auth/RoleList", auth_role_list },
		{ "/etcdserverpb.Auth/RoleDelete", auth_role_delete },
		{ "/etcdserverpb.Auth/RoleGrantPermission", auth_role_grant_permission },
		{ "/etcdserverpb.Auth/RoleRevokePermission", auth_role_revoke_permission },
	};
	struct auth_state *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return -ENOMEM;
	st->src.kind = src_kind;
	st->src.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (st->src.fd < 0) {
		rc = -errno;
		free(st);
		return rc;
	}
	pthread_mutex_init(&st->mu, NULL);
	pthread_cond_init(&st->cv, NULL);
	atomic_init(&st->refs, 1);
	s->auth = st;
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		rc = gw_handle_unary(s, methods[i].path, methods[i].fn);
		if (rc)
			return rc;
	}
	return 0;
}

void auth_service_free(struct gw_server *s)
{
	struct auth_state *st = s->auth;

	if (!st)
		return;
	s->auth = NULL;
	pthread_mutex_lock(&st->mu);
	st->stop = true;
	pthread_cond_signal(&st->cv);
	pthread_mutex_unlock(&st->mu);
	auth_state_put(st);
}
