/* Windows across a restart (mpi/src/ft/image/windows.rs): each FT group of two ranks (a Comm_split
 * by rank / 2) makes a window of each flavour (MPI_Win_allocate_shared, MPI_Win_allocate,
 * MPI_Win_create over memory of the application's, MPI_Win_create_dynamic with one attached
 * region), each with a name, an attribute of a window keyval and a user error handler, and keeps
 * the handles, the allocated bases and the peer's region address in the bytes it checkpoints.
 * The application's memory (the struct state itself, window memory of the create and dynamic
 * windows inside it) lives in a page mapped at a fixed address in every incarnation (the
 * application puts its memory back: the library saves only allocated window memory).
 *
 * Each iteration, on every window: a fence, a put of a value into the peer's slot, a fence; an
 * exclusive lock of the peer, MPI_Fetch_and_op on its counter, unlock; a shared lock, a get of the
 * peer's slots, unlock; a closing fence (nothing is outstanding at the checkpoint: a fence epoch
 * no operation used). The sum of everything read is printed and must be the failure-free run's.
 * Before each checkpoint, one is refused (MPI_ERR_PENDING) inside a lock epoch and in a fence
 * epoch with a get issued. After a restore:
 * the same handles name the windows (name, attribute, error handler, flavour), MPI_WIN_BASE of the
 * allocate flavours is the saved pointer, their contents equal the copy the rank kept at the
 * checkpoint, and an error on a window still reaches the user handler.
 * A group whose two ranks are on two nodes (nemesis-run --nodes 4) makes window 0 with
 * MPI_Win_allocate (a shared window cannot span nodes): every window then goes by the remote path.
 * FT_TEST_HOLD=<rank>:<n>: that rank's first incarnation holds after its n-th checkpoint, to be
 * killed there (ft_hold.h). */
#include "ft_hold.h"

#include <stdint.h>
#include <sys/mman.h>
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

#define ITERS 12
#define EVERY 4
#define N 8
#define NWIN 4
#define AREA ((void *)0x5a5a00000000ULL)
#define AREA_BYTES (1 << 16)

static const char *names[NWIN] = {"shared", "allocate", "create", "dynamic"};
static int flavors[NWIN] = {MPI_WIN_FLAVOR_SHARED, MPI_WIN_FLAVOR_ALLOCATE, MPI_WIN_FLAVOR_CREATE,
                            MPI_WIN_FLAVOR_DYNAMIC};

struct state {
    int iter;
    int spans; /* the group spans nodes: window 0 is MPI_Win_allocate too (remote path) */
    MPI_Comm grp;
    MPI_Win win[NWIN];
    int key;
    MPI_Errhandler eh;
    long *base[NWIN];      /* this rank's window memory */
    MPI_Aint peer_dyn;     /* the peer's region (dynamic window) */
    long mem[2][N + 1];    /* create and dynamic memory: the application's */
    long copy[2][N + 1];   /* the allocate flavours' contents at the checkpoint */
    long sum;
};

static int errors;
static void on_err(MPI_Win *w, int *code, ...) {
    (void)w;
    (void)code;
    errors++;
}

