/*
 * Unit tests for gatewayd/services/auth.c: a gateway in the test's
 * process, its proposals taken off the ring to raftd.
 *  - a management RPC is proposed as the InternalRaftRequest field etcd
 *    uses, its bytes as the client sent them;
 *  - UserAdd and UserChangePassword are proposed only once the worker
 *    hashed the password: hashedPassword is a bcrypt hash of it at
 *    --bcrypt-cost (a client's own hashedPassword replaced), and the
 *    password is still sent; a no_password UserAdd is proposed as it came;
 *  - the loop keeps serving while a hash of a high cost runs, and a call
 *    cancelled meanwhile proposes nothing;
 *  - stored's answer goes back to the client.
 */
#include "gw_harness.h"

#include "auth/bcrypt.h"
#include "base/clock/clock.h"
#include "etcdserverpb/raft_internal.pb-c.h"

#define MAX_REQ (64u * 1024u)

/* The InternalRaftRequest of a proposal (freed by the caller). */
static Etcdserverpb__InternalRaftRequest *proposal_irr(const struct rec *r,
						       struct msg_origin *o)
{
	struct msg_propose mp;
	const uint8_t *data = r->data + sizeof(mp);

	CHECK(r->type == MSG_PROPOSE && r->len >= sizeof(mp));
	memcpy(&mp, r->data, sizeof(mp));
	*o = mp.origin;
	Etcdserverpb__InternalRaftRequest *irr =
		etcdserverpb__internal_raft_request__unpack(NULL, mp.data_len, data);
	CHECK(irr != NULL);
	return irr;
}

static void answer_with(const struct msg_origin *o, const ProtobufCMessage *m)
{
	uint8_t buf[256];
	struct msg_result h = { .origin = *o, .index = 9, .revision = 1 };

	h.body_len = (uint32_t)protobuf_c_message_pack(m, buf + sizeof(h));
	memcpy(buf, &h, sizeof(h));
	CHECK_EQ(ring_push(shm_slot_ring(harn, slot.index, SHM_SLOT_FROM_STORED), MSG_RESULT, buf,
			   (uint32_t)(sizeof(h) + h.body_len)),
		 0);
}

static void cancel(struct tc_stream *s)
{
	CHECK_EQ(nghttp2_submit_rst_stream(tc.session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL), 0);
	spin(2);
}

static void test_plain(void)
{
	Etcdserverpb__AuthRoleAddRequest ra = ETCDSERVERPB__AUTH_ROLE_ADD_REQUEST__INIT;
	Etcdserverpb__AuthRoleAddResponse resp = ETCDSERVERPB__AUTH_ROLE_ADD_RESPONSE__INIT;
	Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	struct msg_origin o;
	size_t len;

	ra.name = "r1";
	struct tc_stream *s = call("/etcdserverpb.Auth/RoleAdd", &ra.base);
	struct rec r = one_proposal();
	Etcdserverpb__InternalRaftRequest *irr = proposal_irr(&r, &o);
	CHECK(irr->auth_role_add && strcmp(irr->auth_role_add->name, "r1") == 0);
	CHECK(irr->header && irr->header->id == o.request_id);
	etcdserverpb__internal_raft_request__free_unpacked(irr, NULL);
	free_recs(&r, 1);
	h.revision = 1;
	resp.header = &h;
	answer_with(&o, &resp.base);
	const uint8_t *m = answer(s, &len);
	Etcdserverpb__AuthRoleAddResponse *got =
		etcdserverpb__auth_role_add_response__unpack(NULL, len, m);
	CHECK(got && got->header && got->header->revision == 1);
	etcdserverpb__auth_role_add_response__free_unpacked(got, NULL);
}

