/* Checks for the C test programs: a failed CHECK prints where and why, then ends the job with
 * MPI_Abort (exit status 3), so the Rust driver sees the failure. */
#ifndef CHECK_H
#define CHECK_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_rank __attribute__((unused)) = -1;

#define CHECK(cond, ...)                                                                                   \
    do {                                                                                                   \
        if (!(cond)) {                                                                                     \
            fprintf(stderr, "FAIL %s:%d (rank %d): %s: ", __FILE__, __LINE__, check_rank, #cond);          \
            fprintf(stderr, __VA_ARGS__);                                                                  \
            fprintf(stderr, "\n");                                                                         \
            fflush(stderr);                                                                                \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                                  \
            exit(3);                                                                                       \
        }                                                                                                  \
    } while (0)

/* CHECK that an MPI call returned MPI_SUCCESS. */
#define OK(call) CHECK((call) == MPI_SUCCESS, "%s", #call)

/* The error class of a return code. */
static inline int class_of(int code) {
    int c = -1;
    if (MPI_Error_class(code, &c) != MPI_SUCCESS) return -1;
    return c;
}

/* CHECK that an MPI call failed with error class CLASS. */
#define FAILS_WITH(call, class)                                                                            \
    do {                                                                                                   \
        int rc_ = (call);                                                                                  \
        CHECK(class_of(rc_) == (class), "%s returned %d (class %d), expected class %d (%s)", #call, rc_,   \
              class_of(rc_), (class), #class);                                                             \
    } while (0)

/* Ranks 0 and 1 exchange 40 messages, so that each claims its fastbox at the other (a sender claims
 * one after 16 messages to a peer); other ranks do nothing. */
static inline void warm_up_pair(int rank, int tag) {
    for (int i = 0; i < 40 && rank < 2; i++) {
        int v = i, w = -1;
        if (rank == 0) {
            OK(MPI_Send(&v, 1, MPI_INT, 1, tag, MPI_COMM_WORLD));
            OK(MPI_Recv(&w, 1, MPI_INT, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        } else {
            OK(MPI_Recv(&w, 1, MPI_INT, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            OK(MPI_Send(&w, 1, MPI_INT, 0, tag, MPI_COMM_WORLD));
        }
        CHECK(rank == 1 || w == i, "warm-up %d: %d", i, w);
    }
}

static inline void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    CHECK(p != NULL, "out of memory");
    return p;
}

#endif
