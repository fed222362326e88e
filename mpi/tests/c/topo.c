/* Process topologies: MPI_Dims_create; a 2-D Cartesian communicator (periodic in one dimension)
 * with its coordinates, ranks, shifts (a halo exchange checked value by value) and sub-grids; a
 * grid smaller than the job (the rest get MPI_COMM_NULL); a graph (a ring with a chord) with its
 * neighbours and an exchange along its edges; MPI_Topo_test; a dup keeps the topology. Prints
 * "OK topo <rank>". */
#include "check.h"

static int rank, size;

static void dims(void) {
    int d[3] = {0, 0, 0};
    OK(MPI_Dims_create(12, 2, d));
    CHECK(d[0] == 4 && d[1] == 3, "dims of 12: %d %d", d[0], d[1]);
    int e[3] = {0, 3, 0};
    OK(MPI_Dims_create(30, 3, e));
    CHECK(e[0] * e[1] * e[2] == 30 && e[1] == 3 && e[0] >= e[2], "dims of 30 with 3 fixed: %d %d %d", e[0], e[1], e[2]);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int f[2] = {4, 0};
    FAILS_WITH(MPI_Dims_create(10, 2, f), MPI_ERR_DIMS);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void cartesian(void) {
    int d[2] = {0, 0}, periods[2] = {1, 0};
    OK(MPI_Dims_create(size, 2, d));
    MPI_Comm cart;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, d, periods, 0, &cart));
    int status, nd, cr;
    OK(MPI_Topo_test(cart, &status));
    CHECK(status == MPI_CART, "topo_test: %d", status);
    OK(MPI_Topo_test(MPI_COMM_WORLD, &status));
    CHECK(status == MPI_UNDEFINED, "world has a topology: %d", status);
    OK(MPI_Cartdim_get(cart, &nd));
    CHECK(nd == 2, "cartdim %d", nd);
    OK(MPI_Comm_rank(cart, &cr));
    CHECK(cr == rank, "ranks are not reordered");
    int gd[2], gp[2], gc[2];
    OK(MPI_Cart_get(cart, 2, gd, gp, gc));
    CHECK(gd[0] == d[0] && gd[1] == d[1] && gp[0] == 1 && gp[1] == 0, "cart_get dims/periods");
    CHECK(gc[0] == rank / d[1] && gc[1] == rank % d[1], "my coords %d %d", gc[0], gc[1]);
    for (int r = 0; r < size; r++) {
        int c[2], back;
        OK(MPI_Cart_coords(cart, r, 2, c));
        OK(MPI_Cart_rank(cart, c, &back));
        CHECK(back == r && c[0] == r / d[1] && c[1] == r % d[1], "coords of %d", r);
    }
    /* Dimension 0 is periodic: coordinates wrap. */
    int wrap[2] = {gc[0] + d[0], gc[1]}, wr;
    OK(MPI_Cart_rank(cart, wrap, &wr));
    CHECK(wr == rank, "periodic wrap gives %d", wr);

    /* Shifts and a halo exchange along each dimension. */
    for (int dir = 0; dir < 2; dir++) {
        int src, dst;
        OK(MPI_Cart_shift(cart, dir, 1, &src, &dst));
        int c[2] = {gc[0], gc[1]};
        c[dir] += 1;
        int want_dst = MPI_PROC_NULL, want_src = MPI_PROC_NULL;
        if (dir == 0 || c[dir] < d[dir]) {
            c[dir] = (c[dir] + d[dir]) % d[dir];
            want_dst = c[0] * d[1] + c[1];
        }
        c[0] = gc[0];
        c[1] = gc[1];
        c[dir] -= 1;
        if (dir == 0 || c[dir] >= 0) {
            c[dir] = (c[dir] + d[dir]) % d[dir];
            want_src = c[0] * d[1] + c[1];
        }
        CHECK(src == want_src && dst == want_dst, "shift dir %d: %d %d, expected %d %d", dir, src, dst, want_src,
              want_dst);
        int got = -7;
        OK(MPI_Sendrecv(&rank, 1, MPI_INT, dst, dir, &got, 1, MPI_INT, src, dir, cart, MPI_STATUS_IGNORE));
        CHECK(got == (src == MPI_PROC_NULL ? -7 : src), "halo dir %d: got %d from %d", dir, got, src);
    }

    /* Sub-grids: rows (keep dimension 1) and columns (keep dimension 0). */
    int keep_row[2] = {0, 1}, keep_col[2] = {1, 0};
    MPI_Comm row, col;
    OK(MPI_Cart_sub(cart, keep_row, &row));
    OK(MPI_Cart_sub(cart, keep_col, &col));
    int rn, rr, cn, crr;
    OK(MPI_Comm_size(row, &rn));
    OK(MPI_Comm_rank(row, &rr));
    OK(MPI_Comm_size(col, &cn));
    OK(MPI_Comm_rank(col, &crr));
    CHECK(rn == d[1] && rr == gc[1] && cn == d[0] && crr == gc[0], "sub-grids: row %d/%d col %d/%d", rr, rn, crr, cn);
    int sum = 0;
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, row));
    int want = 0;
    for (int j = 0; j < d[1]; j++) want += gc[0] * d[1] + j;
    CHECK(sum == want, "sum over my row: %d not %d", sum, want);
    OK(MPI_Cartdim_get(row, &nd));
    CHECK(nd == 1, "a row has %d dimensions", nd);

    /* A dup keeps the topology. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(cart, &dup));
    OK(MPI_Topo_test(dup, &status));
    CHECK(status == MPI_CART, "dup lost the topology");
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&row));
    OK(MPI_Comm_free(&col));
    OK(MPI_Comm_free(&cart));

    /* A grid smaller than the job: the last rank is left out. */
    if (size > 1) {
        int d1[1] = {size - 1}, p1[1] = {0};
        OK(MPI_Cart_create(MPI_COMM_WORLD, 1, d1, p1, 1, &cart));
        CHECK((rank == size - 1) == (cart == MPI_COMM_NULL), "rank %d left out or not", rank);
        if (cart != MPI_COMM_NULL) OK(MPI_Comm_free(&cart));
    }
}

