/* One-sided synchronisation (MPI-4.1 §12.5): fences with MPI_MODE_NOPRECEDE, NOSTORE, NOPUT,
 * NOSUCCEED; post/start/complete/wait with each rank exposing to the two ranks before it and
 * accessing the two after, MPI_Win_test loops, one rank accessing all others while it exposes to
 * none, MPI_MODE_NOCHECK; passive target: exclusive locks around a non-atomic read-modify-write
 * (exact count), shared locks reading at once, lock_all with flush, flush_all, flush_local (the
 * origin buffer reused, the value sent the one before), flush_local_all, a flushed Put seen by the
 * target after a message; MPI_Win_sync on an allocate_shared window of the node: the unified
 * model's load/store pattern (Win_sync, barrier, Win_sync). Prints "OK win_sync <rank>". */
#include "check.h"

#define SLOTS 64
#define RMW_ROUNDS 30

static int rank, size;

static MPI_Group group_of(const int *ranks, int n) {
    MPI_Group world, g;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    OK(MPI_Group_incl(world, n, ranks, &g));
    OK(MPI_Group_free(&world));
    return g;
}

/* Distinct ranks rank+D for D in DS (mod size), self excluded unless size is 1. */
static int neighbours(int sign, int *out) {
    int n = 0;
    for (int d = 1; d <= 2; d++) {
        int r = ((rank + sign * d) % size + size) % size;
        if (r == rank && size > 1) continue;
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= out[i] == r;
        if (!dup) out[n++] = r;
    }
    return n;
}

static void fences(void) {
    int *mem, v[SLOTS];
    MPI_Win win;
    OK(MPI_Win_allocate(SLOTS * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int i = 0; i < SLOTS; i++) mem[i] = -1;
    OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    for (int i = 0; i < SLOTS; i++) v[i] = rank * 100 + i;
    OK(MPI_Put(v, SLOTS, MPI_INT, next, 0, SLOTS, MPI_INT, win));
    /* No local stores since the last fence; Gets only until the next one. */
    OK(MPI_Win_fence(MPI_MODE_NOSTORE | MPI_MODE_NOPUT, win));
    for (int i = 0; i < SLOTS; i++) CHECK(mem[i] == prev * 100 + i, "fence: slot %d = %d", i, mem[i]);
    int got[SLOTS];
    OK(MPI_Get(got, SLOTS, MPI_INT, prev, 0, SLOTS, MPI_INT, win));
    OK(MPI_Win_fence(MPI_MODE_NOSTORE, win));
    int pp = (prev + size - 1) % size;
    for (int i = 0; i < SLOTS; i++) CHECK(got[i] == pp * 100 + i, "fence Get: %d = %d", i, got[i]);
    mem[0] = 7; /* a local store, then a fence without NOSTORE */
    OK(MPI_Win_fence(0, win));
    OK(MPI_Accumulate(&rank, 1, MPI_INT, next, 1, 1, MPI_INT, MPI_SUM, win));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK(mem[0] == 7 && mem[1] == prev * 100 + 1 + prev, "fence accumulate: %d %d", mem[0], mem[1]);
    /* An empty fence epoch, then passive target after NOSUCCEED. */
    OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED | MPI_MODE_NOSTORE | MPI_MODE_NOPUT, win));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
    OK(MPI_Get(got, 1, MPI_INT, next, 0, 1, MPI_INT, win));
    OK(MPI_Win_unlock(next, win));
    CHECK(got[0] == 7, "lock after fences: %d", got[0]);
    OK(MPI_Win_free(&win));
}

