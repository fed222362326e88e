/* Window creation and the window object (MPI-4.1 §12.2, §12.7): every flavour — MPI_Win_create,
 * MPI_Win_allocate, MPI_Win_allocate_shared (contiguous and with alloc_shared_noncontig),
 * MPI_Win_create_dynamic with attach/detach — in int and _c forms, with size 0 on every third
 * rank; the attributes (WIN_BASE, WIN_SIZE, WIN_DISP_UNIT, WIN_CREATE_FLAVOR, WIN_MODEL =
 * MPI_WIN_UNIFIED), names, info, MPI_Win_get_group, user keyvals (delete callbacks at
 * MPI_Win_delete_attr and MPI_Win_free), MPI_Win_shared_query (rank r+1's base right after rank
 * r's when contiguous; MPI_PROC_NULL: the first rank with memory), error handlers
 * (MPI_ERRORS_RETURN, a program's handler counting its calls, MPI_Win_call_errhandler); each
 * window used by a Put ring under fences; 200 create/free rounds reusing handles. Shared windows
 * are made on the node's communicator (MPI_Comm_split_type SHARED). Prints "OK win_create <rank>". */
#include "check.h"

#include <stdint.h>

#define WINTS 16
#define ROUNDS 200

static int rank, size;
static int deletes, delete_value;
static int handler_calls, handler_code;
static MPI_Win handler_win;

static int del_fn(MPI_Win win, int keyval, void *value, void *extra) {
    (void)win;
    (void)keyval;
    deletes++;
    delete_value = (int)(intptr_t)value;
    CHECK(extra == (void *)&deletes, "extra state %p", extra);
    return MPI_SUCCESS;
}

static void on_error(MPI_Win *win, int *code, ...) {
    handler_calls++;
    handler_win = *win;
    handler_code = *code;
}

/* Bytes of window memory rank r offers: none on every third rank. */
static MPI_Aint bytes_of(int r) { return r % 3 == 2 ? 0 : (MPI_Aint)(WINTS + r) * (MPI_Aint)sizeof(int); }

static void check_attrs(MPI_Win win, void *base, MPI_Aint bytes, int unit, int flavor) {
    void *b = NULL;
    MPI_Aint *sz = NULL;
    int *du = NULL, *fl = NULL, *model = NULL, flag = 0;
    OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &b, &flag));
    CHECK(flag && (bytes == 0 || b == base), "flavor %d: WIN_BASE %p, expected %p", flavor, b, base);
    OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &sz, &flag));
    CHECK(flag && *sz == bytes, "WIN_SIZE %ld, expected %ld", (long)*sz, (long)bytes);
    OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &du, &flag));
    CHECK(flag && *du == unit, "WIN_DISP_UNIT %d, expected %d", *du, unit);
    OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &fl, &flag));
    CHECK(flag && *fl == flavor, "WIN_CREATE_FLAVOR %d, expected %d", *fl, flavor);
    OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag));
    CHECK(flag && *model == MPI_WIN_UNIFIED, "WIN_MODEL %d", *model);
}

