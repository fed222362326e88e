/* Partitioned communication (MPI-4.1 chapter 4) in a ring: each rank sends to its right
 * neighbour in SP partitions and receives from its left in RP (different counts, the same total
 * size), over several activations started with MPI_Startall; partitions are marked ready in
 * reverse order, by Pready_range and by Pready_list, and from 4 threads at once; Parrived polled
 * until each partition is there, the data checked per partition as it arrives. Also a strided
 * derived type, partitions past the eager size, MPI_PROC_NULL, a size mismatch (MPI_ERR_TRUNCATE)
 * and bad input. */
#include "check.h"

#include <pthread.h>

enum { SP = 8, RP = 4, PER = 3000, ROUNDS = 4, THREADS = 4 };

static int value(int rank, int round, int i) {
    return rank * 1000003 + round * 7919 + i;
}

struct marker {
    MPI_Request req;
    int first;
};

static void *mark(void *arg) {
    struct marker *m = arg;
    for (int p = m->first; p < SP; p += THREADS) OK(MPI_Pready(p, m->req));
    return NULL;
}

static void ring(int rank, int size, int threaded) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int total = SP * PER;
    int *out = xmalloc(total * sizeof(int)), *in = xmalloc(total * sizeof(int));
    MPI_Request rs[2];
    OK(MPI_Precv_init(in, RP, total / RP, MPI_INT, left, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[0]));
    OK(MPI_Psend_init(out, SP, PER, MPI_INT, right, 5, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[1]));
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < total; i++) out[i] = value(rank, round, i), in[i] = -1;
        OK(MPI_Startall(2, rs));
        int flag = 1;
        OK(MPI_Parrived(rs[0], 0, &flag));
        if (threaded && round % 2 == 1) {
            pthread_t t[THREADS];
            struct marker m[THREADS];
            for (int k = 0; k < THREADS; k++) {
                m[k] = (struct marker){rs[1], k};
                CHECK(pthread_create(&t[k], NULL, mark, &m[k]) == 0, "pthread_create");
            }
            for (int k = 0; k < THREADS; k++) pthread_join(t[k], NULL);
        } else if (round % 4 == 0) {
            for (int p = SP - 1; p >= 0; p--) OK(MPI_Pready(p, rs[1]));
        } else if (round % 4 == 1 || round % 4 == 3) {
            OK(MPI_Pready_range(0, SP / 2 - 1, rs[1]));
            OK(MPI_Pready_range(SP / 2, SP - 1, rs[1]));
        } else {
            int list[SP];
            for (int p = 0; p < SP; p++) list[p] = (p * 5) % SP;
            OK(MPI_Pready_list(SP, list, rs[1]));
        }
        /* Each receive partition as it arrives. */
        int seen[RP] = {0}, left_to_see = RP;
        while (left_to_see > 0) {
            for (int q = 0; q < RP; q++) {
                if (seen[q]) continue;
                OK(MPI_Parrived(rs[0], q, &flag));
                if (!flag) continue;
                seen[q] = 1;
                left_to_see--;
                int per = total / RP;
                for (int i = q * per; i < (q + 1) * per; i++)
                    CHECK(in[i] == value(left, round, i), "round %d partition %d [%d] = %d", round, q, i, in[i]);
            }
        }
        MPI_Status st[2];
        OK(MPI_Waitall(2, rs, st));
        CHECK(rs[0] != MPI_REQUEST_NULL && rs[1] != MPI_REQUEST_NULL, "partitioned requests are persistent");
        CHECK(st[0].MPI_SOURCE == left && st[0].MPI_TAG == 5, "status %d %d", st[0].MPI_SOURCE, st[0].MPI_TAG);
        int n = 0;
        OK(MPI_Get_count(&st[0], MPI_INT, &n));
        CHECK(n == total, "count %d", n);
    }
    OK(MPI_Request_free(&rs[0]));
    OK(MPI_Request_free(&rs[1]));
    free(out);
    free(in);
}

