/* Distributed graphs and neighbourhood collectives: MPI_Dist_graph_create_adjacent (with weights)
 * and MPI_Dist_graph_create (all edges given by rank 0), MPI_Dist_graph_neighbors(_count),
 * MPI_Topo_test; MPI_Neighbor_allgather(v) and MPI_Neighbor_alltoall(v/w), blocking and
 * non-blocking, on a periodic Cartesian grid (two neighbours may be one rank: the directions must
 * not be mixed up), a non-periodic one (MPI_PROC_NULL slots untouched), a graph and a distributed
 * graph with two edges to some ranks; a communicator without topology is MPI_ERR_TOPOLOGY.
 * Prints "OK neighbor <rank>". */
#include "check.h"

static int rank, size;

enum { N = 3, POISON = -9 };

static void on_cart(int periodic) {
    int dims[2] = {0, 0}, periods[2] = {periodic, periodic};
    OK(MPI_Dims_create(size, 2, dims));
    MPI_Comm cart;
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    int nb[4];
    for (int d = 0; d < 2; d++) OK(MPI_Cart_shift(cart, d, 1, &nb[2 * d], &nb[2 * d + 1]));
    /* Allgather: every neighbour's rank, N copies. */
    int mine[N], got[4 * N];
    for (int i = 0; i < N; i++) mine[i] = rank * 100 + i;
    for (int i = 0; i < 4 * N; i++) got[i] = POISON;
    OK(MPI_Neighbor_allgather(mine, N, MPI_INT, got, N, MPI_INT, cart));
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < N; i++) {
            int want = nb[k] == MPI_PROC_NULL ? POISON : nb[k] * 100 + i;
            CHECK(got[k * N + i] == want, "cart allgather slot %d [%d] = %d, want %d", k, i, got[k * N + i], want);
        }
    /* Alltoall: block k goes to out-neighbour k; the receiver's -1 slot gets what its -1
     * neighbour sent towards +1 (block 2d + 1), its +1 slot what was sent towards -1 (2d). */
    int out[4 * N], in[4 * N];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < N; i++) out[k * N + i] = rank * 1000 + k * 10 + i;
    for (int i = 0; i < 4 * N; i++) in[i] = POISON;
    MPI_Request r;
    OK(MPI_Ineighbor_alltoall(out, N, MPI_INT, in, N, MPI_INT, cart, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int d = 0; d < 2; d++)
        for (int side = 0; side < 2; side++) {
            int k = 2 * d + side, from = nb[k];
            int block = side == 0 ? 2 * d + 1 : 2 * d;
            for (int i = 0; i < N; i++) {
                int want = from == MPI_PROC_NULL ? POISON : from * 1000 + block * 10 + i;
                CHECK(in[k * N + i] == want, "cart alltoall (periodic %d) slot %d [%d] = %d, want %d", periodic, k, i,
                      in[k * N + i], want);
            }
        }
    OK(MPI_Comm_free(&cart));
}