static void graph(void) {
    /* A ring with a chord between node 0 and node size/2 (from 4 ranks on): symmetric. */
    int index[64], edges[256], ne = 0;
    for (int i = 0; i < size; i++) {
        if (size > 1) edges[ne++] = (i + 1) % size;
        if (size > 2) edges[ne++] = (i + size - 1) % size;
        if (size >= 4 && i == 0) edges[ne++] = size / 2;
        if (size >= 4 && i == size / 2) edges[ne++] = 0;
        index[i] = ne;
    }
    MPI_Comm g;
    OK(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &g));
    int status, nn, nedges;
    OK(MPI_Topo_test(g, &status));
    CHECK(status == MPI_GRAPH, "graph topo_test %d", status);
    OK(MPI_Graphdims_get(g, &nn, &nedges));
    CHECK(nn == size && nedges == ne, "graphdims %d %d", nn, nedges);
    int gi[64], ge[256];
    OK(MPI_Graph_get(g, 64, 256, gi, ge));
    for (int i = 0; i < size; i++) CHECK(gi[i] == index[i], "index[%d]", i);
    for (int i = 0; i < ne; i++) CHECK(ge[i] == edges[i], "edges[%d]", i);
    int cnt, nb[64];
    OK(MPI_Graph_neighbors_count(g, rank, &cnt));
    OK(MPI_Graph_neighbors(g, rank, 64, nb));
    int from = rank == 0 ? 0 : index[rank - 1];
    CHECK(cnt == index[rank] - from, "my neighbour count %d", cnt);
    /* Exchange with every neighbour (the graph is symmetric). */
    MPI_Request reqs[128];
    int got[64];
    for (int j = 0; j < cnt; j++) {
        CHECK(nb[j] == edges[from + j], "neighbour %d", j);
        OK(MPI_Irecv(&got[j], 1, MPI_INT, nb[j], 5, g, &reqs[j]));
    }
    for (int j = 0; j < cnt; j++) OK(MPI_Isend(&rank, 1, MPI_INT, nb[j], 5, g, &reqs[cnt + j]));
    OK(MPI_Waitall(2 * cnt, reqs, MPI_STATUSES_IGNORE));
    for (int j = 0; j < cnt; j++) CHECK(got[j] == nb[j], "from neighbour %d got %d", nb[j], got[j]);
    int status2;
    OK(MPI_Comm_set_errhandler(g, MPI_ERRORS_RETURN));
    int c2[2];
    FAILS_WITH(MPI_Cart_coords(g, 0, 2, c2), MPI_ERR_TOPOLOGY);
    OK(MPI_Topo_test(g, &status2));
    OK(MPI_Comm_free(&g));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    CHECK(size <= 60, "at most 60 ranks");
    dims();
    cartesian();
    graph();
    OK(MPI_Finalize());
    printf("OK topo %d\n", rank);
    return 0;
}
