/* One-sided communication, a smoke test of every window flavour on one node: Win_allocate,
 * Win_create, Win_allocate_shared (contiguous and not; direct load/store through
 * Win_shared_query), Win_create_dynamic (attach, detach); Put/Get/Accumulate/Get_accumulate/
 * Fetch_and_op/Compare_and_swap/Rput/Rget under fence, PSCW, lock and lock_all; a strided type on
 * either side; the predefined attributes, names, info; error classes (RMA_SYNC, RMA_RANGE,
 * RMA_FLAVOR, RMA_ATTACH, LOCKTYPE, WIN, SIZE, DISP, OP, TYPE). Prints "OK win_smoke <rank>". */
#include "check.h"

#include <stdint.h>

static int rank, size;

/* Fence epoch: every rank puts into its right neighbour, gets from its left one, adds to rank 0. */
static void fence_round(MPI_Win win, int *mem, int n) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int i = 0; i < n; i++) mem[i] = -1;
    OK(MPI_Win_fence(0, win));
    int mine = 100 + rank, got = -7, one = 1;
    OK(MPI_Put(&mine, 1, MPI_INT, right, rank, 1, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    CHECK(mem[left] == 100 + left, "put from the left: %d", mem[left]);
    OK(MPI_Get(&got, 1, MPI_INT, left, left == 0 ? size - 1 : left - 1, 1, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    int lefts_left = (left + size - 1) % size;
    CHECK(got == 100 + lefts_left, "get from the left: %d", got);
    if (rank == 0) mem[n - 1] = 0;
    OK(MPI_Win_fence(0, win));
    OK(MPI_Accumulate(&one, 1, MPI_INT, 0, n - 1, 1, MPI_INT, MPI_SUM, win));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    if (rank == 0) CHECK(mem[n - 1] == size, "accumulated %d", mem[n - 1]);
}

/* Passive target: a counter at rank 0 incremented by everyone with Fetch_and_op, a CAS mutex. */
static void passive_round(MPI_Win win, int64_t *mem) {
    if (rank == 0) mem[0] = mem[1] = mem[2] = mem[3] = 0;
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int64_t one = 1, old = 0;
    OK(MPI_Win_lock_all(0, win));
    for (int i = 0; i < 200; i++) {
        OK(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 0, MPI_SUM, win));
        CHECK(old >= 0 && old < 200 * size, "fetched %lld", (long long)old);
    }
    OK(MPI_Win_flush_all(win));
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    int64_t total = 0;
    OK(MPI_Get(&total, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win));
    OK(MPI_Win_unlock(0, win));
    CHECK(total == 200 * size, "counter %lld", (long long)total);
    /* A mutex by CAS guarding a counter (each attempt its own shared epoch), then a counter
     * guarded by the exclusive lock itself: 50 increments each, none lost. */
    for (int i = 0; i < 50; i++) {
        int64_t zero = 0, me = rank + 1, prev = -1, c = 0;
        do {
            OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
            OK(MPI_Compare_and_swap(&me, &zero, &prev, MPI_INT64_T, 0, 1, win));
            OK(MPI_Win_unlock(0, win));
        } while (prev != 0);
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        OK(MPI_Get(&c, 1, MPI_INT64_T, 0, 2, 1, MPI_INT64_T, win));
        OK(MPI_Win_flush(0, win));
        c++;
        OK(MPI_Put(&c, 1, MPI_INT64_T, 0, 2, 1, MPI_INT64_T, win));
        OK(MPI_Win_flush(0, win));
        OK(MPI_Accumulate(&zero, 1, MPI_INT64_T, 0, 1, 1, MPI_INT64_T, MPI_REPLACE, win));
        OK(MPI_Win_unlock(0, win));
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        OK(MPI_Get(&c, 1, MPI_INT64_T, 0, 3, 1, MPI_INT64_T, win));
        OK(MPI_Win_flush(0, win));
        c++;
        OK(MPI_Put(&c, 1, MPI_INT64_T, 0, 3, 1, MPI_INT64_T, win));
        OK(MPI_Win_unlock(0, win));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) CHECK(mem[2] == 50 * size && mem[3] == 50 * size, "guarded counters %lld %lld", (long long)mem[2], (long long)mem[3]);
}

static void attributes(MPI_Win win, void *base, MPI_Aint bytes, int disp, int flavor) {
    void *v;
    int flag;
    OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &v, &flag));
    CHECK(flag && v == base, "base %p %p", v, base);
    OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &v, &flag));
    CHECK(flag && *(MPI_Aint *)v == bytes, "size");
    OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &v, &flag));
    CHECK(flag && *(int *)v == disp, "disp unit");
    OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &v, &flag));
    CHECK(flag && *(int *)v == flavor, "flavor %d", *(int *)v);
    OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &v, &flag));
    CHECK(flag && *(int *)v == MPI_WIN_UNIFIED, "model");
    MPI_Group g, wg;
    int cmp;
    OK(MPI_Win_get_group(win, &g));
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    OK(MPI_Group_compare(g, wg, &cmp));
    CHECK(cmp == MPI_IDENT, "group");
    OK(MPI_Group_free(&g));
    OK(MPI_Group_free(&wg));
}

