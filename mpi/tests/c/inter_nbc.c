/* Non-blocking and persistent collectives on intercommunicators (MPI-3.1 §5.12, MPI-4.0 §6.13):
 * intercommunicators from MPI_Comm_split + MPI_Intercomm_create with unequal groups (1 and n-1,
 * then halves, then n-1 and 1); every collective with an intercommunicator form (Barrier, Bcast,
 * Reduce, Allreduce, Gather(v), Scatter(v), Allgather(v), Alltoall(v,w), Reduce_scatter(_block), a
 * few _c forms, a non-commutative user's operation) run blocking, non-blocking and persistent
 * (started twice, with new data each time), the results compared element by element (receive
 * buffers start filled with a sentinel, so gaps and untouched buffers are compared too); counts 2
 * and 3000 (past the eager limit), a strided derived datatype in some; roots in either group
 * (MPI_ROOT / MPI_PROC_NULL / the root's rank); several non-blocking and persistent ones
 * outstanding at once, completed by one Waitall in another order; bad input: MPI_IN_PLACE, a bad
 * root, Iscan/Exscan_init on an intercommunicator. Needs 2 ranks or more (one prints OK and
 * stops).
 * Prints "OK inter_nbc <rank>". */
#include "check.h"

static int rank, size;

typedef struct {
    int color, lsize, rsize, lrank;
    MPI_Comm local, ic;
} Conf;

/* Colour 0: world ranks below `cut`; local ranks in world order. */
static Conf make(int cut) {
    Conf c;
    c.color = rank < cut ? 0 : 1;
    OK(MPI_Comm_split(MPI_COMM_WORLD, c.color, rank, &c.local));
    OK(MPI_Comm_rank(c.local, &c.lrank));
    OK(MPI_Comm_size(c.local, &c.lsize));
    c.rsize = size - c.lsize;
    OK(MPI_Intercomm_create(c.local, 0, MPI_COMM_WORLD, c.color == 0 ? cut : 0, 91, &c.ic));
    OK(MPI_Comm_set_errhandler(c.ic, MPI_ERRORS_RETURN));
    int rs;
    OK(MPI_Comm_remote_size(c.ic, &rs));
    CHECK(rs == c.rsize, "remote size %d, expected %d", rs, c.rsize);
    return c;
}

static void unmake(Conf *c) {
    OK(MPI_Comm_free(&c->ic));
    OK(MPI_Comm_free(&c->local));
}

/* ------------------------------------------------------------------------------------------ */
/* The harness: each operation runs in the mode set here, on `send` (filled by `fill(salt)`)
 * into `out` (sentinel-filled). */

enum { BLOCKING, NONBLOCKING, PERSISTENT };
static int mode, salt, k;
static int *send, *out, *out2;
static int len; /* of send, out and out2, in ints */
static MPI_Datatype strided; /* k ints, every other one */
#define SENTINEL (-7)
#define TOTAL 840 /* Reduce_scatter(_block)'s vector: every group size up to 8 divides it */

static void fill(int s) {
    for (int i = 0; i < len; i++) send[i] = rank * 100000 + s * 37 + i;
}

static void reset(int *b) {
    for (int i = 0; i < len; i++) b[i] = SENTINEL;
}

static void wait1(MPI_Request *r) { OK(MPI_Wait(r, MPI_STATUS_IGNORE)); }

/* Runs a collective in the current mode: B_ blocking, I_ non-blocking, P_ persistent (started
 * twice: first with the data of salt + 1, its result kept in out2, then with salt's). */
#define COLL(B_, I_, P_, ...)                                                                              \
    do {                                                                                                   \
        MPI_Request r_;                                                                                    \
        if (mode == BLOCKING) {                                                                            \
            OK(B_(__VA_ARGS__));                                                                           \
        } else if (mode == NONBLOCKING) {                                                                  \
            OK(I_(__VA_ARGS__, &r_));                                                                      \
            wait1(&r_);                                                                                    \
        } else {                                                                                           \
            OK(P_(__VA_ARGS__, MPI_INFO_NULL, &r_));                                                       \
            fill(salt + 1);                                                                                \
            OK(MPI_Start(&r_));                                                                            \
            wait1(&r_);                                                                                    \
            memcpy(out2, out, sizeof(int) * len);                                                          \
            reset(out);                                                                                    \
            fill(salt);                                                                                    \
            OK(MPI_Start(&r_));                                                                            \
            wait1(&r_);                                                                                    \
            OK(MPI_Request_free(&r_));                                                                     \
            CHECK(r_ == MPI_REQUEST_NULL, "freed request");                                                \
        }                                                                                                  \
    } while (0)

