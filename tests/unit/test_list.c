/*
 * test_list.c -- the intrusive list (base/list.h): pushes at both ends,
 * removal from the head, the middle and the tail, iteration that removes,
 * and random operations against an array kept as the reference order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/list.h"

typedef struct {
    int id;
    ordo_list_node_t ln;
} item_t;

#define ITEM(n) ORDO_LIST_ENTRY(n, item_t, ln)

/* The list holds exactly ids[0..n) in that order, and every invariant of
 * list.h holds (both directions, len, node->list). */
static void check_list(const ordo_list_t *l, const int *ids, size_t n)
{
    assert_int_equal(l->len, n);
    size_t i = 0;
    const ordo_list_node_t *prev = NULL;
    for (const ordo_list_node_t *x = l->head; x != NULL; x = x->next, i++) {
        assert_true(i < n);
        assert_int_equal(ITEM(x)->id, ids[i]);
        assert_ptr_equal(x->prev, prev);
        assert_ptr_equal(x->list, l);
        prev = x;
    }
    assert_int_equal(i, n);
    assert_ptr_equal(l->tail, prev);
    assert_true(ordo_list_empty(l) == (n == 0));
}

static void test_zero_is_empty(void **state)
{
    (void)state;
    ordo_list_t l = {0};
    item_t a = {.id = 1};
    check_list(&l, NULL, 0);
    assert_false(ordo_list_linked(&a.ln, NULL));
    assert_null(ordo_list_pop_front(&l));
}

static void test_push_and_remove(void **state)
{
    (void)state;
    ordo_list_t l = {0};
    item_t it[5];
    memset(it, 0, sizeof it);
    for (int i = 0; i < 5; i++)
        it[i].id = i;
    ordo_list_push_back(&l, &it[2].ln);
    ordo_list_push_back(&l, &it[3].ln);
    ordo_list_push_front(&l, &it[1].ln);
    ordo_list_push_front(&l, &it[0].ln);
    ordo_list_push_back(&l, &it[4].ln);
    check_list(&l, (int[]){0, 1, 2, 3, 4}, 5);
    assert_true(ordo_list_linked(&it[2].ln, &l));

    ordo_list_remove(&l, &it[2].ln); /* middle */
    assert_false(ordo_list_linked(&it[2].ln, NULL));
    check_list(&l, (int[]){0, 1, 3, 4}, 4);
    ordo_list_remove(&l, &it[0].ln); /* head */
    check_list(&l, (int[]){1, 3, 4}, 3);
    ordo_list_remove(&l, &it[4].ln); /* tail */
    check_list(&l, (int[]){1, 3}, 2);
    assert_ptr_equal(ordo_list_pop_front(&l), &it[1].ln);
    check_list(&l, (int[]){3}, 1);
    ordo_list_remove(&l, &it[3].ln); /* the only one */
    check_list(&l, NULL, 0);

    /* A removed node can join another list. */
    ordo_list_t m = {0};
    ordo_list_push_back(&m, &it[3].ln);
    check_list(&m, (int[]){3}, 1);
}

static void test_foreach_safe_removes(void **state)
{
    (void)state;
    ordo_list_t l = {0};
    item_t it[6];
    memset(it, 0, sizeof it);
    for (int i = 0; i < 6; i++) {
        it[i].id = i;
        ordo_list_push_back(&l, &it[i].ln);
    }
    ORDO_LIST_FOREACH_SAFE(n, next, &l)
        if (ITEM(n)->id % 2 == 0)
            ordo_list_remove(&l, n);
    check_list(&l, (int[]){1, 3, 5}, 3);
    int sum = 0;
    ORDO_LIST_FOREACH(n, &l)
        sum += ITEM(n)->id;
    assert_int_equal(sum, 9);
}

/* Random pushes at both ends and removals anywhere, against an array. */
static void test_random_against_reference(void **state)
{
    (void)state;
    enum { N = 64, OPS = 20000 };
    item_t it[N];
    int ref[N];
    size_t nref = 0;
    ordo_list_t l = {0};
    memset(it, 0, sizeof it);
    for (int i = 0; i < N; i++)
        it[i].id = i;
    srand(7);
    for (int op = 0; op < OPS; op++) {
        int i = rand() % N;
        if (!ordo_list_linked(&it[i].ln, NULL)) {
            if (rand() % 2) {
                ordo_list_push_back(&l, &it[i].ln);
                ref[nref++] = i;
            } else {
                ordo_list_push_front(&l, &it[i].ln);
                memmove(ref + 1, ref, nref * sizeof ref[0]);
                ref[0] = i;
                nref++;
            }
        } else {
            ordo_list_remove(&l, &it[i].ln);
            size_t k = 0;
            while (ref[k] != i)
                k++;
            memmove(ref + k, ref + k + 1, (nref - k - 1) * sizeof ref[0]);
            nref--;
        }
        if (op % 97 == 0)
            check_list(&l, ref, nref);
    }
    check_list(&l, ref, nref);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_is_empty),
        cmocka_unit_test(test_push_and_remove),
        cmocka_unit_test(test_foreach_safe_removes),
        cmocka_unit_test(test_random_against_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
