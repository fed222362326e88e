/* The roles of rooted collectives on intercommunicators (MPI-4.1 §6.2.3): arguments a role does
 * not use are not significant. Intercommunicators of groups 1 and n-1, halves, n-1 and 1, the
 * root in either group. Reduce, Bcast, Gather(v), Scatter(v), each blocking, non-blocking and
 * persistent (started twice):
 * - the MPI_PROC_NULL callers pass NULL buffers, count 0 and MPI_DATATYPE_NULL or MPI_BYTE with
 *   MPI_SUM (or MPI_OP_NULL), and succeed;
 * - the MPI_ROOT passes NULL/0/MPI_DATATYPE_NULL for its send side (Reduce's send buffer,
 *   Gather(v)'s send side, Scatter(v)'s receive side), the other group for its receive side
 *   (Reduce's receive buffer, Gather(v)'s receive side, Scatter(v)'s send side); results checked;
 * - Reduce with count 0 in every form, with and without a group's data (no hang, nothing
 *   written);
 * - MPI_IN_PLACE at the members of Gatherv/Scatterv (blocking, non-blocking, persistent) refused
 *   with MPI_ERR_BUFFER in one group only, and the non-blocking collectives after it still
 *   matching (a refused call takes no number of the intercommunicator's);
 * - Alltoallw_init with a strided type and Reduce_init with a user's operation, both freed before
 *   the starts and new ones made meanwhile: the requests keep theirs.
 * Needs 2 ranks or more (one prints OK and stops). Prints "OK inter_roles <rank>". */
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
    OK(MPI_Intercomm_create(c.local, 0, MPI_COMM_WORLD, c.color == 0 ? cut : 0, 92, &c.ic));
    OK(MPI_Comm_set_errhandler(c.ic, MPI_ERRORS_RETURN));
    return c;
}

static void unmake(Conf *c) {
    OK(MPI_Comm_free(&c->ic));
    OK(MPI_Comm_free(&c->local));
}

enum { BLOCKING, NONBLOCKING, PERSISTENT };
static int mode;
static const char *modes[] = {"blocking", "non-blocking", "persistent"};

/* Runs a collective in the current mode (persistent: started twice). */
#define COLL(B_, I_, P_, ...)                                                                              \
    do {                                                                                                   \
        MPI_Request r_;                                                                                    \
        if (mode == BLOCKING) {                                                                            \
            OK(B_(__VA_ARGS__));                                                                           \
        } else if (mode == NONBLOCKING) {                                                                  \
            OK(I_(__VA_ARGS__, &r_));                                                                      \
            OK(MPI_Wait(&r_, MPI_STATUS_IGNORE));                                                          \
        } else {                                                                                           \
            OK(P_(__VA_ARGS__, MPI_INFO_NULL, &r_));                                                       \
            for (int s_ = 0; s_ < 2; s_++) {                                                               \
                OK(MPI_Start(&r_));                                                                        \
                OK(MPI_Wait(&r_, MPI_STATUS_IGNORE));                                                      \
            }                                                                                              \
            OK(MPI_Request_free(&r_));                                                                     \
        }                                                                                                  \
    } while (0)

/* The same, expecting error class `cls` and no request. */
#define REFUSED(cls, B_, I_, P_, ...)                                                                      \
    do {                                                                                                   \
        MPI_Request r_ = MPI_REQUEST_NULL;                                                                 \
        if (mode == BLOCKING) {                                                                            \
            FAILS_WITH(B_(__VA_ARGS__), cls);                                                              \
        } else if (mode == NONBLOCKING) {                                                                  \
            FAILS_WITH(I_(__VA_ARGS__, &r_), cls);                                                         \
        } else {                                                                                           \
            FAILS_WITH(P_(__VA_ARGS__, MPI_INFO_NULL, &r_), cls);                                          \
        }                                                                                                  \
        CHECK(r_ == MPI_REQUEST_NULL, "%s: no request", modes[mode]);                                      \
    } while (0)

#define K 3
#define SENT (-7)

/* The roles with the root at local rank 0 of group `rc`. */
static int root_of(const Conf *c, int rc) {
    if (c->color != rc) return 0;
    return c->lrank == 0 ? MPI_ROOT : MPI_PROC_NULL;
}

