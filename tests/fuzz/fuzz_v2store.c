/*
 * Fuzz target: the v2 store decoder (a snapshot's Data comes from a peer
 * and from .snap files). What decodes is encoded and decoded again to the
 * same membership: the same ids in the same roles with the same URL
 * counts, the same removed ids and version.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/membership.h"
#include "cluster/v2store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct membership m, again;
	char *text;
	size_t len;

	membership_init(&m);
	membership_init(&again);
	if (v2store_decode(data, size, &m) != 0) {
		if (m.count || m.n_removed || m.has_version)
			abort(); /* a refusal changes nothing */
		return 0;
	}
	if (v2store_encode(&m, &text, &len) != 0 || v2store_decode(text, len, &again) != 0)
		abort();
	if (again.count != m.count || again.n_removed != m.n_removed ||
	    again.has_version != m.has_version || again.version_major != m.version_major ||
	    again.version_minor != m.version_minor)
		abort();
	for (size_t i = 0; i < m.count; i++)
		if (again.v[i].id != m.v[i].id || again.v[i].is_learner != m.v[i].is_learner ||
		    again.v[i].n_peer_urls != m.v[i].n_peer_urls ||
		    again.v[i].n_client_urls != m.v[i].n_client_urls)
			abort();
	for (size_t i = 0; i < m.n_removed; i++)
		if (!membership_is_removed(&again, m.removed[i]))
			abort();
	free(text);
	membership_free(&m);
	membership_free(&again);
	return 0;
}
