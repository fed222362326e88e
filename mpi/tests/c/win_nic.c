/* Accumulates under contention and request-based operations, written for windows whose
 * accumulates may go by the provider's atomics (--netmod ofi, one rank per node) and for
 * those that may not (several ranks per node, or info nemesis_nic_atomics=false): the results
 * must be exact either way. EXPECT_NIC=true|false (environment) is what MPI_Win_get_info must
 * report for nemesis_nic_atomics on the windows made without the info key; the key set to
 * false must always be reported false. Every rank hits rank 0's counters and its own (rank
 * 0's own accumulates meet the others' at one location). Validated on MPICH 4.0.2 (without
 * EXPECT_NIC: the info key is then not checked). */
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 200

static int rank, size;

/* The value of info key nemesis_nic_atomics in force on `win` ("" if unset). */
static void nic_info(MPI_Win win, char *out) {
    MPI_Info info;
    int flag = 0;
    OK(MPI_Win_get_info(win, &info));
    out[0] = 0;
    OK(MPI_Info_get(info, "nemesis_nic_atomics", 15, out, &flag));
    if (!flag) out[0] = 0;
    OK(MPI_Info_free(&info));
}

static void expect_nic(MPI_Win win, const char *want) {
    char got[16];
    nic_info(win, got);
    if (want && *want) CHECK(strcmp(got, want) == 0, "nemesis_nic_atomics is \"%s\", expected \"%s\"", got, want);
}

/* Fetch_and_op (a permutation of 0..n-1 at rank 0), Accumulate of ints and doubles and CAS
 * increments (exact totals), on rank 0's counters and this rank's own. */
enum flavour { ALLOCATE, CREATE_ALLOC_MEM, CREATE_MALLOC };

