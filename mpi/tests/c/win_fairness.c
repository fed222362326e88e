/* Passive target fairness and progress (MPI-4.1 §12.5.3, §12.7.3).
 *
 * Fairness: the last rank takes SHARED_LOCKS shared locks on rank 0 one after the other while
 * every other rank takes exclusive locks on rank 0 in a loop, each checking under its lock
 * whether the shared locker has finished; the shared locker must finish while the exclusive
 * lockers are still under EXCL_MAX rounds each (a shared lock waiting behind a stream of
 * exclusive ones is not starved).
 *
 * Progress: rank 0 computes for COMPUTE_S seconds without calling MPI (MPI_Wtime only); the
 * others meanwhile lock it, Put, Get, Fetch_and_op, unlock, then set their flag word in its
 * window. The window is MPI_Win_create'd over the program's memory, so no load/store shortcut:
 * the target's library must serve the origins while the program computes. Afterwards rank 0
 * checks that every flag was set before its loop ended, from the times the origins report.
 * Prints "OK win_fairness <rank>". */
#include "check.h"

#define SHARED_LOCKS 20
#define EXCL_MAX 200000
#define COMPUTE_S 1.5

static int rank, size;

static void fairness(void) {
    if (size < 2) return;
    int *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(64, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    memset(mem, 0, 64);
    OK(MPI_Win_unlock(rank, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int shared_locker = size - 1, rounds = 0;
    if (rank == shared_locker) {
        for (int i = 0; i < SHARED_LOCKS; i++) {
            int v = -1;
            OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
            OK(MPI_Get(&v, 1, MPI_INT, 0, 1, 1, MPI_INT, win));
            OK(MPI_Win_unlock(0, win));
            CHECK(v >= 0, "shared read %d", v);
        }
        int one = 1;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        OK(MPI_Put(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, win));
        OK(MPI_Win_unlock(0, win));
    } else {
        int done = 0;
        while (!done) {
            CHECK(rounds < EXCL_MAX, "the shared locker starved: %d exclusive rounds", rounds);
            OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
            OK(MPI_Get(&done, 1, MPI_INT, 0, 0, 1, MPI_INT, win));
            OK(MPI_Win_flush(0, win));
            int v = rounds;
            OK(MPI_Put(&v, 1, MPI_INT, 0, 1, 1, MPI_INT, win));
            OK(MPI_Win_unlock(0, win));
            rounds++;
        }
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_free(&win));
}

static void progress(void) {
    if (size < 2) return;
    /* Slot r: rank r's flag; slot size + r: its Put; 2 size + r: its Fetch_and_op counter. */
    int *mem = xmalloc(sizeof(int) * 3 * (size_t)size);
    for (int i = 0; i < 3 * size; i++) mem[i] = 0;
    MPI_Win win;
    OK(MPI_Win_create(mem, (MPI_Aint)sizeof(int) * 3 * size, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    double done_at = 0, start = 0;
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        start = MPI_Wtime();
        volatile double x = 0;
        while (MPI_Wtime() - start < COMPUTE_S) x += 1.0; /* no MPI call but the clock */
        done_at = MPI_Wtime();
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win)); /* the private copy synchronised */
        for (int r = 1; r < size; r++) {
            CHECK(mem[r] == 1, "flag of rank %d not set when the computation ended", r);
            CHECK(mem[size + r] == 100 + r && mem[2 * size + r] == 2, "rank %d's Put %d / counter %d", r,
                  mem[size + r], mem[2 * size + r]);
        }
        OK(MPI_Win_unlock(0, win));
    } else {
        int v = 100 + rank, back = -1, one = 1, old = -1;
        start = MPI_Wtime();
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        OK(MPI_Put(&v, 1, MPI_INT, 0, size + rank, 1, MPI_INT, win));
        OK(MPI_Fetch_and_op(&one, &old, MPI_INT, 0, 2 * size + rank, MPI_SUM, win));
        OK(MPI_Win_flush(0, win));
        OK(MPI_Get(&back, 1, MPI_INT, 0, size + rank, 1, MPI_INT, win));
        OK(MPI_Win_unlock(0, win));
        CHECK(back == v && old == 0, "Get %d, fetched %d", back, old);
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        OK(MPI_Fetch_and_op(&one, &old, MPI_INT, 0, 2 * size + rank, MPI_SUM, win));
        OK(MPI_Put(&one, 1, MPI_INT, 0, rank, 1, MPI_INT, win));
        OK(MPI_Win_unlock(0, win));
        done_at = MPI_Wtime();
    }
    /* The origins report how long they took: all within the target's computation. */
    double took = done_at - start, *all = xmalloc(sizeof(double) * (size_t)size);
    OK(MPI_Gather(&took, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    if (rank == 0)
        for (int r = 1; r < size; r++)
            CHECK(all[r] < all[0], "rank %d took %.3f s, the target computed %.3f s", r, all[r], all[0]);
    free(all);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_free(&win));
    free(mem);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    fairness();
    progress();
    OK(MPI_Finalize());
    printf("OK win_fairness %d\n", rank);
    return 0;
}