/* Each collective with the idle callers' and unused sides' arguments null. */
static void roles(const Conf *c, int rc) {
    int root = root_of(c, rc);
    int a[K], b[8 * K], vc[8], vd[8];
    for (int i = 0; i < K; i++) a[i] = rank * 10 + i;
    for (int i = 0; i < 8 * K; i++) b[i] = SENT;
    for (int j = 0; j < 8; j++) {
        vc[j] = K;
        vd[j] = j * K;
    }
    /* At the root: the members' first world rank and their number. */
    int mbase = rc == 0 ? c->lsize : 0, msize = c->rsize;
    const char *m = modes[mode];

    /* Reduce: the idle ones with MPI_DATATYPE_NULL, then MPI_BYTE with MPI_SUM. */
    for (int t = 0; t < 2; t++) {
        MPI_Datatype dt = t == 0 ? MPI_DATATYPE_NULL : MPI_BYTE;
        for (int i = 0; i < K; i++) b[i] = SENT;
        if (root == MPI_PROC_NULL)
            COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, NULL, NULL, 0, dt, MPI_SUM, root, c->ic);
        else if (root == MPI_ROOT)
            COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, NULL, b, K, MPI_INT, MPI_SUM, root, c->ic);
        else
            COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, a, NULL, K, MPI_INT, MPI_SUM, root, c->ic);
        if (root == MPI_ROOT)
            for (int i = 0; i < K; i++) {
                int want = 0;
                for (int r = 0; r < msize; r++) want += (mbase + r) * 10 + i;
                CHECK(b[i] == want, "%s reduce [%d] = %d, want %d", m, i, b[i], want);
            }
    }
    /* Reduce with MPI_OP_NULL at the idle ones. */
    if (root == MPI_PROC_NULL)
        COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, NULL, NULL, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, root, c->ic);
    else if (root == MPI_ROOT)
        COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, NULL, b, K, MPI_INT, MPI_MAX, root, c->ic);
    else
        COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, a, NULL, K, MPI_INT, MPI_MAX, root, c->ic);
    if (root == MPI_ROOT)
        for (int i = 0; i < K; i++) {
            int want = (mbase + msize - 1) * 10 + i;
            CHECK(b[i] == want, "%s reduce max [%d] = %d, want %d", m, i, b[i], want);
        }

    /* Bcast. */
    for (int i = 0; i < K; i++) b[i] = SENT;
    if (root == MPI_PROC_NULL)
        COLL(MPI_Bcast, MPI_Ibcast, MPI_Bcast_init, NULL, 0, MPI_DATATYPE_NULL, root, c->ic);
    else if (root == MPI_ROOT)
        COLL(MPI_Bcast, MPI_Ibcast, MPI_Bcast_init, a, K, MPI_INT, root, c->ic);
    else
        COLL(MPI_Bcast, MPI_Ibcast, MPI_Bcast_init, b, K, MPI_INT, root, c->ic);
    if (root >= 0)
        for (int i = 0; i < K; i++) {
            int want = (rc == 0 ? 0 : c->lsize) * 10 + i; /* the root's world rank */
            CHECK(b[i] == want, "%s bcast [%d] = %d, want %d", m, i, b[i], want);
        }

    /* Gather and Gatherv. */
    for (int v = 0; v < 2; v++) {
        for (int i = 0; i < 8 * K; i++) b[i] = SENT;
        if (root == MPI_PROC_NULL) {
            if (v == 0)
                COLL(MPI_Gather, MPI_Igather, MPI_Gather_init, NULL, 0, MPI_DATATYPE_NULL, NULL, 0,
                     MPI_DATATYPE_NULL, root, c->ic);
            else
                COLL(MPI_Gatherv, MPI_Igatherv, MPI_Gatherv_init, NULL, 0, MPI_DATATYPE_NULL, NULL, NULL, NULL,
                     MPI_DATATYPE_NULL, root, c->ic);
        } else if (root == MPI_ROOT) {
            if (v == 0)
                COLL(MPI_Gather, MPI_Igather, MPI_Gather_init, NULL, 0, MPI_DATATYPE_NULL, b, K, MPI_INT, root,
                     c->ic);
            else
                COLL(MPI_Gatherv, MPI_Igatherv, MPI_Gatherv_init, NULL, 0, MPI_DATATYPE_NULL, b, vc, vd, MPI_INT,
                     root, c->ic);
            for (int r = 0; r < msize; r++)
                for (int i = 0; i < K; i++)
                    CHECK(b[r * K + i] == (mbase + r) * 10 + i, "%s gather%s [%d] = %d", m, v ? "v" : "",
                          r * K + i, b[r * K + i]);
        } else {
            if (v == 0)
                COLL(MPI_Gather, MPI_Igather, MPI_Gather_init, a, K, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, root,
                     c->ic);
            else
                COLL(MPI_Gatherv, MPI_Igatherv, MPI_Gatherv_init, a, K, MPI_INT, NULL, NULL, NULL,
                     MPI_DATATYPE_NULL, root, c->ic);
        }
    }

    /* Scatter and Scatterv: block r of the root holds 1000 + r * 10 + i. */
    for (int v = 0; v < 2; v++) {
        int src[8 * K];
        for (int r = 0; r < 8; r++)
            for (int i = 0; i < K; i++) src[r * K + i] = 1000 + r * 10 + i;
        for (int i = 0; i < K; i++) b[i] = SENT;
        if (root == MPI_PROC_NULL) {
            if (v == 0)
                COLL(MPI_Scatter, MPI_Iscatter, MPI_Scatter_init, NULL, 0, MPI_DATATYPE_NULL, NULL, 0,
                     MPI_DATATYPE_NULL, root, c->ic);
            else
                COLL(MPI_Scatterv, MPI_Iscatterv, MPI_Scatterv_init, NULL, NULL, NULL, MPI_DATATYPE_NULL, NULL, 0,
                     MPI_DATATYPE_NULL, root, c->ic);
        } else if (root == MPI_ROOT) {
            if (v == 0)
                COLL(MPI_Scatter, MPI_Iscatter, MPI_Scatter_init, src, K, MPI_INT, NULL, 0, MPI_DATATYPE_NULL,
                     root, c->ic);
            else
                COLL(MPI_Scatterv, MPI_Iscatterv, MPI_Scatterv_init, src, vc, vd, MPI_INT, NULL, 0,
                     MPI_DATATYPE_NULL, root, c->ic);
        } else {
            if (v == 0)
                COLL(MPI_Scatter, MPI_Iscatter, MPI_Scatter_init, NULL, 0, MPI_DATATYPE_NULL, b, K, MPI_INT, root,
                     c->ic);
            else
                COLL(MPI_Scatterv, MPI_Iscatterv, MPI_Scatterv_init, NULL, NULL, NULL, MPI_DATATYPE_NULL, b, K,
                     MPI_INT, root, c->ic);
            for (int i = 0; i < K; i++)
                CHECK(b[i] == 1000 + c->lrank * 10 + i, "%s scatter%s [%d] = %d", m, v ? "v" : "", i, b[i]);
        }
    }
}

