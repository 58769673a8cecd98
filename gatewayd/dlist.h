/* An intrusive, circular, doubly-linked list.
 *
 * A struct dlist is both a list's head and the node an element embeds;
 * dlist_entry turns a node back into its element. A head links to
 * itself when the list is empty, so a list has no NULL ends and insert
 * and remove never test for the first or the last element.
 *
 * dlist_remove leaves the node linked to itself, as dlist_init does: a
 * second remove changes nothing, and dlist_empty on such a node says it
 * is on no list. A zeroed node (calloc) is on no list but not linked to
 * itself: init it before it is removed or tested.
 *
 * Single-threaded; nothing here allocates.
 */
#ifndef CETCD_GATEWAYD_DLIST_H
#define CETCD_GATEWAYD_DLIST_H

#include <stdbool.h>
#include <stddef.h>

struct dlist {
	struct dlist *prev, *next;
};

/* An empty list, or a node on no list. */
static inline void dlist_init(struct dlist *l)
{
	l->prev = l->next = l;
}

/* head has no element; for a node: it is on no list. */
static inline bool dlist_empty(const struct dlist *l)
{
	return l->next == l;
}

static inline void dlist_link_(struct dlist *n, struct dlist *prev, struct dlist *next)
{
	n->prev = prev;
	n->next = next;
	prev->next = n;
	next->prev = n;
}

/* Puts n first (a stack: the newest comes first in a walk). */
static inline void dlist_insert_head(struct dlist *head, struct dlist *n)
{
	dlist_link_(n, head, head->next);
}

/* Puts n last (a queue: the oldest comes first in a walk). */
static inline void dlist_insert_tail(struct dlist *head, struct dlist *n)
{
	dlist_link_(n, head->prev, head);
}

/* Takes n off its list, if it is on one. */
static inline void dlist_remove(struct dlist *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	dlist_init(n);
}

/* The first node of head, NULL when the list is empty. */
static inline struct dlist *dlist_first(const struct dlist *head)
{
	return head->next == head ? NULL : head->next;
}

/* The node after n on head's list, NULL after the last. */
static inline struct dlist *dlist_after(const struct dlist *head, const struct dlist *n)
{
	return n->next == head ? NULL : n->next;
}

static inline void *dlist_container_(struct dlist *n, size_t off)
{
	return n ? (char *)n - off : NULL;
}

/* The element of type whose field member is the node n; NULL for NULL. */
#define dlist_entry(n, type, member) ((type *)dlist_container_((n), offsetof(type, member)))

/* The element after pos (linked by its field member) on head, or NULL. */
#define dlist_next_entry_(pos, head, member)                                          \
	((pos) ? dlist_entry(dlist_after((head), &(pos)->member), __typeof__(*(pos)), \
			     member) :                                                \
		 NULL)

/* Walks head's elements first to last, pos pointing to each in turn
 * (member names their node); the body must not remove pos. */
#define dlist_for_each(pos, head, member)                                         \
	for ((pos) = dlist_entry(dlist_first(head), __typeof__(*(pos)), member); (pos); \
	     (pos) = dlist_next_entry_((pos), (head), member))

/* As dlist_for_each, but tmp holds the next one before the body
 * runs, so the body may remove or free pos, but not the one after it.
 * An element inserted at the head during the walk is not visited. */
#define dlist_for_each_safe(pos, tmp, head, member)                                  \
	for ((pos) = dlist_entry(dlist_first(head), __typeof__(*(pos)), member),    \
	    (tmp) = dlist_next_entry_((pos), (head), member);                        \
	     (pos); (pos) = (tmp), (tmp) = dlist_next_entry_((pos), (head), member))

#endif
