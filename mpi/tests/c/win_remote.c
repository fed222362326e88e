/* One-sided communication to targets on other nodes (run with --nodes 2; on one node it runs
 * the node-local paths): every operation in every synchronisation mode, derived datatypes on
 * both sides, 1 MiB transfers, request-based operations, accumulate atomicity between local and remote origins,
 * a range error the origin finds, and passive target progress while the target computes. */
#include "check.h"

#include <stdint.h>

static int rank, size;

/* Win_allocate: Put/Get under fence, ring neighbours. */
static void fence_put_get(void) {
    int *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(4 * size * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    for (int i = 0; i < 4 * size; i++) mem[i] = -1;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    OK(MPI_Win_fence(0, win));
    int v[2] = {rank * 10, rank * 10 + 1};
    OK(MPI_Put(v, 2, MPI_INT, right, 2 * rank, 2, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    CHECK(mem[2 * left] == left * 10 && mem[2 * left + 1] == left * 10 + 1, "put from %d: %d %d", left, mem[2 * left],
          mem[2 * left + 1]);
    int g[2] = {0, 0};
    OK(MPI_Get(g, 2, MPI_INT, left, 2 * ((left + size - 1) % size), 2, MPI_INT, win));
    OK(MPI_Win_fence(0, win));
    int ll = (left + size - 1) % size;
    CHECK(g[0] == ll * 10 && g[1] == ll * 10 + 1, "get from %d: %d %d", left, g[0], g[1]);

    /* A strided target (every other int) and a contiguous origin, then back to a strided origin. */
    MPI_Datatype every_other;
    OK(MPI_Type_vector(size, 1, 2, MPI_INT, &every_other));
    OK(MPI_Type_commit(&every_other));
    int *src = xmalloc(size * sizeof(int));
    for (int i = 0; i < size; i++) src[i] = 1000 * rank + i;
    OK(MPI_Win_fence(0, win));
    OK(MPI_Put(src, size, MPI_INT, right, 2 * size, 1, every_other, win));
    OK(MPI_Win_fence(0, win));
    for (int i = 0; i < size; i++)
        CHECK(mem[2 * size + 2 * i] == 1000 * left + i, "strided put slot %d: %d", i, mem[2 * size + 2 * i]);
    int *back = xmalloc(2 * size * sizeof(int));
    for (int i = 0; i < 2 * size; i++) back[i] = -7;
    OK(MPI_Get(back, 1, every_other, left, 2 * size, 1, every_other, win));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    for (int i = 0; i < size; i++) {
        CHECK(back[2 * i] == 1000 * ll + i, "strided get %d: %d", i, back[2 * i]);
        CHECK(back[2 * i + 1] == -7, "strided get wrote a gap %d", i);
    }
    free(src);
    free(back);
    OK(MPI_Type_free(&every_other));
    OK(MPI_Win_free(&win));
}

/* 1 MiB each way (the Endpoint's rendezvous under the requests and replies), under a lock. */
static void large_transfers(void) {
    const int n = 1 << 17; /* doubles */
    double *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(n * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    double *src = xmalloc(n * sizeof(double)), *dst = xmalloc(n * sizeof(double));
    for (int i = 0; i < n; i++) src[i] = rank * 1e6 + i, dst[i] = -1, mem[i] = -2;
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    OK(MPI_Put(src, n, MPI_DOUBLE, right, 0, n, MPI_DOUBLE, win));
    OK(MPI_Win_unlock(right, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, left, 0, win));
    OK(MPI_Get(dst, n, MPI_DOUBLE, left, 0, n, MPI_DOUBLE, win));
    OK(MPI_Win_unlock(left, win));
    int ll = (left + size - 1) % size;
    for (int i = 0; i < n; i++) {
        CHECK(mem[i] == left * 1e6 + i, "large put %d: %g", i, mem[i]);
        CHECK(dst[i] == ll * 1e6 + i, "large get %d: %g", i, dst[i]);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    free(src);
    free(dst);
    OK(MPI_Win_free(&win));
}

/* Accumulates from every rank (local and remote origins at once) on one counter: exact sum. */
static void accumulate_atomicity(void) {
    int64_t *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(2 * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    mem[0] = mem[1] = 0;
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int target = size - 1, rounds = 200;
    for (int i = 0; i < rounds; i++) {
        int64_t one = 1, old = -1;
        OK(MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win));
        OK(MPI_Accumulate(&one, 1, MPI_INT64_T, target, 0, 1, MPI_INT64_T, MPI_SUM, win));
        OK(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, target, 1, MPI_SUM, win));
        OK(MPI_Win_unlock(target, win));
        CHECK(old >= 0 && old < (int64_t)rounds * size, "fetched %lld", (long long)old);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == target) {
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win));
        CHECK(mem[0] == (int64_t)rounds * size && mem[1] == (int64_t)rounds * size, "sums %lld %lld",
              (long long)mem[0], (long long)mem[1]);
        OK(MPI_Win_unlock(target, win));
    }
    /* Compare_and_swap: exactly one rank swaps -1 for its rank. */
    OK(MPI_Win_fence(0, win));
    if (rank == 0) mem[0] = -1;
    OK(MPI_Win_fence(0, win));
    int64_t mine = rank, cmp = -1, was = -2;
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    OK(MPI_Compare_and_swap(&mine, &cmp, &was, MPI_INT64_T, 0, 0, win));
    OK(MPI_Win_unlock(0, win));
    int won = was == -1, winners = 0;
    OK(MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(winners == 1, "%d ranks won the swap", winners);
    /* Get_accumulate with MPI_NO_OP (an atomic read) and MPI_REPLACE (an atomic swap). */
    OK(MPI_Win_lock_all(0, win));
    int64_t seen = -5, put = 77 + rank, none = 0;
    OK(MPI_Get_accumulate(&none, 1, MPI_INT64_T, &seen, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_NO_OP, win));
    OK(MPI_Win_flush(0, win));
    CHECK(seen >= 0 && seen < size, "no_op read %lld", (long long)seen);
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 1 % size) {
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        OK(MPI_Get_accumulate(&put, 1, MPI_INT64_T, &seen, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_REPLACE, win));
        OK(MPI_Win_unlock(0, win));
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        int64_t now = -1;
        OK(MPI_Get(&now, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, win));
        OK(MPI_Win_unlock(0, win));
        CHECK(now == put, "replace: %lld, not %lld", (long long)now, (long long)put);
    }
    OK(MPI_Win_free(&win));
}

/* Win_create (the program's memory) with PSCW, request-based operations, flush_local. */
static void create_pscw_requests(void) {
    double *mem = xmalloc(8 * size * sizeof(double));
    for (int i = 0; i < 8 * size; i++) mem[i] = 0;
    MPI_Win win;
    OK(MPI_Win_create(mem, 8 * size * sizeof(double), sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_Group world, peers;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int others[2] = {left, right};
    OK(MPI_Group_incl(world, left == right ? 1 : 2, others, &peers));
    OK(MPI_Win_post(peers, 0, win));
    OK(MPI_Win_start(peers, 0, win));
    double d[3] = {rank + 0.5, rank + 0.25, rank + 0.125};
    OK(MPI_Put(d, 3, MPI_DOUBLE, right, 3 * rank, 3, MPI_DOUBLE, win));
    OK(MPI_Accumulate(d, 1, MPI_DOUBLE, left, 8 * size - 1, 1, MPI_DOUBLE, MPI_SUM, win));
    OK(MPI_Win_complete(win));
    OK(MPI_Win_wait(win));
    CHECK(mem[3 * left] == left + 0.5 && mem[3 * left + 2] == left + 0.125, "pscw put %g %g", mem[3 * left],
          mem[3 * left + 2]);
    double expect = right + 0.5 + (left != right ? 0 : 0);
    CHECK(mem[8 * size - 1] == expect || size == 1, "pscw acc %g", mem[8 * size - 1]);
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Request-based operations in a lock_all epoch. */
    OK(MPI_Win_lock_all(0, win));
    MPI_Request r[3];
    double x = 100 + rank, y = -1, z = -1;
    OK(MPI_Rput(&x, 1, MPI_DOUBLE, right, 8 * size - 2, 1, MPI_DOUBLE, win, &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    OK(MPI_Win_flush(right, win));
    OK(MPI_Rget(&y, 1, MPI_DOUBLE, right, 8 * size - 2, 1, MPI_DOUBLE, win, &r[1]));
    OK(MPI_Raccumulate(&x, 1, MPI_DOUBLE, right, 8 * size - 3, 1, MPI_DOUBLE, MPI_SUM, win, &r[2]));
    OK(MPI_Waitall(2, &r[1], MPI_STATUSES_IGNORE));
    CHECK(y == x, "rget after rput + flush: %g", y);
    OK(MPI_Rget_accumulate(&x, 1, MPI_DOUBLE, &z, 1, MPI_DOUBLE, right, 8 * size - 3, 1, MPI_DOUBLE, MPI_SUM, win,
                           &r[0]));
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    CHECK(z == x, "rget_accumulate saw %g", z);
    OK(MPI_Win_flush_local_all(win));
    OK(MPI_Win_flush_all(win));
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(mem[8 * size - 3] == 2 * (100 + left), "raccumulate: %g", mem[8 * size - 3]);

    /* A range error found at the origin: MPI_ERR_RMA_RANGE, nothing written. */
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    FAILS_WITH(MPI_Put(d, 3, MPI_DOUBLE, right, 8 * size - 1, 3, MPI_DOUBLE, win), MPI_ERR_RMA_RANGE);
    OK(MPI_Win_unlock(right, win));
    OK(MPI_Group_free(&peers));
    OK(MPI_Group_free(&world));
    OK(MPI_Win_free(&win));
    free(mem);
}

/* A dynamic window: each rank attaches a buffer and publishes its address. */
static void dynamic_window(void) {
    MPI_Win win;
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int *buf = xmalloc(4 * sizeof(int));
    for (int i = 0; i < 4; i++) buf[i] = -1;
    OK(MPI_Win_attach(win, buf, 4 * sizeof(int)));
    MPI_Aint mine, *addrs = xmalloc(size * sizeof(MPI_Aint));
    OK(MPI_Get_address(buf, &mine));
    OK(MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD));
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    int v[2] = {rank, -rank};
    OK(MPI_Put(v, 2, MPI_INT, right, addrs[right] + sizeof(int), 2, MPI_INT, win));
    OK(MPI_Win_unlock(right, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(buf[0] == -1 && buf[1] == left && buf[2] == -left && buf[3] == -1, "dynamic: %d %d %d %d", buf[0], buf[1],
          buf[2], buf[3]);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_detach(win, buf));
    OK(MPI_Win_free(&win));
    free(addrs);
    free(buf);
}

/* Passive target progress: the last rank computes for ~2 s without calling MPI while the others
 * lock, put, get, fetch_and_op and unlock on it. Each origin, once done, adds 1 to a counter in
 * the target's window; the target reads the counter when its loop ends: every origin must have
 * finished before (they would wait until the target's next MPI call without progress). */
static void progress_while_computing(void) {
    int64_t *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(4 * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    for (int i = 0; i < 4; i++) mem[i] = 0;
    int target = size - 1;
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == target) {
        double t0 = MPI_Wtime();
        volatile double sink = 0;
        volatile int64_t *counter = &mem[0];
        while (MPI_Wtime() - t0 < 2.0) {
            for (int i = 0; i < 100000; i++) sink += i * 0.5;
        }
        int64_t done = *counter;
        double end = MPI_Wtime() - t0;
        printf("progress: %lld of %d origins done within the target's %.2f s loop\n", (long long)done, size - 1, end);
        CHECK(done == size - 1, "only %lld of %d origins finished while the target computed", (long long)done,
              size - 1);
    } else {
        double t0 = MPI_Wtime();
        int64_t one = 1, old = -1, v = 40 + rank, g = -1;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win));
        OK(MPI_Put(&v, 1, MPI_INT64_T, target, 1, 1, MPI_INT64_T, win));
        OK(MPI_Get(&g, 1, MPI_INT64_T, target, 1, 1, MPI_INT64_T, win));
        OK(MPI_Win_unlock(target, win));
        OK(MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win));
        OK(MPI_Fetch_and_op(&one, &old, MPI_INT64_T, target, 0, MPI_SUM, win));
        OK(MPI_Win_unlock(target, win));
        CHECK(old >= 0 && old < size - 1, "counter was %lld", (long long)old);
        printf("progress: rank %d done with the computing target in %.3f s\n", rank, MPI_Wtime() - t0);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_free(&win));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    int provided = -1;
    fence_put_get();
    large_transfers();
    accumulate_atomicity();
    create_pscw_requests();
    dynamic_window();
    if (size > 1) progress_while_computing();
    /* The thread level granted did not change (the progress thread makes calls lock, quietly). */
    OK(MPI_Query_thread(&provided));
    CHECK(provided == MPI_THREAD_SINGLE, "MPI_Query_thread says %d", provided);
    printf("OK win_remote %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