static void on_dist_graph(void) {
    /* Each rank sends to r+1 and r+2 and receives from r-1 and r-2 (two edges to one rank when
     * there are two ranks or fewer). Weights: the distance. */
    int dst[2] = {(rank + 1) % size, (rank + 2) % size}, src[2] = {(rank + size - 1) % size, (rank + 2 * size - 2) % size};
    int w[2] = {1, 2};
    MPI_Comm g;
    OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, src, w, 2, dst, w, MPI_INFO_NULL, 0, &g));
    int status, indeg, outdeg, weighted;
    OK(MPI_Topo_test(g, &status));
    CHECK(status == MPI_DIST_GRAPH, "topo_test %d", status);
    OK(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
    CHECK(indeg == 2 && outdeg == 2 && weighted, "counts %d %d %d", indeg, outdeg, weighted);
    int s2[2], sw[2], d2[2], dw[2];
    OK(MPI_Dist_graph_neighbors(g, 2, s2, sw, 2, d2, dw));
    CHECK(s2[0] == src[0] && s2[1] == src[1] && d2[0] == dst[0] && d2[1] == dst[1], "neighbours");
    CHECK(sw[0] == 1 && sw[1] == 2 && dw[0] == 1 && dw[1] == 2, "weights");
    /* Alltoallv: n + k elements to destination k. */
    int sc[2] = {N, N + 1}, sd[2] = {0, N}, rc[2] = {N, N + 1}, rd[2] = {0, N + 2};
    int out[2 * N + 1], in[2 * N + 3];
    for (int i = 0; i < 2 * N + 1; i++) out[i] = rank * 100 + i;
    for (int i = 0; i < 2 * N + 3; i++) in[i] = POISON;
    OK(MPI_Neighbor_alltoallv(out, sc, sd, MPI_INT, in, rc, rd, MPI_INT, g));
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < rc[k]; i++)
            CHECK(in[rd[k] + i] == src[k] * 100 + sd[k] + i, "dist alltoallv slot %d [%d] = %d", k, i, in[rd[k] + i]);
    CHECK(in[N] == POISON && in[N + 1] == POISON, "dist alltoallv wrote a gap");
    /* Alltoallw with byte displacements, and the non-blocking allgatherv. */
    MPI_Aint bd[2] = {0, (MPI_Aint)sizeof(int) * N};
    MPI_Datatype ty[2] = {MPI_INT, MPI_INT};
    int wc[2] = {N, N};
    for (int i = 0; i < 2 * N; i++) in[i] = POISON;
    OK(MPI_Neighbor_alltoallw(out, wc, bd, ty, in, wc, bd, ty, g));
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < N; i++) CHECK(in[k * N + i] == src[k] * 100 + k * N + i, "dist alltoallw slot %d", k);
    int gc[2] = {1, 1}, gd[2] = {1, 0}, one = rank + 7, two[2] = {POISON, POISON};
    MPI_Request r;
    OK(MPI_Ineighbor_allgatherv(&one, 1, MPI_INT, two, gc, gd, MPI_INT, g, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(two[1] == src[0] + 7 && two[0] == src[1] + 7, "dist allgatherv %d %d", two[0], two[1]);
    OK(MPI_Comm_free(&g));

    /* MPI_Dist_graph_create: rank 0 gives every edge of the ring i -> i + 1. */
    int *srcs = NULL, *degs = NULL, *dsts = NULL, n = 0;
    if (rank == 0) {
        n = size;
        srcs = xmalloc(sizeof(int) * (size_t)size);
        degs = xmalloc(sizeof(int) * (size_t)size);
        dsts = xmalloc(sizeof(int) * (size_t)size);
        for (int i = 0; i < size; i++) {
            srcs[i] = i;
            degs[i] = 1;
            dsts[i] = (i + 1) % size;
        }
    }
    OK(MPI_Dist_graph_create(MPI_COMM_WORLD, n, srcs, degs, dsts, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &g));
    OK(MPI_Dist_graph_neighbors_count(g, &indeg, &outdeg, &weighted));
    CHECK(indeg == 1 && outdeg == 1 && !weighted, "ring counts %d %d %d", indeg, outdeg, weighted);
    OK(MPI_Dist_graph_neighbors(g, 1, s2, MPI_UNWEIGHTED, 1, d2, MPI_UNWEIGHTED));
    CHECK(s2[0] == (rank + size - 1) % size && d2[0] == (rank + 1) % size, "ring neighbours %d %d", s2[0], d2[0]);
    int x = rank, y = POISON;
    OK(MPI_Neighbor_allgather(&x, 1, MPI_INT, &y, 1, MPI_INT, g));
    CHECK(y == (rank + size - 1) % size, "ring allgather %d", y);
    OK(MPI_Comm_free(&g));
    free(srcs);
    free(degs);
    free(dsts);
}

static void on_graph(void) {
    /* A ring as an MPI graph (each node's neighbours: left then right). */
    int *index = xmalloc(sizeof(int) * (size_t)size), *edges = xmalloc(sizeof(int) * 2 * (size_t)size);
    for (int i = 0; i < size; i++) {
        index[i] = 2 * (i + 1);
        edges[2 * i] = (i + size - 1) % size;
        edges[2 * i + 1] = (i + 1) % size;
    }
    MPI_Comm g;
    OK(MPI_Graph_create(MPI_COMM_WORLD, size, index, edges, 0, &g));
    int x = rank, got[2] = {POISON, POISON};
    OK(MPI_Neighbor_allgather(&x, 1, MPI_INT, got, 1, MPI_INT, g));
    CHECK(got[0] == (rank + size - 1) % size && got[1] == (rank + 1) % size, "graph allgather %d %d", got[0], got[1]);
    OK(MPI_Comm_free(&g));
    free(index);
    free(edges);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    on_cart(1);
    on_cart(0);
    on_dist_graph();
    on_graph();
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int x = 0, y;
    FAILS_WITH(MPI_Neighbor_allgather(&x, 1, MPI_INT, &y, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_TOPOLOGY);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK neighbor %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
