/*
 * Fuzz target: the membership decoders over arbitrary bytes (committed
 * entries come from the WAL and from peers). The first byte picks what
 * the rest is: a member's JSON (decoded, and on success encoded and
 * decoded again to a member of the same id, role and URL counts), a conf change or a normal entry
 * (applied to a membership holding two members; a refused or undecodable
 * change leaves it as it was).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/member_json.h"
#include "cluster/membership.h"

static void json_round_trip(const uint8_t *data, size_t size)
{
	struct member_info m = { 0 }, again = { 0 };
	char *text;
	size_t len;

	if (member_json_decode(data, size, &m) != 0)
		return;
	if (member_json_encode(&m, &text, &len) != 0)
		abort();
	/* texts may change (invalid UTF-8 becomes U+FFFD), the shape not */
	if (member_json_decode(text, len, &again) != 0 || again.id != m.id ||
	    again.is_learner != m.is_learner || again.n_peer_urls != m.n_peer_urls ||
	    again.n_client_urls != m.n_client_urls)
		abort();
	free(text);
	member_info_clear(&m);
	member_info_clear(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char *p1[] = { "http://127.0.0.1:2380" }, *p2[] = { "http://127.0.0.1:2381" };
	struct member_info a = { .id = 1, .name = "a", .n_peer_urls = 1, .peer_urls = p1 };
	struct member_info b = { .id = 2, .name = "b", .n_peer_urls = 1, .peer_urls = p2 };
	struct membership ms;
	struct membership_result r;

	if (size == 0)
		return 0;
	if (data[0] % 3 == 0) {
		json_round_trip(data + 1, size - 1);
		return 0;
	}
	membership_init(&ms);
	if (membership_put(&ms, &a) || membership_put(&ms, &b))
		abort();
	int rc = membership_apply(&ms, data[0] % 3 == 1 ? 1 : 0, data + 1, size - 1, &r);
	if (rc != 0 || r.change == MEMBERSHIP_REFUSED || r.change == MEMBERSHIP_NONE ||
	    r.change == MEMBERSHIP_IGNORED) {
		if (ms.count != 2 || ms.n_removed != 0 || ms.has_version)
			abort();
	}
	membership_free(&ms);
	return 0;
}