static void test_hashed(void)
{
	Etcdserverpb__AuthUserAddRequest ua = ETCDSERVERPB__AUTH_USER_ADD_REQUEST__INIT;
	Etcdserverpb__AuthUserChangePasswordRequest cp =
		ETCDSERVERPB__AUTH_USER_CHANGE_PASSWORD_REQUEST__INIT;
	Authpb__UserAddOptions opts = AUTHPB__USER_ADD_OPTIONS__INIT;
	struct msg_origin o;

	ua.name = "alice";
	ua.password = "s3cret";
	ua.hashedpassword = "$2a$04$not.the.hash.of.anything.the.client.can.choose.xxxxxx";
	struct tc_stream *s = call("/etcdserverpb.Auth/UserAdd", &ua.base);
	struct rec r = one_proposal();
	Etcdserverpb__InternalRaftRequest *irr = proposal_irr(&r, &o);
	const Etcdserverpb__AuthUserAddRequest *p = irr->auth_user_add;
	CHECK(p && strcmp(p->name, "alice") == 0);
	CHECK(strcmp(p->password, "s3cret") == 0); /* for etcd 3.4 members */
	CHECK(strlen(p->hashedpassword) == BCRYPT_HASH_LEN);
	CHECK(strncmp(p->hashedpassword, "$2a$05$", 7) == 0); /* --bcrypt-cost 5 */
	CHECK(bcrypt_verify("s3cret", 6, p->hashedpassword, BCRYPT_HASH_LEN));
	etcdserverpb__internal_raft_request__free_unpacked(irr, NULL);
	free_recs(&r, 1);
	{
		Etcdserverpb__AuthUserAddResponse resp = ETCDSERVERPB__AUTH_USER_ADD_RESPONSE__INIT;
		size_t len;
		answer_with(&o, &resp.base);
		CHECK(answer(s, &len) != NULL);
	}

	cp.name = "alice";
	cp.password = "other";
	s = call("/etcdserverpb.Auth/UserChangePassword", &cp.base);
	r = one_proposal();
	irr = proposal_irr(&r, &o);
	CHECK(irr->auth_user_change_password);
	CHECK(strcmp(irr->auth_user_change_password->password, "other") == 0);
	CHECK(bcrypt_verify("other", 5, irr->auth_user_change_password->hashedpassword,
			    strlen(irr->auth_user_change_password->hashedpassword)));
	etcdserverpb__internal_raft_request__free_unpacked(irr, NULL);
	free_recs(&r, 1);
	cancel(s);

	/* no password: nothing to hash */
	ua.name = "bob";
	ua.password = "";
	ua.hashedpassword = "";
	opts.no_password = true;
	ua.options = &opts;
	s = call("/etcdserverpb.Auth/UserAdd", &ua.base);
	r = one_proposal();
	irr = proposal_irr(&r, &o);
	CHECK(irr->auth_user_add && irr->auth_user_add->options &&
	      irr->auth_user_add->options->no_password);
	CHECK(*irr->auth_user_add->hashedpassword == '\0');
	etcdserverpb__internal_raft_request__free_unpacked(irr, NULL);
	free_recs(&r, 1);
	cancel(s);
}

/* A hash of a high cost runs on the worker: the loop answers meanwhile,
 * and the call cancelled before it ends proposes nothing. */
static void test_off_the_loop(void)
{
	Etcdserverpb__AuthUserAddRequest ua = ETCDSERVERPB__AUTH_USER_ADD_REQUEST__INIT;
	Etcdserverpb__AuthRoleGetRequest rg = ETCDSERVERPB__AUTH_ROLE_GET_REQUEST__INIT;
	struct msg_origin o;
	struct rec v[4];

	cfg.bcrypt_cost = 14; /* about a second */
	ua.name = "slow";
	ua.password = "pw";
	struct tc_stream *slow = call("/etcdserverpb.Auth/UserAdd", &ua.base);
	rg.role = "r1";
	int64_t t0 = clock_now_ns();
	struct tc_stream *s = call("/etcdserverpb.Auth/RoleGet", &rg.base);
	struct rec r = one_proposal();
	/* the RoleGet went out while the hash ran */
	CHECK(clock_now_ns() - t0 < 300000000);
	Etcdserverpb__InternalRaftRequest *irr = proposal_irr(&r, &o);
	CHECK(irr->auth_role_get != NULL);
	etcdserverpb__internal_raft_request__free_unpacked(irr, NULL);
	free_recs(&r, 1);
	cancel(s);
	cancel(slow);
	/* the next password waits behind the slow one (one worker, in
	 * order): its proposal is the first and only one to come */
	cfg.bcrypt_cost = 4;
	ua.name = "next";
	s = call("/etcdserverpb.Auth/UserAdd", &ua.base);
	int64_t end = clock_now_ns() + 20000000000ll;
	int n = 0;
	while (n == 0 && clock_now_ns() < end) {
		spin(1);
		n = take_to_raftd(v, 4);
		if (!n)
			usleep(5000);
	}
	CHECK_EQ(n, 1);
	irr = proposal_irr(&v[0], &o);
	CHECK(irr->auth_user_add && strcmp(irr->auth_user_add->name, "next") == 0);
	CHECK(strncmp(irr->auth_user_add->hashedpassword, "$2a$04$", 7) == 0);
	etcdserverpb__internal_raft_request__free_unpacked(irr, NULL);
	free_recs(v, n);
	cancel(s);
	cfg.bcrypt_cost = 5;
}

static void tune(struct cetcd_config *c)
{
	c->bcrypt_cost = 5;
}

int main(void)
{
	char *flags[] = { "--initial-advertise-peer-urls", "http://127.0.0.1:23800",
			  "--initial-cluster", "gw=http://127.0.0.1:23800",
			  "--listen-client-urls", "http://127.0.0.1:23790",
			  "--advertise-client-urls", "http://127.0.0.1:23790" };
	struct gw_params p = { .request_timeout_ns = 5000000000ll, .pending_cap = 8 };

	gwh_start(&p, MAX_REQ, flags, 8, tune);
	gwh_hello();
	test_plain();
	test_hashed();
	test_off_the_loop();
	gwh_stop();
	printf("gatewayd/services/test_auth: ok\n");
	return 0;
}