static int deleted;
static int on_delete(MPI_Win w, int k, void *v, void *extra) {
    (void)w, (void)k, (void)extra;
    deleted += *(int *)v;
    return MPI_SUCCESS;
}

static void errors(MPI_Win win) {
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int x = 1;
    FAILS_WITH(MPI_Put(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_unlock(0, win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_lock(77, 0, 0, win), MPI_ERR_LOCKTYPE);
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    FAILS_WITH(MPI_Put(&x, 1, MPI_INT, 0, 1 << 20, 1, MPI_INT, win), MPI_ERR_RMA_RANGE);
    FAILS_WITH(MPI_Put(&x, 1, MPI_INT, 0, -1, 1, MPI_INT, win), MPI_ERR_DISP);
    FAILS_WITH(MPI_Put(&x, 1, MPI_INT, size, 0, 1, MPI_INT, win), MPI_ERR_RANK);
    FAILS_WITH(MPI_Accumulate(&x, 1, MPI_INT, 0, 0, 1, MPI_FLOAT, MPI_SUM, win), MPI_ERR_TYPE);
    FAILS_WITH(MPI_Accumulate(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_OP_NULL, win), MPI_ERR_OP);
    FAILS_WITH(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_fence(0, win), MPI_ERR_RMA_SYNC);
    OK(MPI_Put(&x, 0, MPI_INT, 0, 1 << 20, 0, MPI_INT, win)); /* nothing to move */
    OK(MPI_Put(&x, 1, MPI_INT, MPI_PROC_NULL, 0, 1, MPI_INT, win));
    OK(MPI_Win_unlock(0, win));
    MPI_Aint qs = 0;
    int du = 0;
    void *qb = NULL;
    OK(MPI_Win_shared_query(win, 0, &qs, &du, &qb)); /* MPI-4.1: Win_allocate memory a node peer maps */
    CHECK(qs == (size + 3) * (MPI_Aint)sizeof(int) && du == sizeof(int) && qb != NULL, "query %ld", (long)qs);
    FAILS_WITH(MPI_Win_attach(win, &x, 4), MPI_ERR_RMA_FLAVOR);
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    if (getenv("WIN_SMOKE_FT")) {
        /* Fault tolerance with one rank per group: a window over WORLD spans groups and is
         * refused at every rank; one over MPI_COMM_SELF lies in a group and works. */
        MPI_Win w;
        int *m;
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        FAILS_WITH(MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &m, &w), MPI_ERR_UNSUPPORTED_OPERATION);
        OK(MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_SELF, &m, &w));
        OK(MPI_Win_fence(0, w));
        int v = 7;
        OK(MPI_Put(&v, 1, MPI_INT, 0, 4, 1, MPI_INT, w));
        OK(MPI_Win_fence(0, w));
        CHECK(m[1] == 7, "put to self");
        OK(MPI_Win_free(&w));
        printf("OK win_smoke %d\n", rank);
        OK(MPI_Finalize());
        return 0;
    }
    int n = size + 3;

    /* Win_allocate. */
    int *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(n * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    attributes(win, mem, n * sizeof(int), sizeof(int), MPI_WIN_FLAVOR_ALLOCATE);
    fence_round(win, mem, n);
    OK(MPI_Win_set_name(win, "smoke"));
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Win_get_name(win, name, &len));
    CHECK(strcmp(name, "smoke") == 0 && len == 5, "name %s", name);
    int key, one = 1, two = 2;
    OK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, on_delete, &key, NULL));
    OK(MPI_Win_set_attr(win, key, &one));
    OK(MPI_Win_set_attr(win, key, &two)); /* deletes the first */
    CHECK(deleted == 1, "deleted %d", deleted);
    /* Rput/Rget with a strided type at the target. */
    MPI_Datatype every_other;
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &every_other));
    OK(MPI_Type_commit(&every_other));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        int pair[2] = {41, 42}, back[2] = {0, 0};
        MPI_Request r;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, size - 1, 0, win));
        OK(MPI_Rput(pair, 2, MPI_INT, size - 1, 0, 1, every_other, win, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        OK(MPI_Win_flush(size - 1, win));
        OK(MPI_Rget(back, 2, MPI_INT, size - 1, 0, 1, every_other, win, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        OK(MPI_Win_unlock(size - 1, win));
        CHECK(back[0] == 41 && back[1] == 42, "rget %d %d", back[0], back[1]);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == size - 1) CHECK(mem[0] == 41 && mem[2] == 42, "strided put %d %d", mem[0], mem[2]);
    errors(win);
    OK(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL && deleted == 3, "freed (deleted %d)", deleted);
    OK(MPI_Win_free_keyval(&key));

    /* Win_create on the program's memory: CMA between node peers. */
    int64_t *priv = calloc(4, sizeof(int64_t));
    OK(MPI_Win_create(priv, 4 * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    attributes(win, priv, 4 * sizeof(int64_t), sizeof(int64_t), MPI_WIN_FLAVOR_CREATE);
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_Aint qs = 1;
    int du = 0;
    void *qb = &du;
    OK(MPI_Win_shared_query(win, 0, &qs, &du, &qb)); /* MPI-4.1: no shared memory: size 0, NULL */
    CHECK(qs == 0 && qb == NULL, "Win_create query %ld %p", (long)qs, qb);
    passive_round(win, priv);
    OK(MPI_Win_free(&win));
    free(priv);

    /* Win_allocate with 8-byte elements: the native atomics. */
    int64_t *a64;
    OK(MPI_Win_allocate(4 * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &a64, &win));
    passive_round(win, a64);
    OK(MPI_Win_free(&win));

    /* Win_allocate_shared, contiguous then not: direct stores into the neighbour's part. */
    for (int noncontig = 0; noncontig < 2; noncontig++) {
        MPI_Info info;
        OK(MPI_Info_create(&info));
        OK(MPI_Info_set(info, "alloc_shared_noncontig", noncontig ? "true" : "false"));
        double *sh;
        MPI_Aint mine = (rank + 1) * sizeof(double);
        OK(MPI_Win_allocate_shared(mine, sizeof(double), info, MPI_COMM_WORLD, &sh, &win));
        OK(MPI_Info_free(&info));
        MPI_Aint qs;
        int du;
        double *right;
        OK(MPI_Win_shared_query(win, (rank + 1) % size, &qs, &du, &right));
        CHECK(qs == ((rank + 1) % size + 1) * (MPI_Aint)sizeof(double) && du == sizeof(double), "query");
        if (!noncontig && rank + 1 < size) CHECK(right == sh + rank + 1, "contiguous: %p %p", (void *)right, (void *)sh);
        double *first;
        OK(MPI_Win_shared_query(win, MPI_PROC_NULL, &qs, &du, &first));
        CHECK(qs == sizeof(double), "the first with memory is rank 0");
        OK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
        right[0] = 1000.0 + rank;
        OK(MPI_Win_sync(win));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Win_sync(win));
        CHECK(sh[0] == 1000.0 + (rank + size - 1) % size, "shared store %f", sh[0]);
        OK(MPI_Win_unlock_all(win));
        OK(MPI_Win_free(&win));
    }

    /* PSCW over Win_allocate: each rank exposes to its left neighbour and accesses its right. */
    OK(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    *mem = -1;
    MPI_Group world, left_g, right_g;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    OK(MPI_Group_incl(world, 1, &left, &left_g));
    OK(MPI_Group_incl(world, 1, &right, &right_g));
    for (int round = 0; round < 3; round++) {
        OK(MPI_Win_post(left_g, 0, win));
        OK(MPI_Win_start(right_g, 0, win));
        int v = rank * 10 + round;
        OK(MPI_Put(&v, 1, MPI_INT, right, 0, 1, MPI_INT, win));
        OK(MPI_Win_complete(win));
        if (round == 1) {
            int flag = 0;
            while (!flag) OK(MPI_Win_test(win, &flag));
        } else {
            OK(MPI_Win_wait(win));
        }
        CHECK(*mem == left * 10 + round, "pscw %d round %d", *mem, round);
    }
    OK(MPI_Group_free(&left_g));
    OK(MPI_Group_free(&right_g));
    OK(MPI_Group_free(&world));
    OK(MPI_Win_free(&win));

    /* Win_create_dynamic: attach, publish the address, put and get under lock, detach. */
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int *dyn = calloc(8, sizeof(int));
    OK(MPI_Win_attach(win, dyn, 8 * sizeof(int)));
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Win_attach(win, dyn + 2, 4), MPI_ERR_RMA_ATTACH);
    MPI_Aint addr, *addrs = malloc(size * sizeof(MPI_Aint));
    OK(MPI_Get_address(dyn, &addr));
    OK(MPI_Allgather(&addr, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD));
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    int v = 500 + rank;
    OK(MPI_Put(&v, 1, MPI_INT, right, addrs[right] + rank * sizeof(int), 1, MPI_INT, win));
    FAILS_WITH(MPI_Put(&v, 1, MPI_INT, right, addrs[right] + 8 * sizeof(int), 1, MPI_INT, win), MPI_ERR_RMA_RANGE);
    OK(MPI_Win_unlock(right, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(dyn[left] == 500 + left, "dynamic put %d", dyn[left]);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_detach(win, dyn));
    FAILS_WITH(MPI_Win_shared_query(win, 0, &(MPI_Aint){0}, &(int){0}, &(void *){0}), MPI_ERR_RMA_FLAVOR);
    FAILS_WITH(MPI_Win_detach(win, dyn), MPI_ERR_RMA_ATTACH);
    OK(MPI_Win_free(&win));
    free(dyn);
    free(addrs);

    /* Bad creation arguments (every rank alike, so the collective fails everywhere). */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Win_fence(0, MPI_WIN_NULL), MPI_ERR_WIN); /* to MPI_COMM_WORLD's handler */
    FAILS_WITH(MPI_Win_allocate(-1, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win), MPI_ERR_SIZE);
    FAILS_WITH(MPI_Win_allocate(8, 0, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win), MPI_ERR_DISP);
    /* More shared memory than there is: MPI_ERR_NO_MEM at every rank, nothing left behind. */
    for (int i = 0; i < 3; i++) {
        FAILS_WITH(MPI_Win_allocate((MPI_Aint)1 << 50, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win), MPI_ERR_NO_MEM);
        FAILS_WITH(MPI_Win_allocate_shared((MPI_Aint)1 << 50, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win), MPI_ERR_NO_MEM);
    }
    OK(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    OK(MPI_Win_free(&win));
    OK(MPI_Type_free(&every_other));

    printf("OK win_smoke %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
