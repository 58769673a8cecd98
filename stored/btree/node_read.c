/*
 * In-memory nodes, the half that reads: a lookup in a write txn's node
 * (gets through a write txn see its changes) and freeing a txn's nodes
 * when it ends. Materializing, changing and writing nodes is node_write.c.
 */
#include "stored/alloc.h"
#include "stored/btree/btree_int.h"

const struct bt_inode *bt_node_lookup(const struct bt_node *n, const uint8_t *key,
				      uint32_t ksize)
{
	bool exact;
	uint32_t i = node_find(n, key, ksize, &exact);
	return exact ? &n->inodes[i] : NULL;
}

void bt_node_release_all(struct btree_txn *t)
{
	for (struct bt_node *n = t->all_nodes; n; n = n->all_next) {
		stored_free(n->inodes);
		stored_free(n->children);
	}
	t->all_nodes = NULL;
}