static void make(struct state *s, int rank) {
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &s->grp));
    OK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &s->key, NULL));
    OK(MPI_Win_create_errhandler(on_err, &s->eh));
    MPI_Aint bytes = (N + 1) * sizeof(long);
    MPI_Comm node;
    int here;
    OK(MPI_Comm_split_type(s->grp, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    OK(MPI_Comm_size(node, &here));
    OK(MPI_Comm_free(&node));
    s->spans = here < 2;
    if (s->spans) {
        flavors[0] = MPI_WIN_FLAVOR_ALLOCATE;
        OK(MPI_Win_allocate(bytes, sizeof(long), MPI_INFO_NULL, s->grp, &s->base[0], &s->win[0]));
    } else {
        OK(MPI_Win_allocate_shared(bytes, sizeof(long), MPI_INFO_NULL, s->grp, &s->base[0], &s->win[0]));
    }
    OK(MPI_Win_allocate(bytes, sizeof(long), MPI_INFO_NULL, s->grp, &s->base[1], &s->win[1]));
    s->base[2] = s->mem[0];
    OK(MPI_Win_create(s->mem[0], bytes, sizeof(long), MPI_INFO_NULL, s->grp, &s->win[2]));
    OK(MPI_Win_create_dynamic(MPI_INFO_NULL, s->grp, &s->win[3]));
    s->base[3] = s->mem[1];
    OK(MPI_Win_attach(s->win[3], s->mem[1], bytes));
    MPI_Aint mine, both[2];
    OK(MPI_Get_address(s->mem[1], &mine));
    OK(MPI_Allgather(&mine, 1, MPI_AINT, both, 1, MPI_AINT, s->grp));
    int grank;
    OK(MPI_Comm_rank(s->grp, &grank));
    s->peer_dyn = both[1 - grank];
    for (int k = 0; k < NWIN; k++) {
        OK(MPI_Win_set_name(s->win[k], names[k]));
        OK(MPI_Win_set_attr(s->win[k], s->key, (void *)(intptr_t)(10 + k)));
        OK(MPI_Win_set_errhandler(s->win[k], s->eh));
        for (int i = 0; i <= N; i++) s->base[k][i] = 0;
    }
    OK(MPI_Barrier(s->grp));
}

/* After a restore: the handles name the same windows; allocated memory is back where it was. */
static void check_restored(struct state *s) {
    for (int k = 0; k < NWIN; k++) {
        char name[MPI_MAX_OBJECT_NAME];
        int len, flag, *flavor;
        void *v;
        OK(MPI_Win_get_name(s->win[k], name, &len));
        CHECK(strcmp(name, names[k]) == 0, "window %d is named %s", k, name);
        OK(MPI_Win_get_attr(s->win[k], s->key, &v, &flag));
        CHECK(flag && v == (void *)(intptr_t)(10 + k), "window %d attribute %d %p", k, flag, v);
        OK(MPI_Win_get_attr(s->win[k], MPI_WIN_CREATE_FLAVOR, &flavor, &flag));
        CHECK(flag && *flavor == flavors[k], "window %d flavour %d", k, flag ? *flavor : -1);
        MPI_Errhandler eh;
        OK(MPI_Win_get_errhandler(s->win[k], &eh));
        CHECK(eh == s->eh, "window %d handler %#x, want %#x", k, (unsigned)eh, (unsigned)s->eh);
        OK(MPI_Errhandler_free(&eh));
        if (k < 2) {
            void *base;
            OK(MPI_Win_get_attr(s->win[k], MPI_WIN_BASE, &base, &flag));
            CHECK(flag && base == s->base[k], "window %d MPI_WIN_BASE %p, saved %p", k, base, (void *)s->base[k]);
            CHECK(memcmp(s->base[k], s->copy[k], sizeof s->copy[k]) == 0, "window %d contents differ", k);
        }
    }
    int before = errors;
    long x = 1;
    OK(MPI_Win_fence(0, s->win[0]));
    int rc = MPI_Put(&x, 1, MPI_LONG, 7, 0, 1, MPI_LONG, s->win[0]);
    CHECK(rc != MPI_SUCCESS && errors == before + 1, "a put to rank 7: rc %d, handler calls %d", rc,
          errors - before);
    OK(MPI_Win_fence(0, s->win[0]));
}

static void step(struct state *s) {
    int grank;
    OK(MPI_Comm_rank(s->grp, &grank));
    int peer = 1 - grank;
    for (int k = 0; k < NWIN; k++) {
        MPI_Win w = s->win[k];
        MPI_Aint at = k == 3 ? s->peer_dyn : 0, unit = k == 3 ? (MPI_Aint)sizeof(long) : 1;
        long v = 1000 * k + 10 * s->iter + grank + 1, one = 1, old = 0, got[N];
        OK(MPI_Win_fence(0, w));
        OK(MPI_Put(&v, 1, MPI_LONG, peer, at + unit * (s->iter % N), 1, MPI_LONG, w));
        OK(MPI_Win_fence(0, w));
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, peer, 0, w));
        OK(MPI_Fetch_and_op(&one, &old, MPI_LONG, peer, at + unit * N, MPI_SUM, w));
        OK(MPI_Win_unlock(peer, w));
        OK(MPI_Win_lock(MPI_LOCK_SHARED, peer, 0, w));
        OK(MPI_Get(got, N, MPI_LONG, peer, at, N, MPI_LONG, w));
        OK(MPI_Win_unlock(peer, w));
        OK(MPI_Win_fence(0, w));
        s->sum += old * 7;
        for (int i = 0; i < N; i++) s->sum += got[i] * (i + 1);
        for (int i = 0; i <= N; i++) s->sum += s->base[k][i];
    }
}