typedef void (*Op)(const Conf *c, int root);

/* Runs `f` blocking (salts s and s + 1), non-blocking and persistent, comparing every element. */
static void compare(const char *name, Op f, const Conf *c, int root, int s) {
    int *ref0 = xmalloc(sizeof(int) * len), *ref1 = xmalloc(sizeof(int) * len);
    mode = BLOCKING;
    salt = s + 1;
    fill(salt);
    reset(out);
    f(c, root);
    memcpy(ref1, out, sizeof(int) * len);
    salt = s;
    fill(salt);
    reset(out);
    f(c, root);
    memcpy(ref0, out, sizeof(int) * len);
    mode = NONBLOCKING;
    reset(out);
    f(c, root);
    for (int i = 0; i < len; i++)
        CHECK(out[i] == ref0[i], "%s (root %d, k %d, groups %d/%d): non-blocking [%d] = %d, blocking %d", name, root, k,
              c->lsize, c->rsize, i, out[i], ref0[i]);
    mode = PERSISTENT;
    reset(out);
    reset(out2);
    f(c, root);
    for (int i = 0; i < len; i++) {
        CHECK(out[i] == ref0[i], "%s (root %d, k %d, groups %d/%d): persistent [%d] = %d, blocking %d", name, root, k,
              c->lsize, c->rsize, i, out[i], ref0[i]);
        CHECK(out2[i] == ref1[i], "%s (root %d, k %d, groups %d/%d): first start [%d] = %d, blocking %d", name, root, k,
              c->lsize, c->rsize, i, out2[i], ref1[i]);
    }
    free(ref0);
    free(ref1);
}

/* The v-forms' counts: block j of a group's members. */
static int cnt(int j) { return 1 + (j % 3) * (k / 3); }

/* Counts and displacements (a gap of one element after each block) over `n` members. */
static int vc[8], vd[8];
static void vform(int n) {
    int d = 0;
    for (int j = 0; j < n; j++) {
        vc[j] = cnt(j);
        vd[j] = d;
        d += vc[j] + 1;
    }
}

/* All-to-all v: what sender `s` of group `color` sends to remote member `r` (0 too). */
static int a2a(int color, int s, int r) { return ((s + 2 * r + color) % 3) * ((k + 2) / 3); }

/* ------------------------------------------------------------------------------------------ */
/* The operations. */

static void op_barrier(const Conf *c, int root) {
    (void)root;
    COLL(MPI_Barrier, MPI_Ibarrier, MPI_Barrier_init, c->ic);
}

static void op_bcast(const Conf *c, int root) {
    void *buf = root == MPI_ROOT ? (void *)send : (void *)out;
    COLL(MPI_Bcast, MPI_Ibcast, MPI_Bcast_init, buf, k, MPI_INT, root, c->ic);
}

static void op_bcast_strided(const Conf *c, int root) {
    void *buf = root == MPI_ROOT ? (void *)send : (void *)out;
    COLL(MPI_Bcast, MPI_Ibcast, MPI_Bcast_init, buf, 1, strided, root, c->ic);
}

static void op_bcast_c(const Conf *c, int root) {
    void *buf = root == MPI_ROOT ? (void *)send : (void *)out;
    COLL(MPI_Bcast_c, MPI_Ibcast_c, MPI_Bcast_init_c, buf, (MPI_Count)k, MPI_INT, root, c->ic);
}

static void op_reduce(const Conf *c, int root) {
    COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, send, out, k, MPI_INT, MPI_SUM, root, c->ic);
}

static void op_reduce_strided(const Conf *c, int root) {
    COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, send, out, 1, strided, MPI_MAX, root, c->ic);
}

static void op_allreduce(const Conf *c, int root) {
    (void)root;
    COLL(MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init, send, out, k, MPI_INT, MPI_SUM, c->ic);
}

static void op_allreduce_c(const Conf *c, int root) {
    (void)root;
    COLL(MPI_Allreduce_c, MPI_Iallreduce_c, MPI_Allreduce_init_c, send, out, (MPI_Count)k, MPI_INT, MPI_BXOR, c->ic);
}

/* A non-commutative user's operation: the left (lower ranks') operand, so the result is the
 * reducing group's rank 0's data only if the order is kept. */
static MPI_Op left;
static void take_left(void *in, void *inout, int *n, MPI_Datatype *dt) {
    (void)dt;
    memcpy(inout, in, sizeof(int) * (size_t)*n);
}