/* Names, group, info, keyvals, error handlers on a window of COMM. */
static void check_object(MPI_Win win, MPI_Comm comm) {
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1, res = -1;
    OK(MPI_Win_get_name(win, name, &len));
    CHECK(len == 0 && name[0] == 0, "default name '%s'", name);
    OK(MPI_Win_set_name(win, "a window"));
    OK(MPI_Win_get_name(win, name, &len));
    CHECK(len == 8 && strcmp(name, "a window") == 0, "name '%s' (%d)", name, len);

    MPI_Group g, cg;
    OK(MPI_Win_get_group(win, &g));
    OK(MPI_Comm_group(comm, &cg));
    OK(MPI_Group_compare(g, cg, &res));
    CHECK(res == MPI_IDENT, "window group vs communicator group: %d", res);
    OK(MPI_Group_free(&g));
    OK(MPI_Group_free(&cg));

    MPI_Info info, got;
    int nkeys = -1;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "no_locks", "false"));
    OK(MPI_Win_set_info(win, info));
    OK(MPI_Info_free(&info));
    OK(MPI_Win_get_info(win, &got));
    CHECK(got != MPI_INFO_NULL, "Win_get_info gave MPI_INFO_NULL");
    OK(MPI_Info_get_nkeys(got, &nkeys));
    CHECK(nkeys >= 0, "nkeys %d", nkeys);
    OK(MPI_Info_free(&got));

    int key = MPI_KEYVAL_INVALID, flag = 0;
    void *val = NULL;
    OK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, del_fn, &key, &deletes));
    deletes = 0;
    OK(MPI_Win_set_attr(win, key, (void *)(intptr_t)41));
    OK(MPI_Win_set_attr(win, key, (void *)(intptr_t)42)); /* replaces: deletes 41 */
    CHECK(deletes == 1 && delete_value == 41, "replace: %d deletes, value %d", deletes, delete_value);
    OK(MPI_Win_get_attr(win, key, &val, &flag));
    CHECK(flag && (intptr_t)val == 42, "attribute %ld (flag %d)", (long)(intptr_t)val, flag);
    OK(MPI_Win_delete_attr(win, key));
    CHECK(deletes == 2 && delete_value == 42, "delete: %d deletes, value %d", deletes, delete_value);
    OK(MPI_Win_get_attr(win, key, &val, &flag));
    CHECK(!flag, "deleted attribute still there");
    OK(MPI_Win_set_attr(win, key, (void *)(intptr_t)43)); /* deleted at MPI_Win_free */
    OK(MPI_Win_free_keyval(&key));                        /* still in use by the window */
    CHECK(key == MPI_KEYVAL_INVALID, "keyval not reset");

    MPI_Errhandler eh, got_eh;
    OK(MPI_Win_get_errhandler(win, &got_eh));
    CHECK(got_eh == MPI_ERRORS_ARE_FATAL, "default window error handler");
    OK(MPI_Errhandler_free(&got_eh));
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Win_lock(MPI_LOCK_SHARED, 12345, 0, win), MPI_ERR_RANK);
    OK(MPI_Win_create_errhandler(on_error, &eh));
    OK(MPI_Win_set_errhandler(win, eh));
    OK(MPI_Errhandler_free(&eh));
    handler_calls = 0;
    int rc = MPI_Win_lock(MPI_LOCK_SHARED, 12345, 0, win);
    CHECK(class_of(rc) == MPI_ERR_RANK && handler_calls == 1 && handler_win == win &&
              class_of(handler_code) == MPI_ERR_RANK,
          "handler: rc %d, %d calls, code %d", rc, handler_calls, handler_code);
    OK(MPI_Win_call_errhandler(win, MPI_ERR_OTHER));
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER, "call_errhandler: %d calls, code %d",
          handler_calls, handler_code);
    OK(MPI_Win_get_errhandler(win, &got_eh));
    CHECK(got_eh != MPI_ERRHANDLER_NULL && got_eh != MPI_ERRORS_ARE_FATAL, "got the program's handler");
    OK(MPI_Errhandler_free(&got_eh));
}

/* A Put ring under fences: rank r writes r+100 into slot 0 of r+1 when r+1 has memory; DISPS[t] is
 * the target displacement of slot 0 (addresses for dynamic windows). */
