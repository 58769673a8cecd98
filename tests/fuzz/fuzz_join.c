/*
 * Fuzz target: what a member joining a running cluster decodes from its
 * peers' answers. The first byte picks what the rest is: a GET /members
 * body (member_json_decode_array; on success every member is encoded and
 * decoded again to the same id, role and URL counts), or a GET /version
 * body (join_parse_versions, and the version found through
 * join_parse_semver, whose parts must print back to a prefix of it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raftd/join.h"
#include "cluster/member_json.h"

static void members(const uint8_t *data, size_t size)
{
	struct member_info *v = NULL;
	size_t n = 0;

	if (member_json_decode_array(data, size, &v, &n) != 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct member_info again = { 0 };
		char *text;
		size_t len;
		if (member_json_encode(&v[i], &text, &len) != 0)
			abort();
		if (member_json_decode(text, len, &again) != 0 || again.id != v[i].id ||
		    again.is_learner != v[i].is_learner || again.n_peer_urls != v[i].n_peer_urls ||
		    again.n_client_urls != v[i].n_client_urls)
			abort();
		free(text);
		member_info_clear(&again);
		member_info_clear(&v[i]);
	}
	free(v);
}

static void versions(const uint8_t *data, size_t size)
{
	char ver[64], back[64];
	unsigned v[3];

	if (join_parse_versions((const char *)data, size, ver, sizeof(ver)) != 0)
		return;
	if (strlen(ver) >= sizeof(ver))
		abort();
	if (join_parse_semver(ver, v) != 0)
		return;
	snprintf(back, sizeof(back), "%u.%u.%u", v[0], v[1], v[2]);
	if (strncmp(ver, back, strlen(back)) != 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] % 2 == 0)
		members(data + 1, size - 1);
	else
		versions(data + 1, size - 1);
	return 0;
}
