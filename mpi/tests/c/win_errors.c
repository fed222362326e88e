/* One-sided errors under MPI_ERRORS_RETURN (MPI-4.1 §12.8, §9.4): a target displacement outside
 * the window (MPI_ERR_RMA_RANGE: Put, Get, Accumulate, Fetch_and_op, Compare_and_swap, a derived
 * target type reaching past the end; the memory past the window untouched), a negative target
 * displacement (MPI_ERR_DISP), accumulate type mismatches and a derived type of two basic types
 * (MPI_ERR_TYPE), a user operation (MPI_ERR_OP), a negative count (MPI_ERR_COUNT), an operation
 * outside an epoch and a request-based one in a fence epoch, unlock/flush/complete/wait without
 * their epoch, nested and conflicting locks (MPI_ERR_RMA_SYNC), MPI_WIN_NULL (MPI_ERR_WIN), bad
 * lock type (MPI_ERR_LOCKTYPE), bad assertions (MPI_ERR_ASSERT), bad ranks (MPI_ERR_RANK),
 * MPI_Win_shared_query on a window of another flavour and MPI_Win_attach on a non-dynamic one
 * (MPI_ERR_RMA_FLAVOR), attach/detach errors (MPI_ERR_RMA_ATTACH), a negative size
 * (MPI_ERR_SIZE), disp_unit 0 (MPI_ERR_DISP). Every window still works after its errors.
 *
 * MPICH 4.0.2 (ch4:ucx) answers a bad lock type or assertion with MPI_ERR_ARG where the standard
 * names MPI_ERR_LOCKTYPE and MPI_ERR_ASSERT (STD_OR_MPICH accepts its class when built against
 * it); it does not check the range of target displacements (it writes past the window), accumulate
 * type signatures (it asserts or crashes), request-based operations in fence epochs, or attach
 * overlaps and detaches of unknown memory; a freed window's handle crashes it. The standard's
 * classes are checked here. Prints "OK win_errors <rank>". */
#include "check.h"

#define WINTS 16
#define SENTINEL 0x5a5a5a5a

/* The standard's class; MPICH 4.0.2's (another) accepted when built against MPICH proper. */
#if defined(MPICH_VERSION) && !defined(NEMESIS_MPI)
#define STD_OR_MPICH(call, std, mpich)                                                                   \
    do {                                                                                                   \
        int rc_ = (call), c_ = class_of(rc_);                                                              \
        CHECK(c_ == (std) || c_ == (mpich), "%s: class %d, expected %s (or MPICH's %s)", #call, c_, #std,  \
              #mpich);                                                                                     \
    } while (0)
#else
#define STD_OR_MPICH(call, std, mpich) FAILS_WITH(call, std)
#endif

static int rank, size;

static void never(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)in;
    (void)inout;
    (void)len;
    (void)type;
    CHECK(0, "a user operation called by an accumulate");
}

