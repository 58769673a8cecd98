/*
 * Cursors, the half that writes: the leaf under a write txn's cursor
 * materialized for change (node_write.c), which puts and deletes go through.
 * Moving cursors and reading under them is cursor_read.c.
 */
#include <errno.h>

#include "stored/btree/btree_int.h"

static int cursor_node(struct btree_cursor *c, struct bt_node **out)
{
	struct btree_bucket *b = c->bucket;
	struct btree_cursor_frame *top = cursor_top(c);
	if (top->node && top->leaf) {
		*out = top->node;
		return 0;
	}
	struct bt_node *n = c->stack[0].node;
	int rc;
	if (!n) {
		rc = bt_node_get(b, c->stack[0].pgid, NULL, &n);
		if (rc < 0)
			return rc;
	}
	for (uint32_t i = 0; i + 1 < c->depth; i++) {
		uint32_t idx = c->stack[i].index;
		if (n->leaf || idx >= n->ninodes)
			return bt_error(-EUCLEAN, "stored: db %s: cursor path does not match the tree",
					b->txn->map->path);
		rc = bt_node_get(b, n->inodes[idx].pgid, n, &n);
		if (rc < 0)
			return rc;
	}
	if (!n->leaf)
		return bt_error(-EUCLEAN, "stored: db %s: cursor ends on a branch", b->txn->map->path);
	*out = n;
	return 0;
}

int bt_cursor_node(struct btree_cursor *c, struct bt_node **out)
{
	int rc = cursor_node(c, out);
	if (rc == 0)
		bt_cursor_set_finger(c, *out);
	return rc;
}
