/* Non-blocking collectives under fault tolerance (mpi/src/coll/nbc/ordered.rs): every iteration
 * starts an MPI_Iallreduce, an MPI_Ibcast from a rotating root, an MPI_Iscan and an MPI_Ibarrier,
 * exchanges a point-to-point ring message while they are in flight, tests the barrier in a loop,
 * waits for the others in an order that depends on the rank's parity, and adds what it got to a
 * running sum, checked against the closed form. Every EVERY iterations it checkpoints
 * (MPIX_Checkpoint); FT_TEST_HOLD=<rank>:<n> makes that rank's first incarnation stop after its
 * n-th checkpoint, write its pid to FT_TEST_DIR/held-<rank> and wait to be killed. Its group
 * restarts from the checkpoint and re-executes: the re-executed collectives' sends must be the
 * first run's, message for message (their stamps' sequence numbers and digests are checked by
 * the other group), or the job ends with SendDeterminismViolated. Prints "sum <rank> <value>" and
 * "OK ft_nbc <rank>". */
#include "ft_hold.h"

#include <stdint.h>
#include <time.h>
#include <unistd.h>

#define ITERS 24
#define EVERY 6

/* What a rank checkpoints. */
struct state {
    int iter;
    long sum;
};

#define N 64

static void step(struct state *s, int rank, int size) {
    int it = s->iter;
    int v[N], ar[N], sc[N];
    for (int j = 0; j < N; j++) v[j] = rank * 10 + it + j;
    int root = it % size;
    int b[N];
    for (int j = 0; j < N; j++) b[j] = rank == root ? it * 7 + j : -1;
    MPI_Request r[4];
    OK(MPI_Iallreduce(v, ar, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[0]));
    OK(MPI_Ibcast(b, N, MPI_INT, root, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Iscan(v, sc, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[2]));
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &r[3]));

    /* Point-to-point among the collectives in flight. */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    int out = rank * 1000 + it, in = -1;
    OK(MPI_Sendrecv(&out, 1, MPI_INT, next, 5, &in, 1, MPI_INT, prev, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(in == prev * 1000 + it, "ring %d from %d", in, prev);
    s->sum += in;

    int flag = 0;
    while (!flag) OK(MPI_Test(&r[3], &flag, MPI_STATUS_IGNORE));
    if (rank % 2) {
        OK(MPI_Wait(&r[2], MPI_STATUS_IGNORE));
        OK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
        OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    } else {
        OK(MPI_Waitall(3, r, MPI_STATUSES_IGNORE));
    }
    for (int j = 0; j < N; j++) {
        /* sum over ranks q of q*10 + it + j */
        int want = 10 * size * (size - 1) / 2 + size * (it + j);
        CHECK(ar[j] == want, "allreduce[%d] = %d, want %d", j, ar[j], want);
        CHECK(b[j] == it * 7 + j, "bcast[%d] = %d", j, b[j]);
        int scan = 10 * rank * (rank + 1) / 2 + (rank + 1) * (it + j);
        CHECK(sc[j] == scan, "scan[%d] = %d, want %d", j, sc[j], scan);
        s->sum += ar[j] + b[j] + sc[j];
    }
}

int main(int argc, char **argv) {
    int rank, size;
    ft_init(&argc, &argv, &rank, &size);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    struct state s = {0, 0};
    if (ft_restore(&s, sizeof s)) fprintf(stderr, "ft_nbc: rank %d resumes at iteration %d\n", rank, s.iter);
    while (s.iter < ITERS) {
        step(&s, rank, size);
        s.iter++;
        if (s.iter % EVERY == 0 && s.iter < ITERS) checkpoint_then_hold(&s, sizeof s, rank);
    }
    printf("sum %d %ld\n", rank, s.sum);
    printf("OK ft_nbc %d\n", rank);
    MPI_Finalize();
    return 0;
}
