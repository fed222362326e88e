/* Non-contiguous data, moved directly (the datatype given to MPI_Send/MPI_Recv: the library
 * gathers and scatters the pieces itself) next to packed (MPI_Pack into a buffer, MPI_PACKED
 * sent and received, MPI_Unpack: the copies a library that stages typed data makes), and the same
 * bytes contiguous (the floor). A ping-pong of 2 ranks; the three ways interleave in every round
 * (their order rotates), and rank 0 prints, per layout and size, the median one-way time of each
 * and the median, minimum and maximum over the rounds of the ratio direct/packed.
 *
 *   mpicc -O2 -o datatype datatype.c && nemesis-run -n 2 --bind core ./datatype [ROUNDS]
 *
 * Layouts: a vector of doubles with stride 2 (8-byte pieces) and a vector of 1 KiB blocks with
 * stride 1.25 KiB (long pieces: a single copy may read into them). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DIRECT, PACKED, CONTIG, WAYS };

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* One-way time in microseconds of `iters` round trips of one element of `type` (or its bytes). */
static double run(int way, int me, char *buf, MPI_Datatype type, char *tmp, int bytes, int iters) {
    int peer = 1 - me, pos;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        for (int leg = 0; leg < 2; leg++) {
            int sending = (leg == 0) == (me == 0);
            if (way == DIRECT) {
                if (sending)
                    MPI_Send(buf, 1, type, peer, 1, MPI_COMM_WORLD);
                else
                    MPI_Recv(buf, 1, type, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (way == PACKED) {
                if (sending) {
                    pos = 0;
                    MPI_Pack(buf, 1, type, tmp, bytes, &pos, MPI_COMM_WORLD);
                    MPI_Send(tmp, pos, MPI_PACKED, peer, 2, MPI_COMM_WORLD);
                } else {
                    MPI_Recv(tmp, bytes, MPI_PACKED, peer, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    pos = 0;
                    MPI_Unpack(tmp, bytes, &pos, buf, 1, type, MPI_COMM_WORLD);
                }
            } else {
                if (sending)
                    MPI_Send(tmp, bytes, MPI_BYTE, peer, 3, MPI_COMM_WORLD);
                else
                    MPI_Recv(tmp, bytes, MPI_BYTE, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        }
    }
    return (MPI_Wtime() - t0) / iters / 2 * 1e6;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    if (n != 2) {
        if (me == 0) fprintf(stderr, "datatype: needs 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    if (rounds < 1 || rounds > 99) rounds = 7;
    /* (piece bytes, stride bytes) */
    const int shapes[2][2] = {{8, 16}, {1024, 1280}};
    const int sizes[] = {4 << 10, 64 << 10, 1 << 20, 4 << 20};
    if (me == 0)
        printf("%-6s %8s %10s %10s %10s %8s %8s %8s\n", "piece", "bytes", "direct_us", "packed_us", "contig_us",
               "ratio", "min", "max");
    for (int s = 0; s < 2; s++) {
        for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
            int piece = shapes[s][0], stride = shapes[s][1], bytes = sizes[z];
            int count = bytes / piece;
            MPI_Datatype type;
            MPI_Type_vector(count, piece / 8, stride / 8, MPI_DOUBLE, &type);
            MPI_Type_commit(&type);
            size_t span = (size_t)count * stride;
            char *buf = malloc(span), *tmp = malloc(bytes);
            for (size_t i = 0; i < span; i++) buf[i] = (char)(i * 7 + me);
            memset(tmp, 1, bytes);
            int iters = (64 << 20) / bytes;
            if (iters > 2000) iters = 2000;
            if (iters < 10) iters = 10;
            double t[WAYS][99], ratio[99];
            run(DIRECT, me, buf, type, tmp, bytes, iters / 10 + 1); /* warm-up */
            run(PACKED, me, buf, type, tmp, bytes, iters / 10 + 1);
            for (int r = 0; r < rounds; r++) {
                for (int k = 0; k < WAYS; k++) {
                    int w = (k + r) % WAYS;
                    t[w][r] = run(w, me, buf, type, tmp, bytes, iters);
                }
                ratio[r] = t[DIRECT][r] / t[PACKED][r];
            }
            if (me == 0) {
                double m[WAYS];
                for (int w = 0; w < WAYS; w++) m[w] = median(t[w], rounds);
                double rm = median(ratio, rounds); /* sorts `ratio` */
                printf("%-6d %8d %10.2f %10.2f %10.2f %8.3f %8.3f %8.3f\n", piece, bytes, m[DIRECT], m[PACKED],
                       m[CONTIG], rm, ratio[0], ratio[rounds - 1]);
                fflush(stdout);
            }
            free(buf);
            free(tmp);
            MPI_Type_free(&type);
        }
    }
    MPI_Finalize();
    return 0;
}
