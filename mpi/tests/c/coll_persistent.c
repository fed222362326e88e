/* The persistent collectives of MPI-4.0 (MPI_Barrier_init ... MPI_Neighbor_alltoallw_init, and
 * some of their _c forms): every one made once with an info, then started ROUNDS times with new
 * buffer contents each time, by MPI_Startall or MPI_Start one by one, completed by MPI_Waitall,
 * MPI_Wait in reverse order, MPI_Testall and MPI_Waitsome; each result checked every round.
 * Then freed by MPI_Request_free (one while active). Bad input: root, count, op, datatype,
 * communicator, null request, topology, MPI_Start of an active request. Prints
 * "OK coll_persistent <rank>". */
#include "check.h"

#define ROUNDS 5
#define MAXR 16

static int rank, size;

static int v(int round, int r, int i) { return 1000 * round + 100 * r + i; }

enum {
    BARRIER, BCAST, REDUCE, ALLREDUCE, GATHER, GATHERV, SCATTER, SCATTERV, ALLGATHER, ALLGATHERV,
    ALLTOALL, ALLTOALLV, ALLTOALLW, RSCATTER, RSCATTER_BLOCK, SCAN, EXSCAN,
    N_ALLGATHER, N_ALLGATHERV, N_ALLTOALL, N_ALLTOALLV, N_ALLTOALLW,
    BCAST_C, ALLREDUCE_C, ALLTOALLV_C, N_ALLTOALLW_C, NREQ
};

/* Buffers (the requests point to them; their contents change every round). */
static int bc[3], red_s[2], red_r[2], ar_s[3], ar_r[3], g_s[2], g_r[2 * MAXR], gv_s[MAXR], gv_r[MAXR * MAXR];
static int sc_s[2 * MAXR], sc_r[2], scv_s[MAXR * MAXR], scv_r[MAXR], ag_s[1], ag_r[MAXR], agv_s[MAXR], agv_r[MAXR * MAXR];
static int a2a_s[MAXR], a2a_r[MAXR], a2av_s[2 * MAXR], a2av_r[2 * MAXR], a2aw_s[MAXR], a2aw_r[MAXR];
static int rs_s[MAXR * MAXR], rs_r[MAXR], rsb_s[2 * MAXR], rsb_r[2], scan_s[1], scan_r[1], exscan_r[1];
static int n_s[2], n_ag_r[2], n_agv_r[2], n_a2a_r[2], n_a2av_r[2], n_a2aw_r[2];
static int bcc[3], arc_s[3], arc_r[3], a2avc_s[2 * MAXR], a2avc_r[2 * MAXR], nwc_r[2];

/* Fills the send buffers for `round`; receive buffers get -1. */
static void fill(int round, int broot, int sroot) {
    for (int i = 0; i < 3; i++) {
        bc[i] = rank == broot ? v(round, broot, i) : -1;
        bcc[i] = rank == broot ? v(round, broot, i + 7) : -1;
        ar_s[i] = v(round, rank, i), ar_r[i] = -1;
        arc_s[i] = v(round, rank, i + 3), arc_r[i] = -1;
    }
    for (int i = 0; i < 2; i++) red_s[i] = v(round, rank, i), red_r[i] = -1, g_s[i] = v(round, rank, i), sc_r[i] = -1;
    for (int i = 0; i <= rank; i++) gv_s[i] = v(round, rank, i), agv_s[i] = v(round, rank, i);
    for (int i = 0; i < MAXR * MAXR; i++) gv_r[i] = agv_r[i] = -1, scv_s[i] = -1, rs_s[i] = v(round, rank, i);
    for (int r = 0; r < size; r++) {
        for (int i = 0; i < 2; i++) sc_s[2 * r + i] = rank == sroot ? v(round, r, i) : -1;
        g_r[2 * r] = g_r[2 * r + 1] = -1;
        ag_r[r] = a2a_r[r] = a2aw_r[r] = -1;
        a2a_s[r] = v(round, rank, r);
        a2aw_s[r] = v(round, rank, r);
        rsb_s[2 * r] = v(round, rank, 2 * r), rsb_s[2 * r + 1] = v(round, rank, 2 * r + 1);
    }
    /* Scatterv from rank 0: block r (r+1 ints) at the reversed displacement. */
    if (rank == 0) {
        int off = 0;
        for (int r = size - 1; r >= 0; r--) {
            for (int i = 0; i <= r; i++) scv_s[off + i] = v(round, r, i);
            off += r + 1;
        }
    }
    for (int i = 0; i < MAXR; i++) scv_r[i] = rs_r[i] = -1;
    ag_s[0] = v(round, rank, 0);
    /* Alltoallv: 1 + (rank + j) % 2 ints to and from rank j, packed in order. */
    for (int j = 0, off = 0; j < size; j++) {
        int n = 1 + (rank + j) % 2;
        for (int i = 0; i < n; i++) a2av_s[off + i] = v(round, rank, 10 * j + i), a2avc_s[off + i] = v(round, rank, 10 * j + i + 5);
        off += n;
    }
    for (int i = 0; i < 2 * MAXR; i++) a2av_r[i] = a2avc_r[i] = -1;
    rsb_r[0] = rsb_r[1] = -1;
    scan_s[0] = v(round, rank, 0), scan_r[0] = -1, exscan_r[0] = -1;
    n_s[0] = v(round, rank, 0), n_s[1] = v(round, rank, 1);
    for (int i = 0; i < 2; i++) n_ag_r[i] = n_agv_r[i] = n_a2a_r[i] = n_a2av_r[i] = n_a2aw_r[i] = nwc_r[i] = -1;
}