static void op_reduce_user(const Conf *c, int root) {
    COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, send, out, k, MPI_INT, left, root, c->ic);
}

static void op_allreduce_user(const Conf *c, int root) {
    (void)root;
    COLL(MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init, send, out, k, MPI_INT, left, c->ic);
}

static void op_gather(const Conf *c, int root) {
    COLL(MPI_Gather, MPI_Igather, MPI_Gather_init, send, k, MPI_INT, out, k, MPI_INT, root, c->ic);
}

static void op_gather_strided(const Conf *c, int root) {
    COLL(MPI_Gather, MPI_Igather, MPI_Gather_init, send, 1, strided, out, k, MPI_INT, root, c->ic);
}

static void op_gatherv(const Conf *c, int root) {
    vform(c->rsize);
    COLL(MPI_Gatherv, MPI_Igatherv, MPI_Gatherv_init, send, cnt(c->lrank), MPI_INT, out, vc, vd, MPI_INT, root,
         c->ic);
}

static void op_scatter(const Conf *c, int root) {
    COLL(MPI_Scatter, MPI_Iscatter, MPI_Scatter_init, send, k, MPI_INT, out, k, MPI_INT, root, c->ic);
}

static void op_scatter_strided(const Conf *c, int root) {
    COLL(MPI_Scatter, MPI_Iscatter, MPI_Scatter_init, send, k, MPI_INT, out, 1, strided, root, c->ic);
}

static void op_scatterv(const Conf *c, int root) {
    vform(c->rsize);
    COLL(MPI_Scatterv, MPI_Iscatterv, MPI_Scatterv_init, send, vc, vd, MPI_INT, out, cnt(c->lrank), MPI_INT, root,
         c->ic);
}

static void op_allgather(const Conf *c, int root) {
    (void)root;
    COLL(MPI_Allgather, MPI_Iallgather, MPI_Allgather_init, send, 1, strided, out, k, MPI_INT, c->ic);
}

static void op_allgatherv(const Conf *c, int root) {
    (void)root;
    vform(c->rsize);
    COLL(MPI_Allgatherv, MPI_Iallgatherv, MPI_Allgatherv_init, send, cnt(c->lrank), MPI_INT, out, vc, vd, MPI_INT,
         c->ic);
}

static void op_alltoall(const Conf *c, int root) {
    (void)root;
    COLL(MPI_Alltoall, MPI_Ialltoall, MPI_Alltoall_init, send, k, MPI_INT, out, k, MPI_INT, c->ic);
}

static int sc[8], sd[8], rc[8], rd[8], sdb[8], rdb[8];
static MPI_Datatype ints[8];

static void a2a_arrays(const Conf *c) {
    int s = 0, r = 0;
    for (int j = 0; j < c->rsize; j++) {
        sc[j] = a2a(c->color, c->lrank, j);
        rc[j] = a2a(1 - c->color, j, c->lrank);
        sd[j] = s;
        rd[j] = r;
        sdb[j] = s * (int)sizeof(int);
        rdb[j] = r * (int)sizeof(int);
        s += sc[j] + 1;
        r += rc[j] + 2;
        ints[j] = MPI_INT;
    }
}

static void op_alltoallv(const Conf *c, int root) {
    (void)root;
    a2a_arrays(c);
    COLL(MPI_Alltoallv, MPI_Ialltoallv, MPI_Alltoallv_init, send, sc, sd, MPI_INT, out, rc, rd, MPI_INT, c->ic);
}

static void op_alltoallw(const Conf *c, int root) {
    (void)root;
    a2a_arrays(c);
    COLL(MPI_Alltoallw, MPI_Ialltoallw, MPI_Alltoallw_init, send, sc, sdb, ints, out, rc, rdb, ints, c->ic);
}

/* TOTAL elements split among the local group, the first ones one more. */
static int rsc[8];
static void op_reduce_scatter(const Conf *c, int root) {
    (void)root;
    for (int i = 0; i < c->lsize; i++) rsc[i] = TOTAL / c->lsize + (i < TOTAL % c->lsize ? 1 : 0);
    COLL(MPI_Reduce_scatter, MPI_Ireduce_scatter, MPI_Reduce_scatter_init, send, out, rsc, MPI_INT, MPI_SUM, c->ic);
}

static void op_reduce_scatter_block(const Conf *c, int root) {
    (void)root;
    COLL(MPI_Reduce_scatter_block, MPI_Ireduce_scatter_block, MPI_Reduce_scatter_block_init, send, out,
         TOTAL / c->lsize, MPI_INT, MPI_SUM, c->ic);
}