static void pscw(void) {
    int *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(SLOTS * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    int from[2], to[2];
    int nfrom = neighbours(-1, from), nto = neighbours(1, to);
    MPI_Group fg = group_of(from, nfrom), tg = group_of(to, nto);
    for (int round = 0; round < 6; round++) {
        int assert_ = round >= 4 ? MPI_MODE_NOCHECK : 0;
        for (int i = 0; i < SLOTS; i++) mem[i] = -1;
        OK(MPI_Win_post(fg, assert_, win));
        /* NOCHECK: the matching posts are done before any start (and no start before a post). */
        if (assert_) OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Win_start(tg, assert_, win));
        for (int i = 0; i < nto; i++) {
            int v = rank * 10 + round;
            OK(MPI_Put(&v, 1, MPI_INT, to[i], rank, 1, MPI_INT, win));
        }
        OK(MPI_Win_complete(win));
        if (round % 2 == 1) {
            int flag = 0, spins = 0;
            while (!flag) {
                OK(MPI_Win_test(win, &flag));
                spins++;
            }
            CHECK(spins >= 1, "Win_test");
        } else {
            OK(MPI_Win_wait(win));
        }
        for (int r = 0; r < size; r++) {
            int exp = -1;
            for (int i = 0; i < nfrom; i++)
                if (from[i] == r) exp = r * 10 + round;
            CHECK(mem[r] == exp, "pscw round %d: slot %d = %d, expected %d", round, r, mem[r], exp);
        }
        if (assert_) OK(MPI_Barrier(MPI_COMM_WORLD)); /* the next NOCHECK post after all waits */
    }
    OK(MPI_Group_free(&fg));
    OK(MPI_Group_free(&tg));

    /* Rank 0 accesses every other rank and exposes to none; the others expose to rank 0 only. */
    for (int i = 0; i < SLOTS; i++) mem[i] = -1;
    if (rank == 0 && size > 1) {
        int *others = xmalloc(sizeof(int) * (size_t)size);
        for (int r = 1; r < size; r++) others[r - 1] = r;
        MPI_Group g = group_of(others, size - 1);
        OK(MPI_Win_start(g, 0, win));
        for (int r = 1; r < size; r++) {
            int v = 1000 + r;
            OK(MPI_Put(&v, 1, MPI_INT, r, 0, 1, MPI_INT, win));
        }
        OK(MPI_Win_complete(win));
        OK(MPI_Group_free(&g));
        free(others);
    } else if (rank > 0) {
        int zero = 0;
        MPI_Group g = group_of(&zero, 1);
        OK(MPI_Win_post(g, MPI_MODE_NOSTORE, win));
        OK(MPI_Win_wait(win));
        OK(MPI_Group_free(&g));
        CHECK(mem[0] == 1000 + rank, "subset: %d", mem[0]);
    }
    OK(MPI_Win_free(&win));
}

