/* User reduction operations that call MPI (MPI lets them), at the thread level REENTRANT_LEVEL
 * names (reentrant.h; under MULTIPLE a second thread calls MPI meanwhile):
 * - an operation calling MPI_Type_size, MPI_Comm_rank and MPI_Test (which moves the non-blocking
 *   collectives in flight) inside MPI_Allreduce, MPI_Reduce and
 *   MPI_Reduce_local, and inside MPI_Iallreduce completed by MPI_Wait and by an MPI_Test loop;
 * - an operation on a non-contiguous type (a vector: the library unpacks it for each call) that
 *   frees that type on its first call (MPI lets a type be freed while in use), blocking and not.
 * Every result is checked. Prints "OK reentrant_ops <rank>". */
#include "reentrant.h"

enum { N = 64 };

static long calls;
static MPI_Datatype vec = MPI_DATATYPE_NULL;

/* inout[i] += in[i] on ints, asking MPI about the type and the rank on each call. */
static void sum_asking(void *in, void *inout, int *len, MPI_Datatype *dt) {
    static int running;
    /* One collective in flight at a time here: the library must not run this operation again
     * from the MPI_Test below (advancing the collective that is running it). */
    CHECK(!running, "the operation entered again from inside itself");
    running = 1;
    int size = -1, r = -1;
    OK(MPI_Type_size(*dt, &size));
    CHECK(size == (int)sizeof(int), "MPI_Type_size in an operation: %d", size);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
    CHECK(r == rank, "MPI_Comm_rank in an operation: %d", r);
    /* A completion call: it moves the non-blocking collectives in flight, among them the one
     * running this operation (which must not be advanced from inside itself). */
    MPI_Request none = MPI_REQUEST_NULL;
    int flag = 0;
    OK(MPI_Test(&none, &flag, MPI_STATUS_IGNORE));
    CHECK(flag, "MPI_Test of MPI_REQUEST_NULL in an operation");
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
    calls++;
    running = 0;
}

/* The same on `vec` (two ints, stride 2: the first and third of each four), freeing it on the
 * first call; the library keeps its layout for the operation in flight. */
static void sum_freeing(void *in, void *inout, int *len, MPI_Datatype *dt) {
    if (vec != MPI_DATATYPE_NULL) {
        CHECK(*dt == vec, "the operation's datatype");
        int size = -1;
        OK(MPI_Type_size(*dt, &size));
        CHECK(size == 2 * (int)sizeof(int), "MPI_Type_size(vec) = %d", size);
        OK(MPI_Type_free(&vec));
    }
    for (int i = 0; i < *len; i++) {
        ((int *)inout)[4 * i] += ((int *)in)[4 * i];
        ((int *)inout)[4 * i + 2] += ((int *)in)[4 * i + 2];
    }
    calls++;
}

static int expected_sum(int i) { return nranks * i + nranks * (nranks - 1) / 2; }

static void check_sum(const int *v, const char *what) {
    for (int i = 0; i < N; i++) CHECK(v[i] == expected_sum(i), "%s: [%d] = %d, expected %d", what, i, v[i], expected_sum(i));
}

static void asking(void) {
    MPI_Op op;
    OK(MPI_Op_create(sum_asking, 1, &op));
    int in[N], out[N];
    for (int i = 0; i < N; i++) in[i] = i + rank;
    OK(MPI_Allreduce(in, out, N, MPI_INT, op, MPI_COMM_WORLD));
    check_sum(out, "Allreduce");
    OK(MPI_Reduce(in, out, N, MPI_INT, op, 0, MPI_COMM_WORLD));
    if (rank == 0) check_sum(out, "Reduce");
    MPI_Request req;
    OK(MPI_Iallreduce(in, out, N, MPI_INT, op, MPI_COMM_WORLD, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    check_sum(out, "Iallreduce + Wait");
    memset(out, 0, sizeof out);
    OK(MPI_Iallreduce(in, out, N, MPI_INT, op, MPI_COMM_WORLD, &req));
    for (int done = 0; !done;) OK(MPI_Test(&req, &done, MPI_STATUS_IGNORE));
    check_sum(out, "Iallreduce + Test");
    int acc[N];
    for (int i = 0; i < N; i++) acc[i] = 1;
    calls = 0;
    OK(MPI_Reduce_local(in, acc, N, MPI_INT, op));
    CHECK(calls == 1 && acc[5] == 6 + rank, "Reduce_local: %d calls, %d", (int)calls, acc[5]);
    OK(MPI_Op_free(&op));
}

static void freeing(int nonblocking) {
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &vec));
    OK(MPI_Type_commit(&vec));
    MPI_Op op;
    OK(MPI_Op_create(sum_freeing, 1, &op));
    /* Its extent is 3 ints: resized to 4, N/4 elements cover the first and third int of each
     * four. */
    MPI_Datatype t;
    OK(MPI_Type_create_resized(vec, 0, 4 * sizeof(int), &t));
    OK(MPI_Type_free(&vec));
    vec = t;
    OK(MPI_Type_commit(&vec));
    int in[N], out[N];
    for (int i = 0; i < N; i++) in[i] = i + rank, out[i] = -7;
    calls = 0;
    if (nonblocking) {
        MPI_Request req;
        OK(MPI_Iallreduce(in, out, N / 4, vec, op, MPI_COMM_WORLD, &req));
        OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    } else {
        OK(MPI_Allreduce(in, out, N / 4, vec, op, MPI_COMM_WORLD));
    }
    for (int i = 0; i < N; i++) {
        int want = i % 2 == 0 ? expected_sum(i) : -7;
        CHECK(out[i] == want, "%s on a freed vector: [%d] = %d, expected %d", nonblocking ? "Iallreduce" : "Allreduce",
              i, out[i], want);
    }
    long all = 0;
    OK(MPI_Allreduce(&calls, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK(nranks == 1 || all > 0, "the operation was not called");
    /* Not called on one rank: the type is still there. */
    if (vec != MPI_DATATYPE_NULL) OK(MPI_Type_free(&vec));
    OK(MPI_Op_free(&op));
}

int main(int argc, char **argv) {
    reentrant_init(&argc, &argv);
    for (int round = 0; round < 3; round++) {
        asking();
        freeing(0);
        freeing(1);
    }
    reentrant_stop_thread();
    OK(MPI_Finalize());
    printf("OK reentrant_ops %d\n", rank);
    return 0;
}