static void range_and_types(void) {
    /* 2 * WINTS ints, the window over the first half: the second stays SENTINEL. */
    int *mem = xmalloc(sizeof(int) * 2 * WINTS);
    for (int i = 0; i < 2 * WINTS; i++) mem[i] = SENTINEL;
    MPI_Win win;
    OK(MPI_Win_create(mem, WINTS * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int next = (rank + 1) % size, v[2 * WINTS], r[2 * WINTS];
    for (int i = 0; i < 2 * WINTS; i++) v[i] = i;
    MPI_Datatype vec, mixed;
    OK(MPI_Type_vector(4, 1, 5, MPI_INT, &vec)); /* spans 16 ints */
    OK(MPI_Type_commit(&vec));
    int lens[2] = {1, 1};
    MPI_Aint displs[2] = {0, 8};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
    OK(MPI_Type_create_struct(2, lens, displs, types, &mixed));
    OK(MPI_Type_commit(&mixed));
    MPI_Op user;
    OK(MPI_Op_create(never, 1, &user));

    /* Outside any epoch. */
    FAILS_WITH(MPI_Put(v, 1, MPI_INT, next, 0, 1, MPI_INT, win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Get(r, 1, MPI_INT, next, 0, 1, MPI_INT, win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_unlock(next, win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_unlock_all(win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_flush(next, win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_flush_all(win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_complete(win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_wait(win), MPI_ERR_RMA_SYNC);

    OK(MPI_Win_lock_all(0, win));
    for (int t = 0; t < size; t++) {
        FAILS_WITH(MPI_Put(v, 4, MPI_INT, t, WINTS - 2, 4, MPI_INT, win), MPI_ERR_RMA_RANGE);
        FAILS_WITH(MPI_Put(v, 1, MPI_INT, t, WINTS, 1, MPI_INT, win), MPI_ERR_RMA_RANGE);
        FAILS_WITH(MPI_Get(r, 2, MPI_INT, t, WINTS - 1, 2, MPI_INT, win), MPI_ERR_RMA_RANGE);
        FAILS_WITH(MPI_Accumulate(v, 4, MPI_INT, t, 1, 1, vec, MPI_SUM, win), MPI_ERR_RMA_RANGE);
        FAILS_WITH(MPI_Fetch_and_op(v, r, MPI_INT, t, WINTS, MPI_SUM, win), MPI_ERR_RMA_RANGE);
        FAILS_WITH(MPI_Compare_and_swap(v, v, r, MPI_INT, t, WINTS + 5, win), MPI_ERR_RMA_RANGE);
        FAILS_WITH(MPI_Put(v, 1, MPI_INT, t, -1, 1, MPI_INT, win), MPI_ERR_DISP);
        FAILS_WITH(MPI_Accumulate(v, 1, MPI_INT, t, 0, 1, MPI_DOUBLE, MPI_SUM, win), MPI_ERR_TYPE);
        FAILS_WITH(MPI_Accumulate(v, 1, mixed, t, 0, 1, mixed, MPI_SUM, win), MPI_ERR_TYPE);
        FAILS_WITH(MPI_Get_accumulate(v, 1, MPI_INT, r, 1, MPI_LONG, t, 0, 1, MPI_INT, MPI_SUM, win), MPI_ERR_TYPE);
        FAILS_WITH(MPI_Accumulate(v, 1, MPI_INT, t, 0, 1, MPI_INT, user, win), MPI_ERR_OP);
        FAILS_WITH(MPI_Fetch_and_op(v, r, MPI_INT, t, 0, MPI_OP_NULL, win), MPI_ERR_OP);
        FAILS_WITH(MPI_Put(v, -1, MPI_INT, t, 0, -1, MPI_INT, win), MPI_ERR_COUNT);
        FAILS_WITH(MPI_Put(v, 1, MPI_INT, size, 0, 1, MPI_INT, win), MPI_ERR_RANK);
        FAILS_WITH(MPI_Get(r, 1, MPI_INT, -5, 0, 1, MPI_INT, win), MPI_ERR_RANK);
        FAILS_WITH(MPI_Win_flush(size + 3, win), MPI_ERR_RANK);
        /* Nested: a lock on a target already locked by lock_all. */
        FAILS_WITH(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win), MPI_ERR_RMA_SYNC);
    }
    FAILS_WITH(MPI_Win_lock_all(0, win), MPI_ERR_RMA_SYNC);
    /* The window still works: a Put at the last int. */
    OK(MPI_Put(&v[7], 1, MPI_INT, next, WINTS - 1, 1, MPI_INT, win));
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (int i = 0; i < WINTS - 1; i++) CHECK(mem[i] == SENTINEL, "int %d of the window written: %d", i, mem[i]);
    CHECK(mem[WINTS - 1] == 7, "the Put after the errors: %d", mem[WINTS - 1]);
    for (int i = WINTS; i < 2 * WINTS; i++) CHECK(mem[i] == SENTINEL, "int %d past the window written", i);
    OK(MPI_Win_unlock(rank, win));

    /* Locks: nested, conflicting, bad type, bad assertion, bad rank. */
    OK(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
    FAILS_WITH(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, next, 0, win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_lock_all(0, win), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_fence(0, win), MPI_ERR_RMA_SYNC);
    MPI_Request req = MPI_REQUEST_NULL;
    FAILS_WITH(MPI_Rput(v, 1, MPI_INT, next, WINTS, 1, MPI_INT, win, &req), MPI_ERR_RMA_RANGE);
    OK(MPI_Win_unlock(next, win));
    STD_OR_MPICH(MPI_Win_lock(12345, next, 0, win), MPI_ERR_LOCKTYPE, MPI_ERR_ARG);
    STD_OR_MPICH(MPI_Win_lock(MPI_LOCK_SHARED, next, 0x7f000000, win), MPI_ERR_ASSERT, MPI_ERR_ARG);
    FAILS_WITH(MPI_Win_lock(MPI_LOCK_SHARED, size, 0, win), MPI_ERR_RANK);
    STD_OR_MPICH(MPI_Win_lock_all(0x7f000000, win), MPI_ERR_ASSERT, MPI_ERR_ARG);

    /* Fences: a request-based operation in a fence epoch, a bad assertion. */
    OK(MPI_Win_fence(0, win));
    FAILS_WITH(MPI_Rput(v, 1, MPI_INT, next, 0, 1, MPI_INT, win, &req), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Rget(r, 1, MPI_INT, next, 0, 1, MPI_INT, win, &req), MPI_ERR_RMA_SYNC);
    FAILS_WITH(MPI_Win_unlock(next, win), MPI_ERR_RMA_SYNC);
    STD_OR_MPICH(MPI_Win_fence(0x7f000000, win), MPI_ERR_ASSERT, MPI_ERR_ARG);
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    /* PSCW: a bad assertion to post. */
    MPI_Group g;
    OK(MPI_Win_get_group(win, &g));
    STD_OR_MPICH(MPI_Win_post(g, MPI_MODE_NOPUT | 0x7f000000, win), MPI_ERR_ASSERT, MPI_ERR_ARG);
    OK(MPI_Group_free(&g));

    OK(MPI_Op_free(&user));
    OK(MPI_Type_free(&vec));
    OK(MPI_Type_free(&mixed));
    OK(MPI_Win_free(&win));
    free(mem);
}

static void flavours_and_creation(void) {
    MPI_Win win;
    int *base;
    MPI_Aint sz;
    int du;
    void *p;
    char buf[64];
    OK(MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Win_shared_query(win, 0, &sz, &du, &p), MPI_ERR_RMA_FLAVOR);
    FAILS_WITH(MPI_Win_attach(win, buf, sizeof buf), MPI_ERR_RMA_FLAVOR);
    FAILS_WITH(MPI_Win_detach(win, buf), MPI_ERR_RMA_FLAVOR);
    OK(MPI_Win_free(&win));

    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Win_shared_query(win, 0, &sz, &du, &p), MPI_ERR_RMA_FLAVOR);
    OK(MPI_Win_attach(win, buf, 32));
    FAILS_WITH(MPI_Win_attach(win, buf + 16, 32), MPI_ERR_RMA_ATTACH); /* overlaps */
    FAILS_WITH(MPI_Win_detach(win, buf + 40), MPI_ERR_RMA_ATTACH); /* never attached */
    FAILS_WITH(MPI_Win_attach(win, buf, -1), MPI_ERR_SIZE);
    OK(MPI_Win_detach(win, buf));
    FAILS_WITH(MPI_Win_detach(win, buf), MPI_ERR_RMA_ATTACH); /* twice */
    OK(MPI_Win_free(&win));

    /* Creation errors go to the communicator's handler. */
    FAILS_WITH(MPI_Win_create(buf, -1, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win), MPI_ERR_SIZE);
    FAILS_WITH(MPI_Win_allocate(-8, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win), MPI_ERR_SIZE);
    FAILS_WITH(MPI_Win_allocate_shared(-8, 1, MPI_INFO_NULL, MPI_COMM_SELF, &base, &win), MPI_ERR_SIZE);
    FAILS_WITH(MPI_Win_create(buf, 64, 0, MPI_INFO_NULL, MPI_COMM_WORLD, &win), MPI_ERR_DISP);
    FAILS_WITH(MPI_Win_allocate(64, 0, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win), MPI_ERR_DISP);
    FAILS_WITH(MPI_Win_allocate(64, -4, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win), MPI_ERR_DISP);
    FAILS_WITH(MPI_Win_create(buf, 64, 1, MPI_INFO_NULL, MPI_COMM_NULL, &win), MPI_ERR_COMM);

    /* MPI_WIN_NULL and a freed window's old handle. */
    FAILS_WITH(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, MPI_WIN_NULL), MPI_ERR_WIN);
    FAILS_WITH(MPI_Win_fence(0, MPI_WIN_NULL), MPI_ERR_WIN);
    FAILS_WITH(MPI_Put(buf, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_WIN_NULL), MPI_ERR_WIN);
    win = MPI_WIN_NULL;
    FAILS_WITH(MPI_Win_free(&win), MPI_ERR_WIN);
    MPI_Win old;
    OK(MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    old = win;
    OK(MPI_Win_free(&win));
    FAILS_WITH(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, old), MPI_ERR_WIN);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    range_and_types();
    flavours_and_creation();
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Finalize());
    printf("OK win_errors %d\n", rank);
    return 0;
}