static void counters(MPI_Info info, const char *want, enum flavour fl) {
    int64_t *mem;
    MPI_Win win;
    if (fl == ALLOCATE) {
        OK(MPI_Win_allocate(8 * sizeof(int64_t), 1, info, MPI_COMM_WORLD, &mem, &win));
    } else {
        if (fl == CREATE_ALLOC_MEM) OK(MPI_Alloc_mem(8 * sizeof(int64_t), MPI_INFO_NULL, &mem));
        else mem = xmalloc(8 * sizeof(int64_t));
        OK(MPI_Win_create(mem, 8 * sizeof(int64_t), 1, info, MPI_COMM_WORLD, &win));
    }
    expect_nic(win, want);
    memset(mem, 0, 8 * sizeof(int64_t));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int64_t *seen = xmalloc(ROUNDS * sizeof(int64_t));
    OK(MPI_Win_lock_all(0, win));
    int64_t one = 1;
    for (int i = 0; i < ROUNDS; i++) {
        OK(MPI_Fetch_and_op(&one, &seen[i], MPI_INT64_T, 0, 0, MPI_SUM, win));
        OK(MPI_Win_flush(0, win));
        OK(MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 8, 1, MPI_INT64_T, MPI_SUM, win));
        OK(MPI_Accumulate(&one, 1, MPI_INT64_T, rank, 8, 1, MPI_INT64_T, MPI_SUM, win));
        double h = 0.5;
        OK(MPI_Accumulate(&h, 1, MPI_DOUBLE, 0, 16, 1, MPI_DOUBLE, MPI_SUM, win));
        /* A CAS increment: read, then swap in old + 1 until it takes. */
        int64_t old = 0, cur = -1;
        for (;;) {
            int64_t next = old + 1;
            OK(MPI_Compare_and_swap(&next, &old, &cur, MPI_INT64_T, 0, 24, win));
            OK(MPI_Win_flush(0, win));
            if (cur == old) break;
            old = cur;
        }
        int v = 3;
        OK(MPI_Accumulate(&v, 1, MPI_INT, 0, 32, 1, MPI_INT, MPI_BXOR, win));
    }
    /* Get_accumulate with MPI_NO_OP reads atomically; REPLACE then swaps. */
    int64_t r = -1, nv = 7;
    OK(MPI_Get_accumulate(NULL, 0, MPI_INT64_T, &r, 1, MPI_INT64_T, rank, 8, 1, MPI_INT64_T, MPI_NO_OP, win));
    OK(MPI_Win_flush(rank, win));
    CHECK(r >= ROUNDS, "own counter read %lld", (long long)r);
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int64_t total = (int64_t)size * ROUNDS;
    if (rank == 0) {
        CHECK(mem[0] == total, "fetch_and_op counter %lld, expected %lld", (long long)mem[0], (long long)total);
        CHECK(mem[1] == total + ROUNDS, "accumulate counter %lld, expected %lld", (long long)mem[1],
              (long long)(total + ROUNDS));
        CHECK(((double *)mem)[2] == 0.5 * (double)total, "double sum %g", ((double *)mem)[2]);
        CHECK(mem[3] == total, "CAS counter %lld, expected %lld", (long long)mem[3], (long long)total);
        int want_x = (size * ROUNDS) % 2 ? 3 : 0;
        CHECK(*(int *)&mem[4] == want_x, "bxor %d, expected %d", *(int *)&mem[4], want_x);
    } else {
        CHECK(mem[1] == ROUNDS, "own accumulate counter %lld", (long long)mem[1]);
    }
    /* The fetched values: each of 0..total-1 once over all ranks, increasing at each rank. */
    for (int i = 1; i < ROUNDS; i++) CHECK(seen[i] > seen[i - 1], "fetch %d: %lld after %lld", i, (long long)seen[i],
                                           (long long)seen[i - 1]);
    int64_t *all = rank == 0 ? xmalloc((size_t)total * sizeof(int64_t)) : NULL;
    OK(MPI_Gather(seen, ROUNDS, MPI_INT64_T, all, ROUNDS, MPI_INT64_T, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        char *hit = calloc((size_t)total, 1);
        for (int64_t i = 0; i < total; i++) {
            CHECK(all[i] >= 0 && all[i] < total && !hit[all[i]], "fetched %lld twice or out of range",
                  (long long)all[i]);
            hit[all[i]] = 1;
        }
        free(hit);
        free(all);
    }
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    OK(MPI_Put(&nv, 1, MPI_INT64_T, rank, 40, 1, MPI_INT64_T, win));
    OK(MPI_Win_unlock(rank, win));
    CHECK(mem[5] == 7, "own put %lld", (long long)mem[5]);
    free(seen);
    OK(MPI_Win_free(&win));
    if (fl == CREATE_ALLOC_MEM) OK(MPI_Free_mem(mem));
    else if (fl == CREATE_MALLOC) free(mem);
}

/* Rput, Rget, Raccumulate, Rget_accumulate to the right neighbour, completed by Waitall and
 * Testall; a strided Rget. */