/* Reduce with count 0: the root's buffer untouched; with a group of several members and of one. */
static void empty_reduce(const Conf *c, int rc) {
    int root = root_of(c, rc);
    int a[2] = {rank, rank}, b[2] = {SENT, SENT};
    COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, a, b, 0, MPI_INT, MPI_SUM, root, c->ic);
    CHECK(b[0] == SENT && b[1] == SENT, "%s empty reduce wrote %d %d", modes[mode], b[0], b[1]);
    /* A non-empty one after it still matches its partners. */
    COLL(MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, a, b, 1, MPI_INT, MPI_SUM, root, c->ic);
    if (root == MPI_ROOT) {
        int want = 0, base = rc == 0 ? size - c->rsize : 0;
        for (int r = 0; r < c->rsize; r++) want += base + r;
        CHECK(b[0] == want && b[1] == SENT, "%s reduce after the empty one: %d %d, want %d", modes[mode], b[0],
              b[1], want);
    }
    /* And Allreduce with count 0. */
    COLL(MPI_Allreduce, MPI_Iallreduce, MPI_Allreduce_init, a, b, 0, MPI_INT, MPI_SUM, c->ic);
}

/* MPI_IN_PLACE at the members of Gatherv and Scatterv (only the members call: the refusal is
 * local; a refused non-blocking call leaves the numbering of the intercommunicator's collectives
 * as it was, so the groups still agree on the next one). */