/* ------------------------------------------------------------------------------------------ */

/* The root argument of this process for a root at local rank `rr` of group `g`. */
static int root_arg(const Conf *c, int g, int rr) {
    if (c->color == g) return c->lrank == rr ? MPI_ROOT : MPI_PROC_NULL;
    return rr;
}

static void all_ops(const Conf *c) {
    static const struct {
        const char *name;
        Op f;
        int rooted;
    } ops[] = {
        {"barrier", op_barrier, 0},
        {"bcast", op_bcast, 1},
        {"bcast strided", op_bcast_strided, 1},
        {"bcast_c", op_bcast_c, 1},
        {"reduce", op_reduce, 1},
        {"reduce strided max", op_reduce_strided, 1},
        {"allreduce", op_allreduce, 0},
        {"allreduce_c bxor", op_allreduce_c, 0},
        {"reduce non-commutative", op_reduce_user, 1},
        {"allreduce non-commutative", op_allreduce_user, 0},
        {"gather", op_gather, 1},
        {"gather strided", op_gather_strided, 1},
        {"gatherv", op_gatherv, 1},
        {"scatter", op_scatter, 1},
        {"scatter strided", op_scatter_strided, 1},
        {"scatterv", op_scatterv, 1},
        {"allgather strided", op_allgather, 0},
        {"allgatherv", op_allgatherv, 0},
        {"alltoall", op_alltoall, 0},
        {"alltoallv", op_alltoallv, 0},
        {"alltoallw", op_alltoallw, 0},
        {"reduce_scatter", op_reduce_scatter, 0},
        {"reduce_scatter_block", op_reduce_scatter_block, 0},
    };
    int s = 1;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (!ops[i].rooted) {
            compare(ops[i].name, ops[i].f, c, 0, s++);
            continue;
        }
        for (int g = 0; g < 2; g++) {
            int gsize = c->color == g ? c->lsize : c->rsize;
            int roots[2] = {0, gsize - 1};
            for (int t = 0; t < (gsize > 1 ? 2 : 1); t++) compare(ops[i].name, ops[i].f, c, root_arg(c, g, roots[t]), s++);
        }
    }
}

/* Several at once: non-blocking and persistent collectives started together, completed by one
 * Waitall in reverse order, results against their blocking forms. */
static void several(const Conf *c) {
    int n = k * size + 8;
    int *in = xmalloc(sizeof(int) * n), *r[6], *b[6];
    for (int i = 0; i < 6; i++) {
        r[i] = xmalloc(sizeof(int) * n);
        b[i] = xmalloc(sizeof(int) * n);
        for (int j = 0; j < n; j++) r[i][j] = b[i][j] = SENTINEL;
    }
    for (int j = 0; j < n; j++) in[j] = rank * 1000 + j;
    int root0 = root_arg(c, 0, 0), root1 = root_arg(c, 1, c->color == 1 ? c->lsize - 1 : c->rsize - 1);
    MPI_Request q[8];
    OK(MPI_Allgather_init(in, k, MPI_INT, r[4], k, MPI_INT, c->ic, MPI_INFO_NULL, &q[0]));
    OK(MPI_Reduce_init(in, r[5], k, MPI_INT, MPI_SUM, root1, c->ic, MPI_INFO_NULL, &q[1]));
    OK(MPI_Startall(2, q));
    OK(MPI_Ibcast(root0 == MPI_ROOT ? in : r[0], k, MPI_INT, root0, c->ic, &q[2]));
    OK(MPI_Iallreduce(in, r[1], k, MPI_INT, MPI_MAX, c->ic, &q[3]));
    OK(MPI_Ialltoall(in, k, MPI_INT, r[2], k, MPI_INT, c->ic, &q[4]));
    OK(MPI_Ibarrier(c->ic, &q[5]));
    OK(MPI_Igather(in, k, MPI_INT, r[3], k, MPI_INT, root1, c->ic, &q[6]));
    MPI_Request rev[7];
    for (int i = 0; i < 7; i++) rev[i] = q[6 - i];
    OK(MPI_Waitall(7, rev, MPI_STATUSES_IGNORE));
    OK(MPI_Request_free(&rev[5]));
    OK(MPI_Request_free(&rev[6]));
    OK(MPI_Bcast(root0 == MPI_ROOT ? in : b[0], k, MPI_INT, root0, c->ic));
    OK(MPI_Allreduce(in, b[1], k, MPI_INT, MPI_MAX, c->ic));
    OK(MPI_Alltoall(in, k, MPI_INT, b[2], k, MPI_INT, c->ic));
    OK(MPI_Gather(in, k, MPI_INT, b[3], k, MPI_INT, root1, c->ic));
    OK(MPI_Allgather(in, k, MPI_INT, b[4], k, MPI_INT, c->ic));
    OK(MPI_Reduce(in, b[5], k, MPI_INT, MPI_SUM, root1, c->ic));
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < n; j++) CHECK(r[i][j] == b[i][j], "several: op %d [%d] = %d, blocking %d", i, j, r[i][j], b[i][j]);
    /* Known values: Allreduce MAX gives the remote group's largest world rank's data, the
     * non-commutative one its smallest's. */
    int top = c->color == 0 ? size - 1 : c->rsize - 1, bottom = c->color == 0 ? c->lsize : 0;
    for (int j = 0; j < k; j++) CHECK(b[1][j] == top * 1000 + j, "allreduce max [%d] = %d", j, b[1][j]);
    OK(MPI_Allreduce(in, b[0], k, MPI_INT, left, c->ic));
    for (int j = 0; j < k; j++) CHECK(b[0][j] == bottom * 1000 + j, "allreduce left [%d] = %d", j, b[0][j]);
    for (int i = 0; i < 6; i++) {
        free(r[i]);
        free(b[i]);
    }
    free(in);
}

