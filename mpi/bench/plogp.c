/* The pLogP parameters of the collectives' model (mpi/src/coll/model.rs), measured through the MPI
 * API between two ranks, by the method of the LaPIe thesis (shared/papers/barchet-2005-thesis-
 * lapie-collectives.txt, B:3758-3791, Table 4.1 at B:3771-3778):
 *   g(0)  from bursts of n empty messages followed by one acknowledgement, n doubling until the gap
 *         per message changes by less than 5%;
 *   L     = (RTT1(0) - 2 g(0)) / 2;
 *   g(m)  = RTT1(m) - RTT1(0) + g(0), RTT1(m) being an m-byte message answered by an empty one.
 * Then the linear fit g(m) = g0 + m G (least squares over m >= 1 KiB, g0 = g(0)), and the local
 * costs of the reduction model: gamma, the time per byte of MPI_SUM on doubles, as the difference
 * between a two-rank MPI_Reduce and a two-rank MPI_Bcast of the same size (one message each, the
 * reduce adds one combination); copy, memcpy's time per byte (the library's copies are memcpy).
 * Every figure is the minimum over 5 repetitions (the machine is shared: the minimum is the
 * uncontended cost). Run: nemesis-run -n 2 --bind core ./plogp. Prints the table and the
 * NEMESIS_COLL_SHM line. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank;
static char *buf;

enum { REPS = 5 };

static double min2(double a, double b) { return a < b ? a : b; }

/* Round trip of an m-byte message answered by an empty one, in seconds (mean over iters). */
static double rtt1(int m, int iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(buf, m, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buf, 0, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, m, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 0, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) / iters;
}

/* The smallest of REPS measurements of rtt1 (rank 0's figure, shared with rank 1). */
static double rtt(int m, int iters) {
    double best = 1e9;
    for (int k = 0; k < REPS; k++) best = min2(best, rtt1(m, iters));
    MPI_Bcast(&best, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return best;
}

/* Time of n empty messages and one acknowledgement, per message. */
static double burst1(int n, int reps) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int r = 0; r < reps; r++) {
        if (rank == 0) {
            for (int i = 0; i < n; i++) MPI_Send(buf, 0, MPI_BYTE, 1, 3, MPI_COMM_WORLD);
            MPI_Recv(buf, 0, MPI_BYTE, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int i = 0; i < n; i++) MPI_Recv(buf, 0, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 0, MPI_BYTE, 0, 4, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t0) / reps / n;
}

static double burst(int n, int reps) {
    double best = 1e9;
    for (int k = 0; k < REPS; k++) best = min2(best, burst1(n, reps));
    MPI_Bcast(&best, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return best;
}

/* Mean time of a collective (1: reduce, 2: bcast) of m bytes between the two ranks, less a
 * barrier's (B:4962-4998). */
static double coll(int which, int m, int iters, double barrier) {
    double *d = (double *)buf, *out = (double *)(buf + (1 << 21));
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (which == 1) MPI_Reduce(d, out, m / 8, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        else MPI_Bcast(d, m / 8, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    return (MPI_Wtime() - t0) / iters - barrier;
}

int main(int argc, char **argv) {
    /* gamma compares one combination with no combination: two-rank binomial reduce and bcast are
     * one message each (the model would pick Rabenseifner's reduce at 64 KiB). */
    setenv("NEMESIS_COLL_ALG", "reduce=binomial,bcast=binomial", 0);
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    buf = calloc(1 << 22, 1);
    for (int w = 0; w < 3; w++) rtt(0, 20000); /* warm up: fastboxes, caches, frequency */

    /* g(0): bursts doubling until the gap per message is stable. */
    double g0 = burst(1, 20000);
    for (int n = 2; n <= 4096; n *= 2) {
        double g = burst(n, 200000 / n + 10);
        double stable = g > g0 * 0.95 && g < g0 * 1.05;
        g0 = g;
        if (stable && n >= 64) break;
    }
    double rtt0 = rtt(0, 50000);
    double L = (rtt0 - 2 * g0) / 2;
    static const int sizes[] = {0, 8, 64, 256, 1024, 4096, 8192, 16384, 32768, 65536};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    double g[NS];
    if (rank == 0) printf("# pLogP over nemesis-mpi: L %.1f ns, g(0) %.1f ns, RTT1(0) %.1f ns\n# bytes g(m)_ns\n", L * 1e9, g0 * 1e9, rtt0 * 1e9);
    for (int s = 0; s < NS; s++) {
        int m = sizes[s];
        double r = rtt(m, m > 8192 ? 5000 : 20000);
        g[s] = r - rtt0 + g0;
        if (rank == 0) printf("%d %.1f\n", m, g[s] * 1e9);
    }
    /* G: least squares slope of g(m) - g0 over m >= 1 KiB. */
    double sxy = 0, sxx = 0;
    for (int s = 0; s < NS; s++)
        if (sizes[s] >= 1024) {
            sxy += (double)sizes[s] * (g[s] - g0);
            sxx += (double)sizes[s] * sizes[s];
        }
    double G = sxy / sxx;

    /* gamma: reduce minus bcast of 64 KiB of doubles. */
    double barrier = 1e9, t0;
    for (int k = 0; k < REPS; k++) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (int i = 0; i < 20000; i++) MPI_Barrier(MPI_COMM_WORLD);
        barrier = min2(barrier, (MPI_Wtime() - t0) / 20000);
    }
    int m = 65536;
    double tr = 1e9, tb = 1e9;
    for (int k = 0; k < REPS; k++) {
        double a = coll(1, m, 2000, barrier), b = coll(2, m, 2000, barrier);
        if (a < tr) tr = a;
        if (b < tb) tb = b;
    }
    double gamma = (tr - tb) / m;

    /* copy: memcpy of 256 KiB. */
    char *src = buf, *dst = buf + (1 << 21);
    int cm = 1 << 18, reps = 4000;
    double copy = 1e9;
    for (int k = 0; k < REPS; k++) {
        t0 = MPI_Wtime();
        for (int i = 0; i < reps; i++) {
            memcpy(dst, src, (size_t)cm);
            __asm__ volatile("" ::"r"(dst) : "memory");
        }
        copy = min2(copy, (MPI_Wtime() - t0) / reps / cm);
    }

    if (rank == 0) {
        printf("# fit: g(m) = g0 + m G with g0 %.1f ns, G %.4f ns/byte (%.1f GB/s)\n", g0 * 1e9, G * 1e9, 1 / (G * 1e9));
        printf("# reduce 64 KiB %.1f ns, bcast 64 KiB %.1f ns: gamma %.4f ns/byte; memcpy 256 KiB: copy %.4f ns/byte\n",
               tr * 1e9, tb * 1e9, gamma * 1e9, copy * 1e9);
        printf("NEMESIS_COLL_SHM=L=%.0f,g0=%.0f,G=%.3f,gamma=%.3f,copy=%.3f\n", L * 1e9, g0 * 1e9, G * 1e9, gamma * 1e9,
               copy * 1e9);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
