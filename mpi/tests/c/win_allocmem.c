/* MPI_Win_create over MPI_Alloc_mem memory (what OSU and many codes do; node peers may map such memory and load and
 * store it instead of a system call per access): a window over part of a block, offset from its start, with guard
 * bytes around it in the same block; Put/Get/Accumulate/Fetch_and_op/Compare_and_swap from every rank to every rank
 * under lock_all with flushes, checked against the expected contents; an out-of-range Put is MPI_ERR_RMA_RANGE and the
 * guard bytes stay untouched; two windows in one block at once; the same traffic on a window over malloc memory (not
 * in a block: reached by a single copy) alongside; the normal order (Win_free, then Free_mem) for 100 rounds with no
 * descriptor left behind; and Free_mem of a block while a window still lies in it (erroneous, MPI-4.1 §12.2.1: the
 * library keeps the block until the window goes; peers' puts into it after the free must not crash anything).
 * Prints "OK win_allocmem <rank>". */
#include "check.h"

#include <dirent.h>
#include <stdint.h>
#include <unistd.h>

#define GUARD 100   /* bytes before the window in the block */
#define NLONG 600   /* the window: longs */
#define TAIL 64     /* guard bytes after the window */
#define ROUNDS 100

static int rank, size;

static long value_of(int from, int to, int k) { return (long)from * 1000000 + (long)to * 1000 + k; }

/* Open descriptors of this process whose target's name holds `what` (this library's MPI_Alloc_mem blocks are memfds
 * named nemesis-alloc-mem). */
static int open_fds(const char *what) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL, "opendir /proc/self/fd");
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[300], link[256];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, link, sizeof link - 1);
        if (len <= 0) continue;
        link[len] = 0;
        if (strstr(link, what)) n++;
    }
    closedir(d);
    return n;
}

/* A block with the window's longs at GUARD bytes in, the rest a guard pattern. */
static char *block_with_guards(MPI_Aint *total) {
    char *p;
    *total = GUARD + NLONG * (MPI_Aint)sizeof(long) + TAIL;
    OK(MPI_Alloc_mem(*total, MPI_INFO_NULL, &p));
    memset(p, 0xa5, (size_t)*total);
    memset(p + GUARD, 0, NLONG * sizeof(long));
    return p;
}

static void check_guards(const char *p, MPI_Aint total) {
    for (MPI_Aint i = 0; i < total; i++) {
        if (i >= GUARD && i < GUARD + NLONG * (MPI_Aint)sizeof(long)) continue;
        CHECK((unsigned char)p[i] == 0xa5, "guard byte %ld changed to %#x", (long)i, (unsigned char)p[i]);
    }
}

/* Every rank puts its slice into every rank's window (slices at rank × 8 longs), gets it back, adds 1 to the last
 * long of the target by Accumulate, takes a ticket by Fetch_and_op on long NLONG - 2 and swaps long NLONG - 3 by
 * Compare_and_swap (one winner per target). */
static void traffic(MPI_Win win, long *mine) {
    long src[8], back[8], one = 1, ticket, me = rank + 1, zero = 0, old;
    OK(MPI_Win_lock_all(0, win));
    for (int t = 0; t < size; t++) {
        for (int k = 0; k < 8; k++) src[k] = value_of(rank, t, k);
        OK(MPI_Put(src, 8, MPI_LONG, t, (MPI_Aint)rank * 8 * sizeof(long), 8, MPI_LONG, win));
        OK(MPI_Win_flush(t, win));
        OK(MPI_Get(back, 8, MPI_LONG, t, (MPI_Aint)rank * 8 * sizeof(long), 8, MPI_LONG, win));
        OK(MPI_Win_flush(t, win));
        for (int k = 0; k < 8; k++) CHECK(back[k] == src[k], "target %d long %d: %ld, put %ld", t, k, back[k], src[k]);
        OK(MPI_Accumulate(&one, 1, MPI_LONG, t, (NLONG - 1) * sizeof(long), 1, MPI_LONG, MPI_SUM, win));
        OK(MPI_Fetch_and_op(&one, &ticket, MPI_LONG, t, (NLONG - 2) * sizeof(long), MPI_SUM, win));
        OK(MPI_Compare_and_swap(&me, &zero, &old, MPI_LONG, t, (NLONG - 3) * sizeof(long), win));
        OK(MPI_Win_flush(t, win));
        CHECK(ticket >= 0 && ticket < size, "ticket %ld of %d", ticket, size);
        CHECK(old == 0 || (old >= 1 && old <= size && old != me), "compare_and_swap found %ld", old);
    }
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_sync(win));
    for (int r = 0; r < size; r++)
        for (int k = 0; k < 8; k++)
            CHECK(mine[r * 8 + k] == value_of(r, rank, k), "from %d long %d: %ld", r, k, mine[r * 8 + k]);
    CHECK(mine[NLONG - 1] == size, "accumulated %ld, expected %d", mine[NLONG - 1], size);
    CHECK(mine[NLONG - 2] == size, "tickets %ld, expected %d", mine[NLONG - 2], size);
    CHECK(mine[NLONG - 3] >= 1 && mine[NLONG - 3] <= size, "swapped in %ld", mine[NLONG - 3]);
}

