/*
 * Free pages, the half that reads: decoding a freelist page, which the
 * readers' check uses. The writer's free and pending pages are
 * freelist.c (see freelist.h).
 */
#include "stored/btree/freelist.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "stored/alloc.h"
#include "stored/btree/btree_int.h"
#include "stored/btree/page.h"

int freelist_decode(const uint8_t *page, size_t span, uint64_t hwm,
		    uint64_t **ids_out, size_t *n_out, char *why, size_t why_len)
{
	if (span < PAGE_HDR_SIZE) {
		snprintf(why, why_len, "is shorter than a page header");
		return -EUCLEAN;
	}
	uint64_t count = page_count(page);
	size_t first = 0;
	uint64_t room = (span - PAGE_HDR_SIZE) / 8;
	if (count == 0xFFFF) {
		if (room < 1) {
			snprintf(why, why_len, "has no room for its id count");
			return -EUCLEAN;
		}
		count = page_ld64(page + PAGE_HDR_SIZE);
		first = 1;
	}
	if (count > room - first || (first && room == 0)) {
		snprintf(why, why_len, "claims %llu ids but has room for %llu",
			 (unsigned long long)count, (unsigned long long)(room - first));
		return -EUCLEAN;
	}
	uint64_t *ids = stored_malloc((count ? count : 1) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	for (uint64_t i = 0; i < count; i++)
		ids[i] = page_ld64(page + PAGE_HDR_SIZE + (first + i) * 8);
	qsort(ids, count, sizeof(*ids), cmp_asc);
	for (uint64_t i = 0; i < count; i++) {
		if (ids[i] < 2 || ids[i] >= hwm) {
			snprintf(why, why_len, "lists page %llu, outside [2, %llu)",
				 (unsigned long long)ids[i], (unsigned long long)hwm);
			stored_free(ids);
			return -EUCLEAN;
		}
		if (i > 0 && ids[i] == ids[i - 1]) {
			snprintf(why, why_len, "lists page %llu twice",
				 (unsigned long long)ids[i]);
			stored_free(ids);
			return -EUCLEAN;
		}
	}
	*ids_out = ids;
	*n_out = count;
	return 0;
}
