/* One-sided atomicity under contention (MPI-4.1 §12.7.1): every rank hammers one counter with
 * MPI_Fetch_and_op(MPI_SUM) (the final value exact, every fetched value distinct: a permutation),
 * increments it with MPI_Compare_and_swap retries (exact), adds doubles and an array of ints at
 * every rank with MPI_Accumulate(MPI_SUM) under lock_all (exact totals); a mutex built on
 * MPI_Compare_and_swap (released by MPI_Fetch_and_op(MPI_REPLACE)) protecting a non-atomic
 * Get-then-Put increment (exact); a distributed linked list (MPI-4.1 §12.8-style) whose elements
 * live in each rank's dynamic window, pushed at a head swapped by MPI_Compare_and_swap, then
 * walked by every rank: every element reachable exactly once. Prints "OK win_atomic <rank>". */
#include "check.h"

#define ROUNDS 100
#define NARRAY 32
#define NELEM 40

static int rank, size;

static void counters(void) {
    /* Slot 0: FOP counter; 1: CAS counter; 2: the double sum (as a double); 3..: ints. */
    long long *mem;
    MPI_Win win;
    /* A multiple of 64 bytes: MPICH 4.0.2's MPI_Win_allocate hands out a base other than the
     * window's (WIN_BASE) on ranks after one with an odd size (win_create.c shows it). */
    MPI_Aint bytes = 40 * (MPI_Aint)sizeof(long long);
    OK(MPI_Win_allocate(bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    memset(mem, 0, (size_t)bytes);
    OK(MPI_Win_unlock(rank, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    long long *fetched = xmalloc(sizeof(long long) * ROUNDS);
    long long one = 1;
    OK(MPI_Win_lock_all(0, win));
    for (int i = 0; i < ROUNDS; i++) {
        OK(MPI_Fetch_and_op(&one, &fetched[i], MPI_LONG_LONG, 0, 0, MPI_SUM, win));
        OK(MPI_Win_flush(0, win));
        if (i > 0) CHECK(fetched[i] > fetched[i - 1], "fetched %lld after %lld", fetched[i], fetched[i - 1]);
    }
    for (int i = 0; i < ROUNDS; i++) {
        long long cur = -1, seen = -2;
        OK(MPI_Fetch_and_op(NULL, &cur, MPI_LONG_LONG, 0, 8, MPI_NO_OP, win));
        OK(MPI_Win_flush(0, win));
        for (;;) {
            long long next = cur + 1;
            OK(MPI_Compare_and_swap(&next, &cur, &seen, MPI_LONG_LONG, 0, 8, win));
            OK(MPI_Win_flush(0, win));
            if (seen == cur) break;
            cur = seen;
        }
    }
    double half = 0.5 * (rank + 1);
    int add[NARRAY];
    for (int k = 0; k < NARRAY; k++) add[k] = rank + k;
    for (int i = 0; i < ROUNDS; i++) {
        OK(MPI_Accumulate(&half, 1, MPI_DOUBLE, 0, 16, 1, MPI_DOUBLE, MPI_SUM, win));
        int t = (rank + i) % size;
        OK(MPI_Accumulate(add, NARRAY, MPI_INT, t, 24, NARRAY, MPI_INT, MPI_SUM, win));
        if (i % 10 == 9) OK(MPI_Win_flush_all(win));
    }
    OK(MPI_Win_unlock_all(win));

    long long *all = rank == 0 ? xmalloc(sizeof(long long) * ROUNDS * (size_t)size) : NULL;
    OK(MPI_Gather(fetched, ROUNDS, MPI_LONG_LONG, all, ROUNDS, MPI_LONG_LONG, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        long long n = (long long)ROUNDS * size;
        char *hit = calloc((size_t)n, 1);
        for (long long i = 0; i < n; i++) {
            CHECK(all[i] >= 0 && all[i] < n && !hit[all[i]], "fetched value %lld twice or out of range", all[i]);
            hit[all[i]] = 1;
        }
        free(hit);
        free(all);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    if (rank == 0) {
        double sum;
        memcpy(&sum, (char *)mem + 16, sizeof sum);
        CHECK(mem[0] == (long long)ROUNDS * size, "Fetch_and_op total %lld", mem[0]);
        CHECK(mem[1] == (long long)ROUNDS * size, "Compare_and_swap total %lld", mem[1]);
        CHECK(sum == 0.5 * ROUNDS * size * (size + 1) / 2, "double sum %f", sum);
    }
    /* Each origin adds its row to each target ROUNDS / size times (and the remainder once more). */
    const int *ints = (const int *)((char *)mem + 24);
    for (int k = 0; k < NARRAY; k++) {
        long long want = 0;
        for (int o = 0; o < size; o++) {
            int times = 0;
            for (int i = 0; i < ROUNDS; i++) times += (o + i) % size == rank;
            want += (long long)times * (o + k);
        }
        CHECK(ints[k] == want, "int %d: %d, expected %lld", k, ints[k], want);
    }
    OK(MPI_Win_unlock(rank, win));
    free(fetched);
    OK(MPI_Win_free(&win));
}

/* A lock word at rank 0 (slot 0) guards a counter at the last rank (slot 1). */
static void mutex(void) {
    int *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(16 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win)); /* 64 bytes, as above */
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    mem[0] = mem[1] = 0;
    OK(MPI_Win_unlock(rank, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int last = size - 1, one = 1, zero = 0;
    OK(MPI_Win_lock_all(0, win));
    for (int i = 0; i < ROUNDS / 2; i++) {
        int was = -1;
        do {
            OK(MPI_Compare_and_swap(&one, &zero, &was, MPI_INT, 0, 0, win));
            OK(MPI_Win_flush(0, win));
        } while (was != 0);
        int v = -1;
        OK(MPI_Get(&v, 1, MPI_INT, last, 1, 1, MPI_INT, win));
        OK(MPI_Win_flush(last, win));
        v++;
        OK(MPI_Put(&v, 1, MPI_INT, last, 1, 1, MPI_INT, win));
        OK(MPI_Win_flush(last, win));
        OK(MPI_Fetch_and_op(&zero, &was, MPI_INT, 0, 0, MPI_REPLACE, win));
        OK(MPI_Win_flush(0, win));
        CHECK(was == 1, "the lock word was %d while held", was);
    }
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == last) {
        OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
        CHECK(mem[1] == ROUNDS / 2 * size, "counter under the mutex: %d", mem[1]);
        OK(MPI_Win_unlock(rank, win));
    }
    OK(MPI_Win_free(&win));
}

/* An element; NEXT is the element's global index + 1 (0: the end), index = rank * NELEM + i. */
struct elem {
    long long next;
    int value;
    int pad;
};

static void linked_list(void) {
    MPI_Win win;
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    struct elem *pool;
    long long *head;
    OK(MPI_Alloc_mem(NELEM * sizeof(struct elem), MPI_INFO_NULL, &pool));
    OK(MPI_Alloc_mem(sizeof(long long), MPI_INFO_NULL, &head));
    *head = 0;
    for (int i = 0; i < NELEM; i++) pool[i] = (struct elem){-1, rank * 1000 + i, 0};
    OK(MPI_Win_attach(win, pool, NELEM * sizeof(struct elem)));
    if (rank == 0) OK(MPI_Win_attach(win, head, sizeof(long long)));
    MPI_Aint a[2], *addrs = xmalloc(2 * sizeof(MPI_Aint) * (size_t)size);
    OK(MPI_Get_address(pool, &a[0]));
    OK(MPI_Get_address(head, &a[1]));
    OK(MPI_Allgather(a, 2, MPI_AINT, addrs, 2, MPI_AINT, MPI_COMM_WORLD));
    MPI_Aint head_disp = addrs[1];

    OK(MPI_Win_lock_all(0, win));
    for (int i = 0; i < NELEM; i++) {
        long long me = (long long)rank * NELEM + i + 1, old = -1, seen = -1;
        OK(MPI_Fetch_and_op(NULL, &old, MPI_LONG_LONG, 0, head_disp, MPI_NO_OP, win));
        OK(MPI_Win_flush(0, win));
        for (;;) {
            pool[i].next = old; /* our own element: a local store, published by Win_sync below */
            OK(MPI_Win_sync(win));
            OK(MPI_Compare_and_swap(&me, &old, &seen, MPI_LONG_LONG, 0, head_disp, win));
            OK(MPI_Win_flush(0, win));
            if (seen == old) break;
            old = seen;
        }
    }
    OK(MPI_Win_sync(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_sync(win));

    /* Every rank walks the list. */
    long long total = (long long)NELEM * size, cur = -1, steps = 0;
    char *hit = calloc((size_t)total, 1);
    OK(MPI_Get(&cur, 1, MPI_LONG_LONG, 0, head_disp, 1, MPI_LONG_LONG, win));
    OK(MPI_Win_flush(0, win));
    while (cur != 0) {
        CHECK(cur > 0 && cur <= total && steps < total, "link %lld after %lld steps", cur, steps);
        long long idx = cur - 1;
        int owner = (int)(idx / NELEM), i = (int)(idx % NELEM);
        CHECK(!hit[idx], "element %d of rank %d reached twice", i, owner);
        hit[idx] = 1;
        struct elem e;
        OK(MPI_Get(&e, (int)sizeof e, MPI_BYTE, owner, addrs[2 * owner] + (MPI_Aint)(i * sizeof(struct elem)),
                   (int)sizeof e, MPI_BYTE, win));
        OK(MPI_Win_flush(owner, win));
        CHECK(e.value == owner * 1000 + i, "element value %d", e.value);
        cur = e.next;
        steps++;
    }
    CHECK(steps == total, "%lld elements reachable, expected %lld", steps, total);
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    free(hit);
    free(addrs);
    OK(MPI_Win_detach(win, pool));
    if (rank == 0) OK(MPI_Win_detach(win, head));
    OK(MPI_Win_free(&win));
    OK(MPI_Free_mem(pool));
    OK(MPI_Free_mem(head));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    counters();
    mutex();
    linked_list();
    OK(MPI_Finalize());
    printf("OK win_atomic %d\n", rank);
    return 0;
}