static void window_in_part_of_a_block(void) {
    MPI_Aint total;
    char *p = block_with_guards(&total);
    long *mine = (long *)(p + GUARD);
    MPI_Win win;
    OK(MPI_Win_create(mine, NLONG * sizeof(long), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    traffic(win, mine);
    /* One long past the end, and a put straddling the end: refused, nothing written. */
    long src[2] = {-1, -1};
    int next = (rank + 1) % size;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
    FAILS_WITH(MPI_Put(src, 1, MPI_LONG, next, NLONG * sizeof(long), 1, MPI_LONG, win), MPI_ERR_RMA_RANGE);
    FAILS_WITH(MPI_Put(src, 2, MPI_LONG, next, (NLONG - 1) * sizeof(long), 2, MPI_LONG, win), MPI_ERR_RMA_RANGE);
    OK(MPI_Win_unlock(next, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    check_guards(p, total);
    OK(MPI_Win_free(&win));
    check_guards(p, total);
    OK(MPI_Free_mem(p));
}

/* Two windows over the two halves of one block, used at once. */
static void two_windows_in_one_block(void) {
    long *p;
    OK(MPI_Alloc_mem(2 * NLONG * sizeof(long), MPI_INFO_NULL, &p));
    memset(p, 0, 2 * NLONG * sizeof(long));
    MPI_Win a, b;
    OK(MPI_Win_create(p, NLONG * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &a));
    OK(MPI_Win_create(p + NLONG, NLONG * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &b));
    long va = 100 + rank, vb = 200 + rank;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    OK(MPI_Win_fence(0, a));
    OK(MPI_Win_fence(0, b));
    OK(MPI_Put(&va, 1, MPI_LONG, next, NLONG - 1, 1, MPI_LONG, a));
    OK(MPI_Put(&vb, 1, MPI_LONG, next, 0, 1, MPI_LONG, b));
    OK(MPI_Win_fence(0, a));
    OK(MPI_Win_fence(0, b));
    CHECK(p[NLONG - 1] == 100 + prev, "window a's last long %ld", p[NLONG - 1]);
    CHECK(p[NLONG] == 200 + prev, "window b's first long %ld", p[NLONG]);
    OK(MPI_Win_free(&a));
    OK(MPI_Win_free(&b));
    OK(MPI_Free_mem(p));
}

/* A window over malloc memory (in no block): reached the general way, with the same results. */
static void window_on_malloc(void) {
    long *p = malloc(NLONG * sizeof(long));
    CHECK(p != NULL, "malloc");
    memset(p, 0, NLONG * sizeof(long));
    MPI_Win win;
    OK(MPI_Win_create(p, NLONG * sizeof(long), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    traffic(win, p);
    OK(MPI_Win_free(&win));
    free(p);
}

/* Win_free then Free_mem, many times: no block stays open. */
static void rounds_leave_nothing(void) {
    const char *blocks = "nemesis-alloc-mem";
    int before = open_fds(blocks);
    for (int i = 0; i < ROUNDS; i++) {
        long *p;
        OK(MPI_Alloc_mem((i % 7 + 1) * 1000, MPI_INFO_NULL, &p));
        MPI_Win win;
        OK(MPI_Win_create(p, (i % 7 + 1) * 1000, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
        long v = i;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, (rank + 1) % size, 0, win));
        OK(MPI_Put(&v, 1, MPI_LONG, (rank + 1) % size, 8, 1, MPI_LONG, win));
        OK(MPI_Win_unlock((rank + 1) % size, win));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        CHECK(p[1] == i, "round %d: %ld", i, p[1]);
        OK(MPI_Win_free(&win));
        OK(MPI_Free_mem(p));
    }
    int after = open_fds(blocks);
    CHECK(after == before, "%d blocks open before the rounds, %d after", before, after);
}

/* Free_mem before Win_free (erroneous): the window's memory stays valid for the peers until the window goes. */
static void free_mem_while_in_a_window(void) {
    long *p;
    OK(MPI_Alloc_mem(NLONG * sizeof(long), MPI_INFO_NULL, &p));
    MPI_Win win;
    OK(MPI_Win_create(p, NLONG * sizeof(long), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    OK(MPI_Free_mem(p));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    long v = rank;
    OK(MPI_Win_lock_all(0, win));
    for (int t = 0; t < size; t++) {
        OK(MPI_Put(&v, 1, MPI_LONG, t, (MPI_Aint)rank * sizeof(long), 1, MPI_LONG, win));
        OK(MPI_Win_flush(t, win));
    }
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Win_free(&win));
    /* Memory allocated now may reuse the address: it is fresh. */
    long *q;
    OK(MPI_Alloc_mem(NLONG * sizeof(long), MPI_INFO_NULL, &q));
    memset(q, 0x11, NLONG * sizeof(long));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < NLONG; i++) CHECK(q[i] == 0x1111111111111111L, "fresh memory changed at %d", i);
    OK(MPI_Free_mem(q));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    window_in_part_of_a_block();
    two_windows_in_one_block();
    window_on_malloc();
    rounds_leave_nothing();
    if (!getenv("WIN_ALLOCMEM_STANDARD_ONLY")) free_mem_while_in_a_window();
    OK(MPI_Finalize());
    printf("OK win_allocmem %d\n", rank);
    return 0;
}