static void check(int round, int broot, int groot, int sroot) {
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    for (int i = 0; i < 3; i++) {
        CHECK(bc[i] == v(round, broot, i), "round %d bcast[%d] %d", round, i, bc[i]);
        CHECK(bcc[i] == v(round, broot, i + 7), "round %d bcast_c[%d] %d", round, i, bcc[i]);
        int sum = size * (1000 * round + i) + 100 * size * (size - 1) / 2;
        CHECK(ar_r[i] == sum, "round %d allreduce[%d] %d, expected %d", round, i, ar_r[i], sum);
        CHECK(arc_r[i] == sum + 3 * size, "round %d allreduce_c[%d] %d", round, i, arc_r[i]);
    }
    if (rank == 0)
        for (int i = 0; i < 2; i++) {
            int sum = size * (1000 * round + i) + 100 * size * (size - 1) / 2;
            CHECK(red_r[i] == sum, "round %d reduce[%d] %d", round, i, red_r[i]);
        }
    for (int r = 0; r < size; r++) {
        if (rank == groot)
            for (int i = 0; i < 2; i++) CHECK(g_r[2 * r + i] == v(round, r, i), "round %d gather %d.%d: %d", round, r, i, g_r[2 * r + i]);
        CHECK(ag_r[r] == v(round, r, 0), "round %d allgather %d: %d", round, r, ag_r[r]);
        CHECK(a2a_r[r] == v(round, r, rank), "round %d alltoall %d: %d", round, r, a2a_r[r]);
        CHECK(a2aw_r[size - 1 - r] == v(round, r, rank), "round %d alltoallw %d: %d", round, r, a2aw_r[size - 1 - r]);
    }
    if (rank == 0) {
        int off = 0;
        for (int r = size - 1; r >= 0; r--) {
            for (int i = 0; i <= r; i++) CHECK(gv_r[off + i] == v(round, r, i), "round %d gatherv %d.%d: %d", round, r, i, gv_r[off + i]);
            off += r + 1;
        }
    }
    for (int r = 0, off = 0; r < size; r++) {
        for (int i = 0; i <= r; i++) CHECK(agv_r[off + i] == v(round, r, i), "round %d allgatherv %d.%d", round, r, i);
        off += r + 1;
    }
    for (int i = 0; i < 2; i++) CHECK(sc_r[i] == v(round, rank, i), "round %d scatter[%d] %d", round, i, sc_r[i]);
    (void)sroot;
    for (int i = 0; i <= rank; i++) CHECK(scv_r[i] == v(round, rank, i), "round %d scatterv[%d] %d", round, i, scv_r[i]);
    for (int j = 0, off = 0; j < size; j++) {
        int n = 1 + (rank + j) % 2;
        for (int i = 0; i < n; i++) {
            CHECK(a2av_r[off + i] == v(round, j, 10 * rank + i), "round %d alltoallv from %d[%d]: %d", round, j, i, a2av_r[off + i]);
            CHECK(a2avc_r[off + i] == v(round, j, 10 * rank + i + 5), "round %d alltoallv_c from %d[%d]", round, j, i);
        }
        off += n;
    }
    for (int i = 0, off = rank * (rank + 1) / 2; i <= rank; i++) {
        int sum = size * (1000 * round + off + i) + 100 * size * (size - 1) / 2;
        CHECK(rs_r[i] == sum, "round %d reduce_scatter[%d] %d, expected %d", round, i, rs_r[i], sum);
    }
    for (int i = 0; i < 2; i++) {
        int sum = size * (1000 * round + 2 * rank + i) + 100 * size * (size - 1) / 2;
        CHECK(rsb_r[i] == sum, "round %d reduce_scatter_block[%d] %d", round, i, rsb_r[i]);
    }
    CHECK(scan_r[0] == (rank + 1) * 1000 * round + 100 * rank * (rank + 1) / 2, "round %d scan %d", round, scan_r[0]);
    if (rank > 0) CHECK(exscan_r[0] == rank * 1000 * round + 100 * rank * (rank - 1) / 2, "round %d exscan %d", round, exscan_r[0]);
    /* Ring neighbours: 0 is the left one, 1 the right one. */
    CHECK(n_ag_r[0] == v(round, left, 0) && n_ag_r[1] == v(round, right, 0), "round %d neighbor_allgather %d %d", round, n_ag_r[0], n_ag_r[1]);
    CHECK(n_agv_r[1] == v(round, left, 0) && n_agv_r[0] == v(round, right, 0), "round %d neighbor_allgatherv", round);
    CHECK(n_a2a_r[0] == v(round, left, 1) && n_a2a_r[1] == v(round, right, 0), "round %d neighbor_alltoall %d %d", round, n_a2a_r[0], n_a2a_r[1]);
    CHECK(n_a2av_r[1] == v(round, left, 1) && n_a2av_r[0] == v(round, right, 0), "round %d neighbor_alltoallv", round);
    CHECK(n_a2aw_r[1] == v(round, left, 1) && n_a2aw_r[0] == v(round, right, 0), "round %d neighbor_alltoallw", round);
    CHECK(nwc_r[1] == v(round, left, 1) && nwc_r[0] == v(round, right, 0), "round %d neighbor_alltoallw_c", round);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    CHECK(size <= MAXR, "at most %d ranks", MAXR);
    MPI_Info info;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    MPI_Comm ring;
    int dims[1] = {size}, periods[1] = {1};
    OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));

    int broot = size - 1, groot = 1 % size, sroot = size / 2;
    int cnt[MAXR], dsp[MAXR], rev[MAXR], a2c[MAXR], a2d[MAXR], wc[MAXR], wsd[MAXR], wrd[MAXR], rsc[MAXR];
    MPI_Datatype wt[MAXR];
    MPI_Count ccnt[MAXR];
    MPI_Aint cdsp[MAXR];
    for (int r = 0, off = 0, roff = 0; r < size; r++) {
        cnt[r] = r + 1, dsp[r] = off, off += r + 1;
        rsc[r] = r + 1;
        wc[r] = 1, wsd[r] = 4 * r, wrd[r] = 4 * (size - 1 - r), wt[r] = MPI_INT;
        a2c[r] = 1 + (rank + r) % 2, a2d[r] = roff, roff += a2c[r];
        ccnt[r] = a2c[r], cdsp[r] = a2d[r];
    }
    for (int r = size - 1, off = 0; r >= 0; r--) rev[r] = off, off += r + 1;
    int ncnt[2] = {1, 1}, nswap[2] = {1, 0}, nstr[2] = {0, 1};
    MPI_Aint nsd[2] = {0, 4}, nrd[2] = {4, 0};
    MPI_Datatype nt[2] = {MPI_INT, MPI_INT};
    MPI_Count nccnt[2] = {1, 1};

    MPI_Request q[NREQ];
    OK(MPI_Barrier_init(MPI_COMM_WORLD, info, &q[BARRIER]));
    OK(MPI_Bcast_init(bc, 3, MPI_INT, broot, MPI_COMM_WORLD, info, &q[BCAST]));
    OK(MPI_Reduce_init(red_s, red_r, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &q[REDUCE]));
    OK(MPI_Allreduce_init(ar_s, ar_r, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD, info, &q[ALLREDUCE]));
    OK(MPI_Gather_init(g_s, 2, MPI_INT, g_r, 2, MPI_INT, groot, MPI_COMM_WORLD, info, &q[GATHER]));
    OK(MPI_Gatherv_init(gv_s, rank + 1, MPI_INT, gv_r, cnt, rev, MPI_INT, 0, MPI_COMM_WORLD, info, &q[GATHERV]));
    OK(MPI_Scatter_init(sc_s, 2, MPI_INT, sc_r, 2, MPI_INT, sroot, MPI_COMM_WORLD, info, &q[SCATTER]));
    OK(MPI_Scatterv_init(scv_s, cnt, rev, MPI_INT, scv_r, rank + 1, MPI_INT, 0, MPI_COMM_WORLD, info, &q[SCATTERV]));
    OK(MPI_Allgather_init(ag_s, 1, MPI_INT, ag_r, 1, MPI_INT, MPI_COMM_WORLD, info, &q[ALLGATHER]));
    OK(MPI_Allgatherv_init(agv_s, rank + 1, MPI_INT, agv_r, cnt, dsp, MPI_INT, MPI_COMM_WORLD, info, &q[ALLGATHERV]));
    OK(MPI_Alltoall_init(a2a_s, 1, MPI_INT, a2a_r, 1, MPI_INT, MPI_COMM_WORLD, info, &q[ALLTOALL]));
    OK(MPI_Alltoallv_init(a2av_s, a2c, a2d, MPI_INT, a2av_r, a2c, a2d, MPI_INT, MPI_COMM_WORLD, info, &q[ALLTOALLV]));
    OK(MPI_Alltoallw_init(a2aw_s, wc, wsd, wt, a2aw_r, wc, wrd, wt, MPI_COMM_WORLD, info, &q[ALLTOALLW]));
    OK(MPI_Reduce_scatter_init(rs_s, rs_r, rsc, MPI_INT, MPI_SUM, MPI_COMM_WORLD, info, &q[RSCATTER]));
    OK(MPI_Reduce_scatter_block_init(rsb_s, rsb_r, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD, info, &q[RSCATTER_BLOCK]));
    OK(MPI_Scan_init(scan_s, scan_r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, info, &q[SCAN]));
    OK(MPI_Exscan_init(scan_s, exscan_r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, info, &q[EXSCAN]));
    OK(MPI_Neighbor_allgather_init(n_s, 1, MPI_INT, n_ag_r, 1, MPI_INT, ring, info, &q[N_ALLGATHER]));
    OK(MPI_Neighbor_allgatherv_init(n_s, 1, MPI_INT, n_agv_r, ncnt, nswap, MPI_INT, ring, info, &q[N_ALLGATHERV]));
    OK(MPI_Neighbor_alltoall_init(n_s, 1, MPI_INT, n_a2a_r, 1, MPI_INT, ring, info, &q[N_ALLTOALL]));
    OK(MPI_Neighbor_alltoallv_init(n_s, ncnt, nstr, MPI_INT, n_a2av_r, ncnt, nswap, MPI_INT, ring, info, &q[N_ALLTOALLV]));
    OK(MPI_Neighbor_alltoallw_init(n_s, ncnt, nsd, nt, n_a2aw_r, ncnt, nrd, nt, ring, info, &q[N_ALLTOALLW]));
    OK(MPI_Bcast_init_c(bcc, 3, MPI_INT, broot, MPI_COMM_WORLD, info, &q[BCAST_C]));
    OK(MPI_Allreduce_init_c(arc_s, arc_r, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD, info, &q[ALLREDUCE_C]));
    OK(MPI_Alltoallv_init_c(a2avc_s, ccnt, cdsp, MPI_INT, a2avc_r, ccnt, cdsp, MPI_INT, MPI_COMM_WORLD, info, &q[ALLTOALLV_C]));
    OK(MPI_Neighbor_alltoallw_init_c(n_s, nccnt, nsd, nt, nwc_r, nccnt, nrd, nt, ring, info, &q[N_ALLTOALLW_C]));
    OK(MPI_Info_free(&info));

    for (int round = 0; round < ROUNDS; round++) {
        fill(round, broot, sroot);
        /* Nothing moves before the start: the receive buffers are untouched. */
        CHECK(ag_r[0] == -1 && ar_r[0] == -1, "round %d: results before the start", round);
        int way = round % 4;
        if (way == 3) {
            for (int k = 0; k < NREQ; k++) OK(MPI_Start(&q[k]));
        } else {
            OK(MPI_Startall(NREQ, q));
        }
        if (way == 0) {
            OK(MPI_Waitall(NREQ, q, MPI_STATUSES_IGNORE));
        } else if (way == 1) {
            for (int k = NREQ - 1; k >= 0; k--) OK(MPI_Wait(&q[k], MPI_STATUS_IGNORE));
        } else if (way == 2) {
            int flag = 0;
            while (!flag) OK(MPI_Testall(NREQ, q, &flag, MPI_STATUSES_IGNORE));
        } else {
            int left = NREQ, out, idx[NREQ];
            while (left > 0) {
                OK(MPI_Waitsome(NREQ, q, &out, idx, MPI_STATUSES_IGNORE));
                CHECK(out != MPI_UNDEFINED, "waitsome found no active request with %d left", left);
                left -= out;
            }
        }
        for (int k = 0; k < NREQ; k++) CHECK(q[k] != MPI_REQUEST_NULL, "request %d became null", k);
        check(round, broot, groot, sroot);
        /* Completed persistent requests are inactive: waiting again returns at once. */
        OK(MPI_Waitall(NREQ, q, MPI_STATUSES_IGNORE));
    }

    /* Freed while active: it still completes (the others' calls match it). */
    fill(ROUNDS, broot, sroot);
    OK(MPI_Start(&q[BCAST]));
    OK(MPI_Request_free(&q[BCAST]));
    CHECK(q[BCAST] == MPI_REQUEST_NULL, "freed request not null");
    OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int k = 0; k < NREQ; k++)
        if (k != BCAST) OK(MPI_Request_free(&q[k]));
    OK(MPI_Barrier(MPI_COMM_WORLD));

    /* Bad input. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Request r = MPI_REQUEST_NULL;
    FAILS_WITH(MPI_Bcast_init(bc, 3, MPI_INT, size, MPI_COMM_WORLD, MPI_INFO_NULL, &r), MPI_ERR_ROOT);
    FAILS_WITH(MPI_Bcast_init(bc, -1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Bcast_init_c(bc, -5, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Reduce_init(red_s, red_r, 2, MPI_INT, MPI_OP_NULL, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &r), MPI_ERR_OP);
    FAILS_WITH(MPI_Allreduce_init(ar_s, ar_r, 3, MPI_DATATYPE_NULL, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &r), MPI_ERR_TYPE);
    FAILS_WITH(MPI_Barrier_init(MPI_COMM_NULL, MPI_INFO_NULL, &r), MPI_ERR_COMM);
    FAILS_WITH(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, NULL), MPI_ERR_ARG);
    FAILS_WITH(MPI_Neighbor_allgather_init(n_s, 1, MPI_INT, n_ag_r, 1, MPI_INT, MPI_COMM_WORLD, MPI_INFO_NULL, &r), MPI_ERR_TOPOLOGY);
    FAILS_WITH(MPI_Scan_init(scan_s, scan_r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, NULL), MPI_ERR_ARG);
    CHECK(r == MPI_REQUEST_NULL, "a failed init wrote a request");
    OK(MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    OK(MPI_Start(&r));
    FAILS_WITH(MPI_Start(&r), MPI_ERR_REQUEST);
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    OK(MPI_Request_free(&r));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    OK(MPI_Comm_free(&ring));
    OK(MPI_Finalize());
    printf("OK coll_persistent %d\n", rank);
    return 0;
}