static void checkpoint(struct state *s, int rank) {
    int grank;
    OK(MPI_Comm_rank(s->grp, &grank));
    OK(MPI_Win_lock(MPI_LOCK_SHARED, 1 - grank, 0, s->win[1]));
    int rc = MPIX_Checkpoint(s, sizeof *s), class = -1;
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_PENDING, "MPIX_Checkpoint inside a lock epoch: class %d", class);
    OK(MPI_Win_unlock(1 - grank, s->win[1]));
    long scratch;
    OK(MPI_Win_fence(0, s->win[2]));
    OK(MPI_Get(&scratch, 1, MPI_LONG, 1 - grank, 0, 1, MPI_LONG, s->win[2]));
    rc = MPIX_Checkpoint(s, sizeof *s);
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_PENDING, "MPIX_Checkpoint with a get in a fence epoch: class %d", class);
    OK(MPI_Win_fence(0, s->win[2]));
    OK(MPI_Barrier(s->grp));
    for (int k = 0; k < 2; k++) memcpy(s->copy[k], s->base[k], sizeof s->copy[k]);
    checkpoint_then_hold(s, sizeof *s, rank);
}

int main(int argc, char **argv) {
    int rank, size;
    ft_init(&argc, &argv, &rank, &size);
    CHECK(size % 2 == 0, "an even number of ranks");
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    struct state *s = mmap(AREA, AREA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                           -1, 0);
    CHECK(s == (struct state *)AREA, "mmap at %p: %p", AREA, (void *)s);
    if (ft_restore(s, sizeof *s)) {
        fprintf(stderr, "ft_win: rank %d resumes at iteration %d, spans %d (windows %#x %#x %#x %#x)\n", rank, s->iter, s->spans,
                (unsigned)s->win[0], (unsigned)s->win[1], (unsigned)s->win[2], (unsigned)s->win[3]);
        if (s->spans) flavors[0] = MPI_WIN_FLAVOR_ALLOCATE;
        check_restored(s);
    } else {
        memset(s, 0, sizeof *s);
        make(s, rank);
    }
    while (s->iter < ITERS) {
        step(s);
        s->iter++;
        if (s->iter % EVERY == 0 && s->iter < ITERS) checkpoint(s, rank);
    }
    printf("sum %d %ld\n", rank, s->sum);
    for (int k = 0; k < NWIN; k++) {
        if (k == 3) OK(MPI_Win_detach(s->win[3], s->mem[1]));
        OK(MPI_Win_free(&s->win[k]));
    }
    OK(MPI_Win_free_keyval(&s->key));
    OK(MPI_Errhandler_free(&s->eh));
    OK(MPI_Comm_free(&s->grp));
    printf("OK ft_win %d\n", rank);
    MPI_Finalize();
    return 0;
}