/* A strided type: every other double, 2 partitions sent, 5 received. */
static void strided(int rank, int size) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    enum { N = 1000 };
    double *a = xmalloc(2 * N * sizeof(double)), *b = xmalloc(2 * N * sizeof(double));
    MPI_Datatype pair_first;
    OK(MPI_Type_vector(1, 1, 2, MPI_DOUBLE, &pair_first));
    MPI_Datatype every2;
    OK(MPI_Type_create_resized(pair_first, 0, 2 * sizeof(double), &every2));
    OK(MPI_Type_commit(&every2));
    MPI_Request rs[2];
    OK(MPI_Psend_init(a, 2, N / 2, every2, right, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[1]));
    OK(MPI_Precv_init(b, 5, N / 5, every2, left, 6, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[0]));
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 2 * N; i++) a[i] = rank * 10000 + i + round, b[i] = -1;
        OK(MPI_Start(&rs[0]));
        OK(MPI_Start(&rs[1]));
        OK(MPI_Pready(1, rs[1]));
        OK(MPI_Pready(0, rs[1]));
        OK(MPI_Wait(&rs[1], MPI_STATUS_IGNORE));
        OK(MPI_Wait(&rs[0], MPI_STATUS_IGNORE));
        for (int i = 0; i < 2 * N; i++) {
            double want = i % 2 == 0 ? left * 10000 + i + round : -1;
            CHECK(b[i] == want, "strided [%d] = %g, expected %g", i, b[i], want);
        }
    }
    OK(MPI_Request_free(&rs[0]));
    OK(MPI_Request_free(&rs[1]));
    OK(MPI_Type_free(&every2));
    OK(MPI_Type_free(&pair_first));
    free(a);
    free(b);
}

static void errors(int rank, int size) {
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[12], in[12];
    MPI_Request r, rs[2];
    /* PROC_NULL: complete at once. */
    OK(MPI_Psend_init(out, 2, 6, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    OK(MPI_Start(&r));
    OK(MPI_Pready_range(0, 1, r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    OK(MPI_Request_free(&r));

    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    /* The sender sends 12 ints, the receiver expects 8: truncated. */
    OK(MPI_Precv_init(in, 2, 4, MPI_INT, left, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[0]));
    OK(MPI_Psend_init(out, 3, 4, MPI_INT, right, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &rs[1]));
    OK(MPI_Startall(2, rs));
    OK(MPI_Pready_range(0, 2, rs[1]));
    FAILS_WITH(MPI_Wait(&rs[0], MPI_STATUS_IGNORE), MPI_ERR_TRUNCATE);
    OK(MPI_Wait(&rs[1], MPI_STATUS_IGNORE));
    FAILS_WITH(MPI_Pready(0, rs[1]), MPI_ERR_REQUEST); /* inactive */
    OK(MPI_Start(&rs[1]));
    FAILS_WITH(MPI_Pready(3, rs[1]), MPI_ERR_ARG);
    FAILS_WITH(MPI_Pready(-1, rs[1]), MPI_ERR_ARG);
    FAILS_WITH(MPI_Pready_range(2, 1, rs[1]), MPI_ERR_ARG);
    int flag;
    FAILS_WITH(MPI_Parrived(rs[1], 0, &flag), MPI_ERR_REQUEST); /* a send */
    OK(MPI_Pready_list(3, (int[]){2, 0, 1}, rs[1]));
    FAILS_WITH(MPI_Pready(1, rs[1]), MPI_ERR_ARG); /* twice */
    OK(MPI_Wait(&rs[1], MPI_STATUS_IGNORE));
    /* The second activation's data goes unreceived: a receive of the right size takes it. */
    OK(MPI_Request_free(&rs[0]));
    OK(MPI_Request_free(&rs[1]));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    FAILS_WITH(MPI_Psend_init(out, -1, 4, MPI_INT, right, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r), MPI_ERR_ARG);
    FAILS_WITH(MPI_Psend_init(out, 2, -4, MPI_INT, right, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Psend_init(out, 2, 4, MPI_INT, size, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r), MPI_ERR_RANK);
    FAILS_WITH(MPI_Psend_init(out, 2, 4, MPI_INT, right, -1, MPI_COMM_WORLD, MPI_INFO_NULL, &r), MPI_ERR_TAG);
    FAILS_WITH(MPI_Precv_init(in, 2, 4, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r), MPI_ERR_ARG);
    FAILS_WITH(MPI_Precv_init(in, 2, 4, MPI_INT, left, 0, MPI_COMM_NULL, MPI_INFO_NULL, &r), MPI_ERR_COMM);
    FAILS_WITH(MPI_Parrived(MPI_REQUEST_NULL, 0, &flag), MPI_ERR_REQUEST);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv) {
    int rank, size, provided;
    /* P2P_SINGLE: the unlocked paths (no thread marks partitions then). */
    int level = getenv("P2P_SINGLE") ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE;
    OK(MPI_Init_thread(&argc, &argv, level, &provided));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    ring(rank, size, provided == MPI_THREAD_MULTIPLE);
    strided(rank, size);
    errors(rank, size);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK p2p_partitioned %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