static void passive(void) {
    long long *mem;
    MPI_Win win;
    OK(MPI_Win_allocate(SLOTS * sizeof(long long), sizeof(long long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (int i = 0; i < SLOTS; i++) mem[i] = 0;
    OK(MPI_Win_unlock(rank, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Exclusive locks make a Get-then-Put increment of rank 0's slot 0 exact. */
    for (int i = 0; i < RMW_ROUNDS; i++) {
        long long v = -1;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        OK(MPI_Get(&v, 1, MPI_LONG_LONG, 0, 0, 1, MPI_LONG_LONG, win));
        OK(MPI_Win_flush(0, win));
        v++;
        OK(MPI_Put(&v, 1, MPI_LONG_LONG, 0, 0, 1, MPI_LONG_LONG, win));
        OK(MPI_Win_unlock(0, win));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    long long total = -1;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    OK(MPI_Get(&total, 1, MPI_LONG_LONG, 0, 0, 1, MPI_LONG_LONG, win));
    OK(MPI_Win_unlock(0, win));
    CHECK(total == (long long)RMW_ROUNDS * size, "exclusive increments: %lld", total);
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* lock_all: each rank writes its slot at every rank; flush, then read back. */
    OK(MPI_Win_lock_all(0, win));
    for (int t = 0; t < size; t++) {
        long long v = 1000 * rank + t;
        OK(MPI_Put(&v, 1, MPI_LONG_LONG, t, 1 + rank, 1, MPI_LONG_LONG, win));
        OK(MPI_Win_flush(t, win));
        long long back = -1;
        OK(MPI_Get(&back, 1, MPI_LONG_LONG, t, 1 + rank, 1, MPI_LONG_LONG, win));
        OK(MPI_Win_flush_local(t, win));
        CHECK(back == v, "flushed Put read back from %d: %lld", t, back);
    }
    /* flush_local: the buffer may be reused at once; the target gets the value sent. */
    long long buf[8];
    for (int t = 0; t < size; t++) {
        buf[0] = 5000 + rank;
        OK(MPI_Put(buf, 1, MPI_LONG_LONG, t, 1 + rank, 1, MPI_LONG_LONG, win));
        OK(MPI_Win_flush_local(t, win));
        buf[0] = -5;
    }
    OK(MPI_Win_flush_all(win)); /* the Puts complete at the targets before the accumulates */
    for (int t = 0; t < size; t++) {
        buf[t % 8] = 6000 + rank;
        OK(MPI_Accumulate(&buf[t % 8], 1, MPI_LONG_LONG, t, 1 + rank, 1, MPI_LONG_LONG, MPI_SUM, win));
    }
    OK(MPI_Win_flush_local_all(win));
    OK(MPI_Win_flush_all(win));
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    for (int r = 0; r < size; r++)
        CHECK(mem[1 + r] == 11000 + 2 * r, "slot of %d after flush_local: %lld", r, mem[1 + r]);
    OK(MPI_Win_unlock(rank, win));

    /* A Put flushed before a message is in the target's memory when the message arrives. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    OK(MPI_Win_lock_all(0, win));
    long long v = 424242 + rank;
    OK(MPI_Put(&v, 1, MPI_LONG_LONG, next, SLOTS - 1, 1, MPI_LONG_LONG, win));
    OK(MPI_Win_flush(next, win));
    int token = 1, got_token = 0;
    OK(MPI_Sendrecv(&token, 1, MPI_INT, next, 5, &got_token, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Win_sync(win));
    CHECK(mem[SLOTS - 1] == 424242 + prev, "flushed Put after the message: %lld", mem[SLOTS - 1]);
    OK(MPI_Win_unlock_all(win));

    /* Shared locks held by all at once. */
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, MPI_MODE_NOCHECK, win));
    long long t0 = -1;
    OK(MPI_Get(&t0, 1, MPI_LONG_LONG, 0, 0, 1, MPI_LONG_LONG, win));
    OK(MPI_Win_unlock(0, win));
    CHECK(t0 == (long long)RMW_ROUNDS * size, "shared read: %lld", t0);
    OK(MPI_Win_free(&win));
}

/* The unified model on a shared window: stores, Win_sync, barrier, Win_sync, loads. */
static void shared_sync(void) {
    MPI_Comm node;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    int me, n;
    OK(MPI_Comm_rank(node, &me));
    OK(MPI_Comm_size(node, &n));
    volatile int *mine;
    MPI_Win win;
    OK(MPI_Win_allocate_shared(SLOTS * sizeof(int), sizeof(int), MPI_INFO_NULL, node, (void *)&mine, &win));
    volatile int **peers = xmalloc(sizeof(int *) * (size_t)n);
    for (int r = 0; r < n; r++) {
        MPI_Aint sz;
        int du;
        OK(MPI_Win_shared_query(win, r, &sz, &du, (void *)&peers[r]));
    }
    OK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < SLOTS; i++) mine[i] = me * 100000 + round * 100 + i;
        OK(MPI_Win_sync(win));
        OK(MPI_Barrier(node));
        OK(MPI_Win_sync(win));
        for (int r = 0; r < n; r++)
            for (int i = 0; i < SLOTS; i++)
                CHECK(peers[r][i] == r * 100000 + round * 100 + i, "round %d: rank %d's slot %d = %d", round, r, i,
                      peers[r][i]);
        OK(MPI_Barrier(node)); /* everyone has read before the next stores */
    }
    /* A store seen by a neighbour polling with Win_sync (no barrier between). */
    int right = (me + 1) % n;
    OK(MPI_Barrier(node));
    mine[1] = 4242 + me;
    OK(MPI_Win_sync(win));
    while (peers[right][1] != 4242 + right) OK(MPI_Win_sync(win));
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(node));
    free(peers);
    OK(MPI_Win_free(&win));
    OK(MPI_Comm_free(&node));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    fences();
    pscw();
    passive();
    shared_sync();
    OK(MPI_Finalize());
    printf("OK win_sync %d\n", rank);
    return 0;
}
