/* The large-count (_c) forms of the collectives: every blocking and non-blocking one (and the
 * neighbourhood ones on a periodic ring) with MPI_Count counts and MPI_Aint displacements,
 * results checked; a broadcast of 2^31 + 64 bytes (MPI_Bcast_c, count above INT_MAX) checked at
 * sampled offsets when COLL_LARGE_BIG=1, and an MPI_Allreduce_c of 2^31 + 8 bytes of MPI_CHAR
 * with MPI_BOR... as bytes; bad input: negative counts, a count array entry above INT_MAX.
 * Prints "OK coll_large <rank>". */
#include <stdint.h>

#include "check.h"

#define MAXR 16

static int rank, size;

static int v(int r, int i) { return 100 * r + i; }

/* Completes `q` when the call was non-blocking. */
static void done(int nb, MPI_Request *q) {
    if (nb) OK(MPI_Wait(q, MPI_STATUS_IGNORE));
}

static void all_forms(int nb, MPI_Comm ring) {
    MPI_Request q = MPI_REQUEST_NULL;
    MPI_Request *rq = nb ? &q : NULL;
    int s[4 * MAXR], r[4 * MAXR], root = size - 1;
    MPI_Count cnt[MAXR], one[MAXR];
    MPI_Aint dsp[MAXR], seq[MAXR], wsd[MAXR], wrd[MAXR];
    MPI_Datatype ints[MAXR];
    for (int k = 0; k < size; k++) {
        cnt[k] = k + 1, one[k] = 1, seq[k] = k, ints[k] = MPI_INT;
        wsd[k] = 4 * k, wrd[k] = 4 * (size - 1 - k);
    }
    for (int k = 0, off = 0; k < size; k++) dsp[k] = off, off += k + 1;
#define RESET()                                                                                                \
    do {                                                                                                       \
        for (int i_ = 0; i_ < 4 * MAXR; i_++) s[i_] = v(rank, i_), r[i_] = -1;                                  \
    } while (0)

    /* Bcast_c */
    RESET();
    if (nb) OK(MPI_Ibcast_c(s, 3, MPI_INT, root, MPI_COMM_WORLD, rq)); else OK(MPI_Bcast_c(s, 3, MPI_INT, root, MPI_COMM_WORLD));
    done(nb, rq);
    for (int i = 0; i < 3; i++) CHECK(s[i] == v(root, i), "nb %d bcast_c[%d] %d", nb, i, s[i]);
    /* Reduce_c, Allreduce_c */
    RESET();
    if (nb) OK(MPI_Ireduce_c(s, r, 2, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD, rq)); else OK(MPI_Reduce_c(s, r, 2, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD));
    done(nb, rq);
    if (rank == root)
        for (int i = 0; i < 2; i++) CHECK(r[i] == size * i + 100 * size * (size - 1) / 2, "nb %d reduce_c[%d] %d", nb, i, r[i]);
    RESET();
    if (nb) OK(MPI_Iallreduce_c(s, r, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD, rq)); else OK(MPI_Allreduce_c(s, r, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    done(nb, rq);
    for (int i = 0; i < 3; i++) CHECK(r[i] == v(size - 1, i), "nb %d allreduce_c[%d] %d", nb, i, r[i]);
    /* Gather_c, Gatherv_c */
    RESET();
    if (nb) OK(MPI_Igather_c(s, 2, MPI_INT, r, 2, MPI_INT, root, MPI_COMM_WORLD, rq)); else OK(MPI_Gather_c(s, 2, MPI_INT, r, 2, MPI_INT, root, MPI_COMM_WORLD));
    done(nb, rq);
    if (rank == root)
        for (int k = 0; k < size; k++) CHECK(r[2 * k] == v(k, 0) && r[2 * k + 1] == v(k, 1), "nb %d gather_c %d", nb, k);
    RESET();
    if (nb) OK(MPI_Igatherv_c(s, rank + 1, MPI_INT, r, cnt, dsp, MPI_INT, 0, MPI_COMM_WORLD, rq));
    else OK(MPI_Gatherv_c(s, rank + 1, MPI_INT, r, cnt, dsp, MPI_INT, 0, MPI_COMM_WORLD));
    done(nb, rq);
    if (rank == 0)
        for (int k = 0; k < size; k++)
            for (int i = 0; i <= k; i++) CHECK(r[dsp[k] + i] == v(k, i), "nb %d gatherv_c %d.%d", nb, k, i);
    /* Scatter_c, Scatterv_c */
    RESET();
    if (nb) OK(MPI_Iscatter_c(s, 2, MPI_INT, r, 2, MPI_INT, root, MPI_COMM_WORLD, rq)); else OK(MPI_Scatter_c(s, 2, MPI_INT, r, 2, MPI_INT, root, MPI_COMM_WORLD));
    done(nb, rq);
    CHECK(r[0] == v(root, 2 * rank) && r[1] == v(root, 2 * rank + 1), "nb %d scatter_c %d %d", nb, r[0], r[1]);
    RESET();
    if (nb) OK(MPI_Iscatterv_c(s, cnt, dsp, MPI_INT, r, rank + 1, MPI_INT, 0, MPI_COMM_WORLD, rq));
    else OK(MPI_Scatterv_c(s, cnt, dsp, MPI_INT, r, rank + 1, MPI_INT, 0, MPI_COMM_WORLD));
    done(nb, rq);
    for (int i = 0; i <= rank; i++) CHECK(r[i] == v(0, dsp[rank] + i), "nb %d scatterv_c[%d] %d", nb, i, r[i]);
    /* Allgather_c, Allgatherv_c */
    RESET();
    if (nb) OK(MPI_Iallgather_c(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD, rq)); else OK(MPI_Allgather_c(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD));
    done(nb, rq);
    for (int k = 0; k < size; k++) CHECK(r[k] == v(k, 0), "nb %d allgather_c %d", nb, k);
    RESET();
    if (nb) OK(MPI_Iallgatherv_c(s, rank + 1, MPI_INT, r, cnt, dsp, MPI_INT, MPI_COMM_WORLD, rq));
    else OK(MPI_Allgatherv_c(s, rank + 1, MPI_INT, r, cnt, dsp, MPI_INT, MPI_COMM_WORLD));
    done(nb, rq);
    for (int k = 0; k < size; k++)
        for (int i = 0; i <= k; i++) CHECK(r[dsp[k] + i] == v(k, i), "nb %d allgatherv_c %d.%d", nb, k, i);
    /* Alltoall_c, Alltoallv_c, Alltoallw_c */
    RESET();
    if (nb) OK(MPI_Ialltoall_c(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD, rq)); else OK(MPI_Alltoall_c(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD));
    done(nb, rq);
    for (int k = 0; k < size; k++) CHECK(r[k] == v(k, rank), "nb %d alltoall_c %d", nb, k);
    RESET();
    if (nb) OK(MPI_Ialltoallv_c(s, one, seq, MPI_INT, r, one, seq, MPI_INT, MPI_COMM_WORLD, rq));
    else OK(MPI_Alltoallv_c(s, one, seq, MPI_INT, r, one, seq, MPI_INT, MPI_COMM_WORLD));
    done(nb, rq);
    for (int k = 0; k < size; k++) CHECK(r[k] == v(k, rank), "nb %d alltoallv_c %d", nb, k);
    RESET();
    if (nb) OK(MPI_Ialltoallw_c(s, one, wsd, ints, r, one, wrd, ints, MPI_COMM_WORLD, rq));
    else OK(MPI_Alltoallw_c(s, one, wsd, ints, r, one, wrd, ints, MPI_COMM_WORLD));
    done(nb, rq);
    for (int k = 0; k < size; k++) CHECK(r[size - 1 - k] == v(k, rank), "nb %d alltoallw_c %d", nb, k);
    /* Reduce_scatter_c, Reduce_scatter_block_c */
    RESET();
    if (nb) OK(MPI_Ireduce_scatter_c(s, r, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD, rq)); else OK(MPI_Reduce_scatter_c(s, r, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    done(nb, rq);
    for (int i = 0; i <= rank; i++) CHECK(r[i] == size * (dsp[rank] + i) + 100 * size * (size - 1) / 2, "nb %d reduce_scatter_c[%d] %d", nb, i, r[i]);
    RESET();
    if (nb) OK(MPI_Ireduce_scatter_block_c(s, r, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, rq));
    else OK(MPI_Reduce_scatter_block_c(s, r, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    done(nb, rq);
    for (int i = 0; i < 2; i++) CHECK(r[i] == size * (2 * rank + i) + 100 * size * (size - 1) / 2, "nb %d reduce_scatter_block_c[%d]", nb, i);
    /* Scan_c, Exscan_c */
    RESET();
    if (nb) OK(MPI_Iscan_c(s, r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, rq)); else OK(MPI_Scan_c(s, r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    done(nb, rq);
    CHECK(r[0] == 100 * rank * (rank + 1) / 2, "nb %d scan_c %d", nb, r[0]);
    RESET();
    if (nb) OK(MPI_Iexscan_c(s, r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, rq)); else OK(MPI_Exscan_c(s, r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    done(nb, rq);
    if (rank > 0) CHECK(r[0] == 100 * rank * (rank - 1) / 2, "nb %d exscan_c %d", nb, r[0]);
    /* Neighbourhood _c forms on the ring: 0 is the left neighbour, 1 the right one. */
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    MPI_Count n1[2] = {1, 1};
    MPI_Aint nd[2] = {0, 1}, nsw[2] = {1, 0}, nbs[2] = {0, 4}, nbr[2] = {4, 0};
    MPI_Datatype nt[2] = {MPI_INT, MPI_INT};
    RESET();
    if (nb) OK(MPI_Ineighbor_allgather_c(s, 1, MPI_INT, r, 1, MPI_INT, ring, rq)); else OK(MPI_Neighbor_allgather_c(s, 1, MPI_INT, r, 1, MPI_INT, ring));
    done(nb, rq);
    CHECK(r[0] == v(left, 0) && r[1] == v(right, 0), "nb %d neighbor_allgather_c", nb);
    RESET();
    if (nb) OK(MPI_Ineighbor_allgatherv_c(s, 1, MPI_INT, r, n1, nsw, MPI_INT, ring, rq)); else OK(MPI_Neighbor_allgatherv_c(s, 1, MPI_INT, r, n1, nsw, MPI_INT, ring));
    done(nb, rq);
    CHECK(r[1] == v(left, 0) && r[0] == v(right, 0), "nb %d neighbor_allgatherv_c", nb);
    RESET();
    if (nb) OK(MPI_Ineighbor_alltoall_c(s, 1, MPI_INT, r, 1, MPI_INT, ring, rq)); else OK(MPI_Neighbor_alltoall_c(s, 1, MPI_INT, r, 1, MPI_INT, ring));
    done(nb, rq);
    CHECK(r[0] == v(left, 1) && r[1] == v(right, 0), "nb %d neighbor_alltoall_c", nb);
    RESET();
    if (nb) OK(MPI_Ineighbor_alltoallv_c(s, n1, nd, MPI_INT, r, n1, nsw, MPI_INT, ring, rq)); else OK(MPI_Neighbor_alltoallv_c(s, n1, nd, MPI_INT, r, n1, nsw, MPI_INT, ring));
    done(nb, rq);
    CHECK(r[1] == v(left, 1) && r[0] == v(right, 0), "nb %d neighbor_alltoallv_c", nb);
    RESET();
    if (nb) OK(MPI_Ineighbor_alltoallw_c(s, n1, nbs, nt, r, n1, nbr, nt, ring, rq)); else OK(MPI_Neighbor_alltoallw_c(s, n1, nbs, nt, r, n1, nbr, nt, ring));
    done(nb, rq);
    CHECK(r[1] == v(left, 1) && r[0] == v(right, 0), "nb %d neighbor_alltoallw_c", nb);
#undef RESET
}

/* MPI_Bcast_c of 2^31 + 64 bytes (a count above INT_MAX) from the last rank: the root's buffer
 * holds one byte value everywhere but at 4096 sampled offsets and the last 70 bytes, checked on
 * every rank. */
static unsigned char mark(MPI_Count i) { return (unsigned char)(i * 7 + (i >> 20) + 1); }

static MPI_Count sample(MPI_Count k, MPI_Count n) { return (k * 524309) % n; }

static void big_bcast(void) {
    MPI_Count n = ((MPI_Count)1 << 31) + 64;
    unsigned char *b = malloc((size_t)n);
    CHECK(b != NULL, "no memory for %lld bytes", (long long)n);
    int root = size - 1;
    memset(b, rank == root ? 0xA5 : 0, (size_t)n);
    if (rank == root) {
        for (MPI_Count k = 0; k < 4096; k++) b[sample(k, n)] = mark(sample(k, n));
        for (MPI_Count i = n - 70; i < n; i++) b[i] = mark(i);
    }
    double t = MPI_Wtime();
    OK(MPI_Bcast_c(b, n, MPI_BYTE, root, MPI_COMM_WORLD));
    t = MPI_Wtime() - t;
    for (MPI_Count k = 0; k < 4096; k++) CHECK(b[sample(k, n)] == mark(sample(k, n)), "big bcast byte %lld", (long long)sample(k, n));
    for (MPI_Count i = n - 70; i < n; i++) CHECK(b[i] == mark(i), "big bcast tail byte %lld", (long long)i);
    /* Bytes between the samples (offsets 1 and n / 2 + 1 are none of them). */
    CHECK(b[1] == 0xA5 && b[n / 2 + 1] == 0xA5, "big bcast filler bytes %d %d", b[1], b[n / 2 + 1]);
    if (getenv("COLL_LARGE_TIME")) fprintf(stderr, "rank %d: Bcast_c of %lld bytes in %.1f s\n", rank, (long long)n, t);
    free(b);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    CHECK(size <= MAXR, "at most %d ranks", MAXR);
    MPI_Comm ring;
    int dims[1] = {size}, periods[1] = {1};
    OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
    all_forms(0, ring);
    all_forms(1, ring);
    const char *big = getenv("COLL_LARGE_BIG");
    if (big && big[0] == '1') big_bcast();

    /* Bad input. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int x[MAXR * 2] = {0};
    MPI_Count huge[MAXR];
    MPI_Aint d[MAXR];
    for (int k = 0; k < size; k++) huge[k] = (MPI_Count)1 << 32, d[k] = 0;
    MPI_Request q;
    FAILS_WITH(MPI_Bcast_c(x, -1, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Ibcast_c(x, -((MPI_Count)1 << 40), MPI_INT, 0, MPI_COMM_WORLD, &q), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Allreduce_c(x, x + 1, -3, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Bcast_c(x, 1, MPI_INT, size, MPI_COMM_WORLD), MPI_ERR_ROOT);
    FAILS_WITH(MPI_Allgatherv_c(x, 1, MPI_INT, x + MAXR, huge, d, MPI_INT, MPI_COMM_WORLD), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Neighbor_allgather_c(x, 1, MPI_INT, x + 1, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_TOPOLOGY);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    OK(MPI_Comm_free(&ring));
    OK(MPI_Finalize());
    printf("OK coll_large %d\n", rank);
    return 0;
}
