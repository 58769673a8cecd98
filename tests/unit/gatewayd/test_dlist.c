/*
 * Unit tests for gatewayd/dlist.h: insertion at the head and at the
 * tail, removal of the first, a middle and the last element, removal
 * during a walk, a second remove, and a randomized run against an array
 * that holds the order the list must have.
 */
#include "shm_testlib.h"

#include "gatewayd/dlist.h"

#define NITEMS 64

struct item {
	int id;
	struct dlist node;
};

static struct item items[NITEMS];

/* The model: the ids in list order. */
static int model[NITEMS];
static int nmodel;

static void model_insert(int at, int id)
{
	memmove(&model[at + 1], &model[at], (size_t)(nmodel - at) * sizeof(model[0]));
	model[at] = id;
	nmodel++;
}

static void model_remove(int id)
{
	for (int i = 0; i < nmodel; i++) {
		if (model[i] == id) {
			memmove(&model[i], &model[i + 1], (size_t)(nmodel - i - 1) * sizeof(model[0]));
			nmodel--;
			return;
		}
	}
	CHECK(!"id not in the model");
}

static bool model_has(int id)
{
	for (int i = 0; i < nmodel; i++)
		if (model[i] == id)
			return true;
	return false;
}

/* The list holds exactly the model's ids in its order, both ways round,
 * and every item off the list is linked to itself. */
static void check_list(const struct dlist *head)
{
	struct item *it, *next;
	const struct dlist *n;
	int i = 0;

	dlist_for_each_safe(it, next, head, node) {
		CHECK(i < nmodel);
		CHECK_EQ(it->id, model[i]);
		i++;
	}
	CHECK_EQ(i, nmodel);
	i = 0;
	dlist_for_each(it, head, node) {
		CHECK(i < nmodel);
		CHECK_EQ(it->id, model[i]);
		i++;
	}
	CHECK_EQ(i, nmodel);
	for (n = head->prev; n != head; n = n->prev) {
		CHECK(i > 0);
		CHECK_EQ(dlist_entry((struct dlist *)n, struct item, node)->id, model[--i]);
	}
	CHECK_EQ(i, 0);
	CHECK_EQ(dlist_empty(head), nmodel == 0);
	it = dlist_entry(dlist_first(head), struct item, node);
	CHECK(nmodel ? it && it->id == model[0] : it == NULL);
	for (int id = 0; id < NITEMS; id++) {
		struct dlist *nd = &items[id].node;
		CHECK_EQ(dlist_empty(nd), !model_has(id));
		if (dlist_empty(nd))
			CHECK(nd->prev == nd && nd->next == nd);
	}
}

static void reset(struct dlist *head)
{
	dlist_init(head);
	nmodel = 0;
	for (int id = 0; id < NITEMS; id++) {
		items[id].id = id;
		dlist_init(&items[id].node);
	}
}

static void test_order(void)
{
	struct dlist head;

	reset(&head);
	check_list(&head);
	/* head inserts walk newest first, tail inserts oldest first */
	dlist_insert_tail(&head, &items[1].node);
	model_insert(0, 1);
	dlist_insert_tail(&head, &items[2].node);
	model_insert(1, 2);
	dlist_insert_head(&head, &items[0].node);
	model_insert(0, 0);
	dlist_insert_head(&head, &items[5].node);
	model_insert(0, 5);
	dlist_insert_tail(&head, &items[3].node);
	model_insert(4, 3);
	check_list(&head);
	static const int want[] = { 5, 0, 1, 2, 3 };
	for (int i = 0; i < 5; i++)
		CHECK_EQ(model[i], want[i]);

	/* the first, a middle one, the last */
	dlist_remove(&items[5].node);
	model_remove(5);
	check_list(&head);
	dlist_remove(&items[1].node);
	model_remove(1);
	check_list(&head);
	dlist_remove(&items[3].node);
	model_remove(3);
	check_list(&head);

	/* a second remove changes nothing */
	dlist_remove(&items[3].node);
	dlist_remove(&items[1].node);
	check_list(&head);

	dlist_remove(&items[0].node);
	model_remove(0);
	dlist_remove(&items[2].node);
	model_remove(2);
	check_list(&head);
	CHECK(dlist_empty(&head));
	CHECK(head.next == &head && head.prev == &head);
}

/* Removal of the element being visited, of every other one, and of all. */
static void test_walk_remove(void)
{
	struct dlist head;
	struct item *it, *next;
	int seen;

	reset(&head);
	for (int id = 0; id < 10; id++) {
		dlist_insert_tail(&head, &items[id].node);
		model_insert(nmodel, id);
	}
	seen = 0;
	dlist_for_each_safe(it, next, &head, node) {
		CHECK_EQ(it->id, seen);
		seen++;
		if (it->id % 2 == 0) {
			dlist_remove(&it->node);
			model_remove(it->id);
		}
	}
	CHECK_EQ(seen, 10);
	check_list(&head);

	/* an element put first during a walk is not visited */
	seen = 0;
	dlist_for_each_safe(it, next, &head, node) {
		CHECK(it->id != 0);
		seen++;
		if (seen == 2) {
			dlist_insert_head(&head, &items[0].node);
			model_insert(0, 0);
		}
	}
	CHECK_EQ(seen, 5);
	check_list(&head);

	dlist_for_each_safe(it, next, &head, node) {
		dlist_remove(&it->node);
		model_remove(it->id);
	}
	check_list(&head);
	CHECK(dlist_empty(&head));
	seen = 0;
	dlist_for_each_safe(it, next, &head, node)
		seen++;
	CHECK_EQ(seen, 0);
}

/* Random inserts at either end, removes of items on or off the list,
 * and walks that remove some, against the model. */
static void test_model(void)
{
	struct dlist head;
	uint64_t seed = 20240611;

	reset(&head);
	for (int step = 0; step < 5000; step++) {
		seed = test_mix(seed + 1);
		int op = (int)(seed % 8);
		int id = (int)((seed >> 8) % NITEMS);
		struct item *it = &items[id], *next;

		if (op < 3) {
			if (model_has(id))
				continue;
			if (op == 0) {
				dlist_insert_head(&head, &it->node);
				model_insert(0, id);
			} else {
				dlist_insert_tail(&head, &it->node);
				model_insert(nmodel, id);
			}
		} else if (op < 6) {
			/* on the list or not: a remove of one off it is harmless */
			dlist_remove(&it->node);
			if (model_has(id))
				model_remove(id);
		} else if (op == 6) {
			uint64_t pick = seed >> 20;
			dlist_for_each_safe(it, next, &head, node) {
				pick = test_mix(pick);
				if (pick % 4 == 0) {
					dlist_remove(&it->node);
					model_remove(it->id);
				}
			}
		} else if (nmodel) {
			/* the first element */
			it = dlist_entry(dlist_first(&head), struct item, node);
			CHECK(it != NULL);
			CHECK_EQ(it->id, model[0]);
			dlist_remove(&it->node);
			model_remove(it->id);
		}
		check_list(&head);
	}
	/* empty once every element is gone */
	for (int id = 0; id < NITEMS; id++) {
		dlist_remove(&items[id].node);
		if (model_has(id))
			model_remove(id);
	}
	check_list(&head);
	CHECK(dlist_empty(&head));
	CHECK(dlist_first(&head) == NULL);
}

int main(void)
{
	test_order();
	test_walk_remove();
	test_model();
	printf("test_dlist: ok\n");
	return 0;
}
