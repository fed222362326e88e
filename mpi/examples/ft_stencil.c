/* An iterative halo exchange with application checkpoints, through the C ABI: every rank smooths
 * its block of a periodic 1-D field (u[i] <- (u[i-1] + 2 u[i] + u[i+1]) / 4), exchanging one
 * boundary cell with each neighbour per iteration, and checkpoints its block every `interval`
 * iterations with MPIX_Checkpoint; a restarted rank resumes from MPIX_Checkpoint_restore. Rank 0
 * prints "checksum <hex>" at the end (FNV-1a of every rank's block, in rank order): the same with
 * fault tolerance on or off, and the same as the Rust example examples/ft_stencil.rs.
 *
 *   mpi/bin/mpicc -O2 -o ft_stencil mpi/examples/ft_stencil.c
 *   target/release/nemesis-run -n 8 --ft-groups 4 -- ./ft_stencil [cells [iterations [interval]]]
 *
 * Defaults as the Rust example: 32768 cells per rank, 2000 iterations, a checkpoint every 100
 * (interval 0: none). Rank 0 prints the timings on standard error. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FNV_BASIS 0xcbf29ce484222325ULL

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void check(int rc, const char *what) {
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "ft_stencil: %s failed: %s\n", what, msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv) {
    size_t cells = argc > 1 ? strtoul(argv[1], NULL, 10) : 32768;
    uint64_t iterations = argc > 2 ? strtoull(argv[2], NULL, 10) : 2000;
    uint64_t interval = argc > 3 ? strtoull(argv[3], NULL, 10) : 100;
    if (cells == 0) cells = 1;
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    /* u[0] and u[cells + 1] are the halo cells. */
    double *u = calloc(cells + 2, sizeof *u), *v = calloc(cells + 2, sizeof *v);
    size_t state_len = 8 + 8 * cells;
    unsigned char *state = malloc(state_len);
    if (!u || !v || !state) MPI_Abort(MPI_COMM_WORLD, 2);
    uint64_t next = 0;
    void *restored = NULL;
    size_t restored_len = 0;
    int was_restored = 0;
    check(MPIX_Checkpoint_restore(&restored, &restored_len, &was_restored), "MPIX_Checkpoint_restore");
    if (was_restored && restored_len == state_len) {
        memcpy(&next, restored, 8);
        memcpy(&u[1], (unsigned char *)restored + 8, 8 * cells);
    } else {
        for (size_t i = 0; i < cells; i++) u[i + 1] = (double)(((size_t)rank * cells + i) % 97);
    }
    free(restored);
    uint64_t checkpoints = 0;
    double in_checkpoints = 0, t0 = MPI_Wtime();
    for (uint64_t it = next; it < iterations; it++) {
        /* The usual halo exchange: receives posted first, then the sends, then one Waitall. */
        MPI_Request r[4];
        check(MPI_Irecv(&u[0], 1, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &r[0]), "MPI_Irecv");
        check(MPI_Irecv(&u[cells + 1], 1, MPI_DOUBLE, right, 0, MPI_COMM_WORLD, &r[1]), "MPI_Irecv");
        check(MPI_Isend(&u[1], 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD, &r[2]), "MPI_Isend");
        check(MPI_Isend(&u[cells], 1, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &r[3]), "MPI_Isend");
        check(MPI_Waitall(4, r, MPI_STATUSES_IGNORE), "MPI_Waitall");
        for (size_t i = 1; i <= cells; i++) v[i] = (u[i - 1] + 2.0 * u[i] + u[i + 1]) * 0.25;
        double *t = u;
        u = v;
        v = t;
        if (interval > 0 && (it + 1) % interval == 0 && it + 1 < iterations) {
            double c0 = MPI_Wtime();
            uint64_t n = it + 1;
            memcpy(state, &n, 8);
            memcpy(state + 8, &u[1], 8 * cells);
            check(MPIX_Checkpoint(state, state_len), "MPIX_Checkpoint");
            in_checkpoints += MPI_Wtime() - c0;
            checkpoints++;
        }
    }
    double seconds = MPI_Wtime() - t0;
    uint64_t mine = fnv(FNV_BASIS, &u[1], 8 * cells);
    if (rank == 0) {
        uint64_t sum = fnv(FNV_BASIS, &mine, 8), h;
        for (int r = 1; r < size; r++) {
            check(MPI_Recv(&h, 8, MPI_BYTE, r, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
            sum = fnv(sum, &h, 8);
        }
        fprintf(stderr, "ft_stencil: %d ranks, %zu cells each, %llu iterations in %.2f s; %llu checkpoints, %.1f ms each\n",
                size, cells, (unsigned long long)iterations, seconds, (unsigned long long)checkpoints,
                checkpoints ? 1e3 * in_checkpoints / (double)checkpoints : 0.0);
        printf("checksum %016llx\n", (unsigned long long)sum);
    } else {
        check(MPI_Send(&mine, 8, MPI_BYTE, 0, 9, MPI_COMM_WORLD), "MPI_Send");
    }
    free(u);
    free(v);
    free(state);
    MPI_Finalize();
    return 0;
}