static void in_place(const Conf *c) {
    int v[4] = {0}, vc[8] = {1, 1, 1, 1, 1, 1, 1, 1}, vd[8] = {0};
    if (c->color == 1) {
        REFUSED(MPI_ERR_BUFFER, MPI_Gatherv, MPI_Igatherv, MPI_Gatherv_init, MPI_IN_PLACE, 1, MPI_INT, v, vc, vd,
                MPI_INT, 0, c->ic);
        REFUSED(MPI_ERR_BUFFER, MPI_Scatterv, MPI_Iscatterv, MPI_Scatterv_init, v, vc, vd, MPI_INT, MPI_IN_PLACE, 1,
                MPI_INT, 0, c->ic);
        REFUSED(MPI_ERR_BUFFER, MPI_Gather, MPI_Igather, MPI_Gather_init, MPI_IN_PLACE, 1, MPI_INT, v, 1, MPI_INT,
                0, c->ic);
        REFUSED(MPI_ERR_BUFFER, MPI_Reduce, MPI_Ireduce, MPI_Reduce_init, MPI_IN_PLACE, v, 1, MPI_INT, MPI_SUM, 0,
                c->ic);
    } else if (c->lrank == 0) {
        REFUSED(MPI_ERR_BUFFER, MPI_Gatherv, MPI_Igatherv, MPI_Gatherv_init, v, 1, MPI_INT, MPI_IN_PLACE, vc, vd,
                MPI_INT, MPI_ROOT, c->ic);
    }
    /* The intercommunicator still works. */
    MPI_Request q;
    OK(MPI_Ibarrier(c->ic, &q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    int x = rank, y = -1;
    OK(MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_MAX, c->ic, &q));
    OK(MPI_Wait(&q, MPI_STATUS_IGNORE));
    int top = c->color == 0 ? size - 1 : c->rsize - 1;
    CHECK(y == top, "Iallreduce after the refusals: %d, want %d", y, top);
}

/* Every element takes the left operand (the lowest rank's): a user's operation. */
static void take_left(void *in, void *inout, int *n, MPI_Datatype *dt) {
    (void)dt;
    memcpy(inout, in, sizeof(int) * (size_t)*n);
}

/* Alltoallw_init with a strided type per remote member, and Reduce_init with a user's operation,
 * the type and operation freed before the starts and new ones made meanwhile (which may take
 * their slots): the requests keep theirs. */
static void freed_before_start(const Conf *c) {
    int n = c->rsize, send[8 * 2 * K], recv[8 * K], sc[8], sd[8], rc[8], rd[8];
    MPI_Datatype st[8], rt[8], strided, decoy;
    MPI_Op op, other;
    OK(MPI_Type_vector(K, 1, 2, MPI_INT, &strided));
    OK(MPI_Type_commit(&strided));
    for (int j = 0; j < n; j++) {
        sc[j] = 1;
        sd[j] = j * 2 * K * (int)sizeof(int);
        st[j] = strided;
        rc[j] = K;
        rd[j] = j * K * (int)sizeof(int);
        rt[j] = MPI_INT;
    }
    MPI_Request w, r;
    OK(MPI_Alltoallw_init(send, sc, sd, st, recv, rc, rd, rt, c->ic, MPI_INFO_NULL, &w));
    OK(MPI_Op_create(take_left, 0, &op));
    int a[K], b[K];
    int root = root_of(c, 0);
    OK(MPI_Reduce_init(a, b, K, MPI_INT, op, root, c->ic, MPI_INFO_NULL, &r));
    OK(MPI_Type_free(&strided));
    OK(MPI_Op_free(&op));
    OK(MPI_Type_contiguous(1, MPI_CHAR, &decoy));
    OK(MPI_Type_commit(&decoy));
    OK(MPI_Op_create(take_left, 1, &other));
    for (int s = 0; s < 2; s++) {
        /* To remote member j: j * 1000 + rank * 10 + i at the even places, -1 between. */
        for (int j = 0; j < n; j++)
            for (int i = 0; i < 2 * K; i++) send[j * 2 * K + i] = i % 2 ? -1 : s * 100000 + j * 1000 + rank * 10 + i / 2;
        for (int i = 0; i < 8 * K; i++) recv[i] = SENT;
        for (int i = 0; i < K; i++) a[i] = s * 100000 + rank * 10 + i, b[i] = SENT;
        OK(MPI_Start(&w));
        OK(MPI_Start(&r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        OK(MPI_Wait(&w, MPI_STATUS_IGNORE));
        /* From remote member j (world rank base + j): its block for this member. */
        int base = c->color == 0 ? c->lsize : 0;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < K; i++) {
                int want = s * 100000 + c->lrank * 1000 + (base + j) * 10 + i;
                CHECK(recv[j * K + i] == want, "alltoallw start %d [%d] = %d, want %d", s, j * K + i,
                      recv[j * K + i], want);
            }
        if (root == MPI_ROOT)
            for (int i = 0; i < K; i++) {
                int want = s * 100000 + c->lsize * 10 + i; /* the lowest member's */
                CHECK(b[i] == want, "reduce by a freed operation, start %d [%d] = %d, want %d", s, i, b[i], want);
            }
    }
    OK(MPI_Request_free(&w));
    OK(MPI_Request_free(&r));
    OK(MPI_Type_free(&decoy));
    OK(MPI_Op_free(&other));
}

static void run(int cut) {
    Conf c = make(cut);
    for (mode = BLOCKING; mode <= PERSISTENT; mode++) {
        for (int rc = 0; rc < 2; rc++) {
            roles(&c, rc);
            empty_reduce(&c, rc);
        }
        in_place(&c);
    }
    freed_before_start(&c);
    unmake(&c);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    if (size >= 2) {
        run(1);
        if (size >= 4) run(size / 2);
        if (size >= 3) run(size - 1);
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK inter_roles %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