static void ring(MPI_Win win, MPI_Comm comm, int *mine, const MPI_Aint *disps, int unit) {
    int me, n;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &n);
    int next = (me + 1) % n, prev = (me + n - 1) % n;
    int v = me + 100;
    /* The ring's ranks are ranks of COMM; sizes follow WORLD's ranks only on WORLD, so every
     * rank says whether it has memory. */
    int have = mine != NULL, *haves = xmalloc(sizeof(int) * (size_t)n);
    OK(MPI_Allgather(&have, 1, MPI_INT, haves, 1, MPI_INT, comm));
    if (have) mine[0] = -1;
    OK(MPI_Win_fence(0, win));
    if (haves[next]) OK(MPI_Put(&v, 1, MPI_INT, next, disps ? disps[next] : 0, 1, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    if (have) CHECK(mine[0] == prev + 100, "ring: slot 0 = %d, expected %d", mine[0], prev + 100);
    (void)unit;
    free(haves);
}

static void free_checked(MPI_Win *win) {
    deletes = 0;
    OK(MPI_Win_free(win));
    CHECK(*win == MPI_WIN_NULL, "Win_free did not reset the handle");
    CHECK(deletes == 1 && delete_value == 43, "at free: %d deletes, value %d", deletes, delete_value);
}

static void shared_windows(MPI_Comm node, int noncontig, int big) {
    int me, n;
    MPI_Comm_rank(node, &me);
    MPI_Comm_size(node, &n);
    MPI_Aint bytes = bytes_of(me);
    MPI_Info info = MPI_INFO_NULL;
    if (noncontig) {
        OK(MPI_Info_create(&info));
        OK(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
    }
    int *base = NULL;
    MPI_Win win;
    if (big)
        OK(MPI_Win_allocate_shared_c(bytes, (MPI_Aint)sizeof(int), info, node, &base, &win));
    else
        OK(MPI_Win_allocate_shared(bytes, (int)sizeof(int), info, node, &base, &win));
    if (info != MPI_INFO_NULL) OK(MPI_Info_free(&info));
    check_attrs(win, base, bytes, (int)sizeof(int), MPI_WIN_FLAVOR_SHARED);
    check_object(win, node);

    /* Every rank's memory through shared_query; writes by owners seen by all. */
    MPI_Aint *sizes = xmalloc(sizeof(MPI_Aint) * (size_t)n);
    OK(MPI_Allgather(&bytes, 1, MPI_AINT, sizes, 1, MPI_AINT, node));
    char **bases = xmalloc(sizeof(char *) * (size_t)n);
    int first = -1;
    char *next = NULL;
    for (int r = 0; r < n; r++) {
        MPI_Aint sz = -1;
        int du = -1;
        if (big) {
            MPI_Aint du_c = -1;
            OK(MPI_Win_shared_query_c(win, r, &sz, &du_c, &bases[r]));
            du = (int)du_c;
        } else {
            OK(MPI_Win_shared_query(win, r, &sz, &du, &bases[r]));
        }
        CHECK(sz == sizes[r] && du == (int)sizeof(int), "shared_query(%d): size %ld unit %d", r, (long)sz, du);
        if (r == me && bytes > 0) CHECK(bases[r] == (char *)base, "shared_query(self) base");
        if (first < 0 && sz > 0) first = r;
        /* Contiguous: each rank's memory right after that of the last rank before it with some. */
        if (!noncontig && sizes[r] > 0 && next != NULL)
            CHECK(bases[r] == next, "contiguous: base of %d at %p, expected %p", r, (void *)bases[r], (void *)next);
        if (sizes[r] > 0) next = bases[r] + sizes[r];
    }
    if (first >= 0) {
        MPI_Aint sz = -1;
        int du = -1;
        char *b = NULL;
        OK(MPI_Win_shared_query(win, MPI_PROC_NULL, &sz, &du, &b));
        CHECK(b == bases[first] && sz == sizes[first], "shared_query(PROC_NULL): %p, expected rank %d's", (void *)b,
              first);
    }
    OK(MPI_Win_lock_all(0, win));
    for (MPI_Aint i = 0; i < bytes / (MPI_Aint)sizeof(int); i++) base[i] = me * 1000 + (int)i;
    OK(MPI_Win_sync(win));
    OK(MPI_Barrier(node));
    OK(MPI_Win_sync(win));
    for (int r = 0; r < n; r++) {
        const int *p = (const int *)bases[r];
        for (MPI_Aint i = 0; i < sizes[r] / (MPI_Aint)sizeof(int); i++)
            CHECK(p[i] == r * 1000 + (int)i, "rank %d's int %ld through shared memory: %d", r, (long)i, p[i]);
    }
    OK(MPI_Win_unlock_all(win));
    ring(win, node, bytes ? base : NULL, NULL, (int)sizeof(int));
    free(sizes);
    free(bases);
    free_checked(&win);
}

static void dynamic_window(int big) {
    MPI_Win win;
    (void)big;
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_attrs(win, NULL, 0, 1, MPI_WIN_FLAVOR_DYNAMIC);
    check_object(win, MPI_COMM_WORLD);
    int *a = xmalloc(sizeof(int) * WINTS), *b = xmalloc(sizeof(int) * WINTS);
    OK(MPI_Win_attach(win, a, sizeof(int) * WINTS));
    OK(MPI_Win_attach(win, b, sizeof(int) * WINTS));
    MPI_Aint addr, *addrs = xmalloc(sizeof(MPI_Aint) * (size_t)size);
    OK(MPI_Get_address(b, &addr));
    OK(MPI_Allgather(&addr, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD));
    ring(win, MPI_COMM_WORLD, b, addrs, 1);
    OK(MPI_Get_address(a, &addr));
    OK(MPI_Allgather(&addr, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD));
    ring(win, MPI_COMM_WORLD, a, addrs, 1);
    OK(MPI_Win_detach(win, b));
    OK(MPI_Win_detach(win, a));
    free(addrs);
    free_checked(&win);
    free(a);
    free(b);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    MPI_Comm node;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));

    for (int big = 0; big < 2; big++) {
        /* MPI_Win_create over the program's memory. */
        MPI_Aint bytes = bytes_of(rank);
        int *mem = xmalloc((size_t)bytes), *base = NULL;
        MPI_Win win;
        if (big)
            OK(MPI_Win_create_c(mem, bytes, (MPI_Aint)sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        else
            OK(MPI_Win_create(mem, bytes, (int)sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        check_attrs(win, mem, bytes, (int)sizeof(int), MPI_WIN_FLAVOR_CREATE);
        check_object(win, MPI_COMM_WORLD);
        ring(win, MPI_COMM_WORLD, bytes ? mem : NULL, NULL, (int)sizeof(int));
        free_checked(&win);
        free(mem);

        /* MPI_Win_allocate: the library's memory; disp_unit 1. */
        if (big)
            OK(MPI_Win_allocate_c(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
        else
            OK(MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
        CHECK(bytes == 0 || base != NULL, "Win_allocate gave no memory");
        check_attrs(win, base, bytes, 1, MPI_WIN_FLAVOR_ALLOCATE);
        check_object(win, MPI_COMM_WORLD);
        ring(win, MPI_COMM_WORLD, bytes ? base : NULL, NULL, 1);
        free_checked(&win);

        shared_windows(node, 0, big);
        shared_windows(node, 1, big);
        dynamic_window(big);
    }

    /* 200 create/free rounds, each window used: handles come back. */
    MPI_Win seen[ROUNDS];
    int distinct = 0;
    for (int i = 0; i < ROUNDS; i++) {
        int *base = NULL;
        MPI_Win win;
        MPI_Aint bytes = bytes_of(rank);
        switch (i % 3) {
        case 0: OK(MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win)); break;
        case 1: OK(MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node, &base, &win)); break;
        default:
            base = xmalloc((size_t)bytes);
            OK(MPI_Win_create(base, bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        }
        int d = 0;
        while (d < distinct && seen[d] != win) d++;
        if (d == distinct) seen[distinct++] = win;
        ring(win, i % 3 == 1 ? node : MPI_COMM_WORLD, bytes ? base : NULL, NULL, 1);
        OK(MPI_Win_free(&win));
        if (i % 3 == 2) free(base);
    }
    CHECK(distinct <= 8, "%d distinct handles over %d create/free rounds", distinct, ROUNDS);

    OK(MPI_Comm_free(&node));
    OK(MPI_Finalize());
    printf("OK win_create %d\n", rank);
    return 0;
}