static void requests(void) {
    int *mem;
    MPI_Win win;
    const int n = 64;
    OK(MPI_Win_allocate(4 * n * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    for (int i = 0; i < 4 * n; i++) mem[i] = rank * 10000 + i;
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int *put = xmalloc(n * sizeof(int)), *got = xmalloc(n * sizeof(int)), *acc = xmalloc(n * sizeof(int));
    int *old = xmalloc(n * sizeof(int)), *strided = xmalloc(2 * n * sizeof(int));
    for (int i = 0; i < n; i++) put[i] = -(rank * 100 + i), acc[i] = 1, got[i] = old[i] = 0;
    for (int i = 0; i < 2 * n; i++) strided[i] = -1;
    MPI_Datatype every_other;
    OK(MPI_Type_vector(n / 2, 1, 2, MPI_INT, &every_other));
    OK(MPI_Type_commit(&every_other));
    OK(MPI_Win_lock_all(0, win));
    MPI_Request q[5];
    OK(MPI_Rput(put, n, MPI_INT, right, 0, n, MPI_INT, win, &q[0]));
    OK(MPI_Rget(got, n, MPI_INT, right, n, n, MPI_INT, win, &q[1]));
    OK(MPI_Raccumulate(acc, n, MPI_INT, right, 2 * n, n, MPI_INT, MPI_SUM, win, &q[2]));
    OK(MPI_Rget_accumulate(acc, n, MPI_INT, old, n, MPI_INT, right, 3 * n, n, MPI_INT, MPI_SUM, win, &q[3]));
    OK(MPI_Rget(strided, 1, every_other, right, n, 1, every_other, win, &q[4]));
    /* The origin buffer of a completed Rput may be reused at once. */
    OK(MPI_Wait(&q[0], MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) put[i] = 12345;
    int done = 0;
    while (!done) OK(MPI_Testall(4, &q[1], &done, MPI_STATUSES_IGNORE));
    for (int i = 0; i < n; i++) {
        CHECK(got[i] == right * 10000 + n + i, "rget %d: %d", i, got[i]);
        CHECK(old[i] == right * 10000 + 3 * n + i, "rget_accumulate %d: %d", i, old[i]);
    }
    for (int i = 0; i < n; i++) {
        int want = i % 2 == 0 && i < n ? right * 10000 + n + i : -1;
        CHECK(strided[i] == want, "strided rget %d: %d, expected %d", i, strided[i], want);
    }
    /* Waitall on requests made and not yet waited for. */
    OK(MPI_Rget(got, n, MPI_INT, right, 2 * n, n, MPI_INT, win, &q[0]));
    OK(MPI_Rput(acc, 1, MPI_INT, right, n, 1, MPI_INT, win, &q[1]));
    OK(MPI_Waitall(2, q, MPI_STATUSES_IGNORE));
    /* flush_local completes gets and fetches (their data is here after it) and frees puts'
     * origin buffers. */
    int one = 1, prev = -1, g1 = -1;
    OK(MPI_Get(&g1, 1, MPI_INT, right, n + 5, 1, MPI_INT, win));
    OK(MPI_Fetch_and_op(&one, &prev, MPI_INT, right, 3 * n + 1, MPI_SUM, win));
    OK(MPI_Put(put, 1, MPI_INT, right, n + 2, 1, MPI_INT, win));
    put[0] = -5;
    OK(MPI_Win_flush_local(right, win));
    put[0] = -6;
    CHECK(g1 == right * 10000 + n + 5, "get after flush_local: %d", g1);
    CHECK(prev == right * 10000 + 3 * n + 1 + 1, "fetch_and_op after flush_local: %d", prev);
    OK(MPI_Win_flush_local_all(win));
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) CHECK(mem[i] == -(left * 100 + i), "rput %d: %d", i, mem[i]);
    CHECK(mem[n] == 1, "second rput: %d", mem[n]);
    CHECK(mem[n + 2] == 12345, "put before flush_local: %d", mem[n + 2]);
    for (int i = 1; i < n; i++)
        if (i != 2) CHECK(mem[n + i] == rank * 10000 + n + i, "rput wrote %d: %d", n + i, mem[n + i]);
    for (int i = 0; i < n; i++) {
        CHECK(mem[2 * n + i] == rank * 10000 + 2 * n + i + 1, "raccumulate %d: %d", i, mem[2 * n + i]);
        CHECK(mem[3 * n + i] == rank * 10000 + 3 * n + i + 1 + (i == 1), "rget_accumulate target %d: %d", i,
              mem[3 * n + i]);
    }
    OK(MPI_Type_free(&every_other));
    free(put);
    free(got);
    free(acc);
    free(old);
    free(strided);
    OK(MPI_Win_free(&win));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    const char *want = getenv("EXPECT_NIC");
    /* Win_create windows too: their own accumulates must not take a CPU path (a mapped
     * Alloc_mem block, or the mutex) while the others' go by the provider. */
    counters(MPI_INFO_NULL, want, ALLOCATE);
    counters(MPI_INFO_NULL, want, CREATE_ALLOC_MEM);
    counters(MPI_INFO_NULL, want, CREATE_MALLOC);
    MPI_Info off;
    OK(MPI_Info_create(&off));
    OK(MPI_Info_set(off, "nemesis_nic_atomics", "false"));
    counters(off, want ? "false" : NULL, ALLOCATE);
    OK(MPI_Info_free(&off));
    requests();
    OK(MPI_Finalize());
    printf("OK win_nic %d\n", rank);
    return 0;
}
