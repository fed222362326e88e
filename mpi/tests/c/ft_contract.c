/* The restart contract (mpi/src/ft/mod.rs): a restarted rank calls MPIX_Checkpoint_restore right
 * after MPI_Init and communicates nothing before it. Each iteration sums an Allreduce on
 * MPI_COMM_WORLD and a ring Sendrecv; every EVERY iterations the ranks checkpoint. With
 * FT_CONTRACT_KILL=<rank>, that rank's first incarnation kills itself (SIGKILL) right after its
 * first checkpoint: its group restarts from it. Before its restore, each restarted rank tries
 * every kind of communication under MPI_ERRORS_RETURN (point-to-point, probes, collectives,
 * blocking and not, communicator creation, a checkpoint): each returns MPIX_ERR_NOT_RESTORED at
 * once (no hang); local calls work, and the restore then succeeds (the refused calls made no
 * object). Each rank prints its sum, the same with and without the kill. FT_CONTRACT_FATAL=1:
 * under MPI_ERRORS_ARE_FATAL, the restarted rank's MPI_Allreduce before the restore ends the job
 * with a message naming the call. The program asks for MPI_THREAD_MULTIPLE: with fault tolerance
 * on (NEMESIS_FT_GROUPS set) it gets MPI_THREAD_SERIALIZED (send determinism), without it
 * MPI_THREAD_MULTIPLE. */
#include "ft_hold.h"

#include <signal.h>

#define ITERS 8
#define EVERY 4

/* Whether fault tolerance is on (read before MPI_Init takes the variable out of the environment;
 * whether this is a restarted incarnation: ft_hold.h). */
static int ft_on;

__attribute__((constructor)) static void read_ft_on(void) { ft_on = getenv("NEMESIS_FT_GROUPS") != NULL; }

static void refused(int rc, const char *call) {
    CHECK(class_of(rc) == MPIX_ERR_NOT_RESTORED, "%s before MPIX_Checkpoint_restore returned %d (class %d)", call,
          rc, class_of(rc));
}

#define REFUSED(call) refused((call), #call)

/* Every kind of communication fails at once before the restore; local calls work. */
static void before_restore(int rank, int size) {
    int v = rank, w = -1, flag = 0;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Comm c = MPI_COMM_NULL;
    MPI_Status st;
    REFUSED(MPI_Send(&v, 1, MPI_INT, next, 1, MPI_COMM_WORLD));
    REFUSED(MPI_Ssend(&v, 1, MPI_INT, next, 1, MPI_COMM_WORLD));
    REFUSED(MPI_Recv(&w, 1, MPI_INT, prev, 1, MPI_COMM_WORLD, &st));
    REFUSED(MPI_Recv(&w, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &st));
    REFUSED(MPI_Isend(&v, 1, MPI_INT, next, 1, MPI_COMM_WORLD, &r));
    REFUSED(MPI_Irecv(&w, 1, MPI_INT, prev, 1, MPI_COMM_WORLD, &r));
    REFUSED(MPI_Sendrecv(&v, 1, MPI_INT, next, 1, &w, 1, MPI_INT, prev, 1, MPI_COMM_WORLD, &st));
    REFUSED(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    REFUSED(MPI_Probe(prev, 1, MPI_COMM_WORLD, &st));
    REFUSED(MPI_Barrier(MPI_COMM_WORLD));
    REFUSED(MPI_Barrier(MPI_COMM_SELF));
    REFUSED(MPI_Allreduce(&v, &w, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    REFUSED(MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD));
    REFUSED(MPI_Ibarrier(MPI_COMM_WORLD, &r));
    REFUSED(MPI_Iallreduce(&v, &w, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r));
    REFUSED(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    REFUSED(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &c));
    REFUSED(MPIX_Checkpoint(&v, sizeof v));
    CHECK(r == MPI_REQUEST_NULL && c == MPI_COMM_NULL && w == -1, "a refused call left a result");
    int me = -1, n = -1;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &n));
    CHECK(me == rank && n == size, "rank %d of %d", me, n);
    char msg[MPI_MAX_ERROR_STRING];
    int len;
    OK(MPI_Error_string(MPIX_ERR_NOT_RESTORED, msg, &len));
    CHECK(strstr(msg, "MPIX_ERR_NOT_RESTORED") && strstr(msg, "before MPIX_Checkpoint_restore"), "'%s'", msg);
}

int main(int argc, char **argv) {
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank = rank;
    int want = ft_on ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
    CHECK(provided == want, "MPI_THREAD_MULTIPLE required, %d provided (fault tolerance %d)", provided, ft_on);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    if (restarted && getenv("FT_CONTRACT_FATAL") != NULL) {
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
        int v = 1, w;
        MPI_Allreduce(&v, &w, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(0, "the Allreduce before MPIX_Checkpoint_restore did not end the job");
    }
    if (restarted) before_restore(rank, size);

    struct {
        int iter;
        long sum;
    } s = {0, 0};
    int restored = ft_restore(&s, sizeof s);
    CHECK(restored == restarted, "restored %d, restarted %d", restored, restarted);
    if (restored) fprintf(stderr, "ft_contract: rank %d resumes at iteration %d\n", rank, s.iter);
    const char *kill = getenv("FT_CONTRACT_KILL");
    int victim = kill != NULL && !restarted ? atoi(kill) : -1;
    while (s.iter < ITERS) {
        int v = (rank + 1) * (s.iter + 1), w = 0;
        OK(MPI_Allreduce(&v, &w, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(w == size * (size + 1) / 2 * (s.iter + 1), "allreduce %d at %d", w, s.iter);
        s.sum += w;
        int next = (rank + 1) % size, prev = (rank + size - 1) % size, mine = rank * 100 + s.iter, got = -1;
        OK(MPI_Sendrecv(&mine, 1, MPI_INT, next, 2, &got, 1, MPI_INT, prev, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(got == prev * 100 + s.iter, "ring %d at %d", got, s.iter);
        s.sum += got;
        s.iter++;
        if (s.iter % EVERY == 0 && s.iter < ITERS) {
            OK(MPIX_Checkpoint(&s, sizeof s));
            if (rank == victim && s.iter == EVERY) raise(SIGKILL);
        }
    }
    printf("sum %d %ld\n", rank, s.sum);
    printf("OK ft_contract %d\n", rank);
    MPI_Finalize();
    return 0;
}