static void bad_input(const Conf *c) {
    MPI_Request q = MPI_REQUEST_NULL;
    int v[4] = {0};
    FAILS_WITH(MPI_Iallreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_SUM, c->ic, &q), MPI_ERR_BUFFER);
    FAILS_WITH(MPI_Ialltoall(MPI_IN_PLACE, 1, MPI_INT, v, 1, MPI_INT, c->ic, &q), MPI_ERR_BUFFER);
    FAILS_WITH(MPI_Iallreduce(v, MPI_IN_PLACE, 1, MPI_INT, MPI_SUM, c->ic, &q), MPI_ERR_BUFFER);
    FAILS_WITH(MPI_Allreduce_init(MPI_IN_PLACE, v, 1, MPI_INT, MPI_SUM, c->ic, MPI_INFO_NULL, &q), MPI_ERR_BUFFER);
    FAILS_WITH(MPI_Ibcast(v, 1, MPI_INT, size + 3, c->ic, &q), MPI_ERR_ROOT);
    FAILS_WITH(MPI_Ireduce(v, v + 1, 1, MPI_INT, MPI_SUM, -5, c->ic, &q), MPI_ERR_ROOT);
    FAILS_WITH(MPI_Bcast_init(v, 1, MPI_INT, c->rsize, c->ic, MPI_INFO_NULL, &q), MPI_ERR_ROOT);
    FAILS_WITH(MPI_Gather_init(v, 1, MPI_INT, v, 1, MPI_INT, -7, c->ic, MPI_INFO_NULL, &q), MPI_ERR_ROOT);
    FAILS_WITH(MPI_Iscan(v, v + 1, 1, MPI_INT, MPI_SUM, c->ic, &q), MPI_ERR_COMM);
    FAILS_WITH(MPI_Exscan_init(v, v + 1, 1, MPI_INT, MPI_SUM, c->ic, MPI_INFO_NULL, &q), MPI_ERR_COMM);
    CHECK(q == MPI_REQUEST_NULL, "no request made");
    /* The intercommunicator still works after the refusals. */
    OK(MPI_Ibarrier(c->ic, &q));
    wait1(&q);
}

static void run(int cut) {
    Conf c = make(cut);
    for (int kk = 0; kk < 2; kk++) {
        k = kk == 0 ? 2 : 3000;
        len = 4 * k * size + TOTAL + 64;
        send = xmalloc(sizeof(int) * len);
        out = xmalloc(sizeof(int) * len);
        out2 = xmalloc(sizeof(int) * len);
        OK(MPI_Type_vector(k, 1, 2, MPI_INT, &strided));
        OK(MPI_Type_commit(&strided));
        all_ops(&c);
        several(&c);
        OK(MPI_Type_free(&strided));
        free(send);
        free(out);
        free(out2);
    }
    bad_input(&c);
    unmake(&c);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    OK(MPI_Op_create(take_left, 0, &left));
    if (size >= 2) {
        run(1);
        if (size >= 4) run(size / 2);
        if (size >= 3) run(size - 1);
    }
    OK(MPI_Op_free(&left));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK inter_nbc %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
