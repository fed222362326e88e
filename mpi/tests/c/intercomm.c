/* Intercommunicators: MPI_Intercomm_create from two halves of MPI_COMM_WORLD (uneven halves, one
 * group in reversed rank order; interleaved halves), MPI_Comm_test_inter, sizes, ranks, local
 * and remote groups rank by rank; point-to-point both ways with MPI_ANY_SOURCE/MPI_ANY_TAG
 * (statuses name remote ranks), MPI_PROC_NULL; MPI_Intercomm_merge with high false/true on either
 * side checked rank by rank; MPI_Comm_dup (attributes, compare), MPI_Comm_split and
 * MPI_Comm_create on an intercommunicator; MPI_Comm_idup of one (two in flight); every intercommunicator collective (Barrier, Bcast,
 * Reduce, Allreduce, Gather, Scatter, Allgather, Alltoall) value by value for every root, counts
 * 1 and 3000 (past the eager limit); the v-forms and Reduce_scatter(_block); argument errors (bad leader, bad root, intercommunicators
 * where intracommunicators are required). Needs 2 ranks or more (one prints OK and stops).
 * Prints "OK intercomm <rank>". */
#include "check.h"

static int rank, size;

/* One configuration: this process's group (colour), both groups' world ranks in local rank
 * order, and the intercommunicator. */
typedef struct {
    int color, lsize, rsize, lrank;
    int *lworld, *rworld;
    MPI_Comm local, ic;
} Conf;

/* The world ranks of colour `c` in local rank order: ascending for colour 0, descending for 1. */
static int members(int (*color_of)(int), int c, int *out) {
    int n = 0;
    for (int r = 0; r < size; r++)
        if (color_of(r) == c) out[n++] = r;
    if (c == 1)
        for (int i = 0; i < n / 2; i++) {
            int t = out[i];
            out[i] = out[n - 1 - i];
            out[n - 1 - i] = t;
        }
    return n;
}

static int cut;
static int low_high(int r) { return r < cut ? 0 : 1; }
static int parity(int r) { return r % 2; }

static void check_group(MPI_Group g, const int *world, int n, const char *what) {
    int gs;
    OK(MPI_Group_size(g, &gs));
    CHECK(gs == n, "%s size %d, expected %d", what, gs, n);
    MPI_Group wg;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    int *in = xmalloc(sizeof(int) * n), *out = xmalloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) in[i] = i;
    OK(MPI_Group_translate_ranks(g, n, in, wg, out));
    for (int i = 0; i < n; i++) CHECK(out[i] == world[i], "%s rank %d is world %d, expected %d", what, i, out[i], world[i]);
    free(in);
    free(out);
    OK(MPI_Group_free(&wg));
}

static Conf make(int (*color_of)(int)) {
    Conf c;
    c.color = color_of(rank);
    c.lworld = xmalloc(sizeof(int) * size);
    c.rworld = xmalloc(sizeof(int) * size);
    c.lsize = members(color_of, c.color, c.lworld);
    c.rsize = members(color_of, 1 - c.color, c.rworld);
    OK(MPI_Comm_split(MPI_COMM_WORLD, c.color, c.color == 0 ? rank : -rank, &c.local));
    OK(MPI_Comm_rank(c.local, &c.lrank));
    CHECK(c.lworld[c.lrank] == rank, "local rank %d", c.lrank);
    /* Leaders: local rank 0 of each group; the tag is ours. */
    OK(MPI_Intercomm_create(c.local, 0, MPI_COMM_WORLD, c.rworld[0], 77, &c.ic));
    OK(MPI_Comm_set_errhandler(c.ic, MPI_ERRORS_RETURN));
    return c;
}

static void unmake(Conf *c) {
    OK(MPI_Comm_free(&c->ic));
    OK(MPI_Comm_free(&c->local));
    CHECK(c->ic == MPI_COMM_NULL, "freed handle");
    free(c->lworld);
    free(c->rworld);
}

static void shape(const Conf *c, MPI_Comm ic) {
    int flag = -1, n, r;
    OK(MPI_Comm_test_inter(ic, &flag));
    CHECK(flag == 1, "test_inter %d", flag);
    OK(MPI_Comm_size(ic, &n));
    CHECK(n == c->lsize, "size %d, expected %d", n, c->lsize);
    OK(MPI_Comm_rank(ic, &r));
    CHECK(r == c->lrank, "rank %d, expected %d", r, c->lrank);
    OK(MPI_Comm_remote_size(ic, &n));
    CHECK(n == c->rsize, "remote size %d, expected %d", n, c->rsize);
    MPI_Group g;
    OK(MPI_Comm_group(ic, &g));
    check_group(g, c->lworld, c->lsize, "local group");
    OK(MPI_Group_free(&g));
    OK(MPI_Comm_remote_group(ic, &g));
    check_group(g, c->rworld, c->rsize, "remote group");
    OK(MPI_Group_free(&g));
}

/* Every member sends to every remote member; receives with wildcards. */
static void p2p(const Conf *c, MPI_Comm ic) {
    MPI_Request *rq = xmalloc(sizeof(MPI_Request) * c->rsize);
    int *out = xmalloc(sizeof(int) * c->rsize);
    for (int j = 0; j < c->rsize; j++) {
        out[j] = rank * 100 + j;
        OK(MPI_Isend(&out[j], 1, MPI_INT, j, c->lrank, ic, &rq[j]));
    }
    int *seen = calloc(c->rsize, sizeof(int));
    for (int k = 0; k < c->rsize; k++) {
        int v = -1;
        MPI_Status st;
        OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, ic, &st));
        int s = st.MPI_SOURCE;
        CHECK(s >= 0 && s < c->rsize && !seen[s], "source %d", s);
        seen[s] = 1;
        CHECK(st.MPI_TAG == s, "tag %d from %d", st.MPI_TAG, s);
        CHECK(v == c->rworld[s] * 100 + c->lrank, "value %d from remote %d", v, s);
    }
    OK(MPI_Waitall(c->rsize, rq, MPI_STATUSES_IGNORE));
    /* (The wildcard receives above must not see the messages below.) */
    OK(MPI_Barrier(ic));
    /* Specific sources, blocking: every member of group 0 sends to remote rank rsize - 1 (group
     * 1's last local rank), which receives from each in turn. */
    int v = rank;
    if (c->color == 0) OK(MPI_Send(&v, 1, MPI_INT, c->rsize - 1, 5, ic));
    if (c->color == 1 && c->lrank == c->lsize - 1) {
        for (int k = 0; k < c->rsize; k++) {
            MPI_Status st;
            OK(MPI_Recv(&v, 1, MPI_INT, k, 5, ic, &st));
            CHECK(v == c->rworld[k] && st.MPI_SOURCE == k && st.MPI_TAG == 5, "from %d: %d", k, v);
        }
    }
    /* MPI_PROC_NULL. */
    MPI_Status st;
    OK(MPI_Send(&v, 1, MPI_INT, MPI_PROC_NULL, 1, ic));
    OK(MPI_Recv(&v, 1, MPI_INT, MPI_PROC_NULL, 1, ic, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "PROC_NULL source %d", st.MPI_SOURCE);
    /* A rank past the remote group. */
    FAILS_WITH(MPI_Send(&v, 1, MPI_INT, c->rsize, 1, ic), MPI_ERR_RANK);
    free(seen);
    free(out);
    free(rq);
}

/* Merge: `lowfirst` says whether this group passes high = 0. */
static void merge(const Conf *c, int high_mine, int high_theirs) {
    MPI_Comm m;
    OK(MPI_Intercomm_merge(c->ic, high_mine, &m));
    int n, r, flag;
    OK(MPI_Comm_size(m, &n));
    CHECK(n == size, "merged size %d", n);
    OK(MPI_Comm_test_inter(m, &flag));
    CHECK(flag == 0, "merged is an intracommunicator");
    int mine_first;
    if (high_mine != high_theirs) {
        mine_first = !high_mine;
    } else {
        /* Arbitrary order, the same for all: learn it from rank 0 of the merged communicator. */
        int first_world = -1;
        OK(MPI_Comm_rank(m, &r));
        int w = rank;
        OK(MPI_Bcast(&w, 1, MPI_INT, 0, m));
        first_world = w;
        mine_first = first_world == c->lworld[0];
        CHECK(mine_first || first_world == c->rworld[0], "merged rank 0 is world %d", first_world);
    }
    int *expect = xmalloc(sizeof(int) * size);
    const int *a = mine_first ? c->lworld : c->rworld, *b = mine_first ? c->rworld : c->lworld;
    int na = mine_first ? c->lsize : c->rsize, nb = mine_first ? c->rsize : c->lsize;
    for (int i = 0; i < na; i++) expect[i] = a[i];
    for (int i = 0; i < nb; i++) expect[na + i] = b[i];
    MPI_Group g;
    OK(MPI_Comm_group(m, &g));
    check_group(g, expect, size, "merged group");
    OK(MPI_Group_free(&g));
    OK(MPI_Comm_rank(m, &r));
    CHECK(expect[r] == rank, "merged rank %d is not world %d", r, rank);
    /* It works: an allreduce of world ranks, a ring with ANY_SOURCE. */
    int s = 0, w = rank;
    OK(MPI_Allreduce(&w, &s, 1, MPI_INT, MPI_SUM, m));
    CHECK(s == size * (size - 1) / 2, "merged allreduce %d", s);
    int got = -1;
    MPI_Status st;
    OK(MPI_Sendrecv(&r, 1, MPI_INT, (r + 1) % n, 3, &got, 1, MPI_INT, MPI_ANY_SOURCE, 3, m, &st));
    CHECK(got == (r + n - 1) % n && st.MPI_SOURCE == got, "merged ring got %d", got);
    OK(MPI_Comm_free(&m));
    free(expect);
}

static int copies;
static int copy_fn(MPI_Comm old, int key, void *extra, void *in, void *out, int *flag) {
    (void)old, (void)key, (void)extra;
    copies++;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}

static void dup_and_friends(const Conf *c) {
    int key;
    static char base[4];
    OK(MPI_Comm_create_keyval(copy_fn, MPI_COMM_NULL_DELETE_FN, &key, NULL));
    OK(MPI_Comm_set_attr(c->ic, key, base));
    OK(MPI_Comm_set_name(c->ic, "inter"));
    MPI_Comm d;
    copies = 0;
    OK(MPI_Comm_dup(c->ic, &d));
    CHECK(copies == 1, "copy callback ran %d times", copies);
    void *v = NULL;
    int flag = 0, res = -1;
    OK(MPI_Comm_get_attr(d, key, &v, &flag));
    CHECK(flag && v == base + 1, "dup's attribute");
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Comm_get_name(c->ic, name, &len));
    CHECK(strcmp(name, "inter") == 0, "name %s", name);
    shape(c, d);
    p2p(c, d);
    OK(MPI_Comm_compare(c->ic, d, &res));
    CHECK(res == MPI_CONGRUENT, "compare with dup %d", res);
    OK(MPI_Comm_compare(c->ic, c->ic, &res));
    CHECK(res == MPI_IDENT, "compare with itself %d", res);
    OK(MPI_Comm_compare(c->ic, MPI_COMM_WORLD, &res));
    CHECK(res == MPI_UNEQUAL, "compare with world %d", res);
    OK(MPI_Comm_compare(c->ic, c->local, &res));
    CHECK(res == MPI_UNEQUAL, "compare with the local communicator %d", res);
    OK(MPI_Comm_free(&d));

    /* MPI_Comm_idup of the intercommunicator: two in flight around a blocking barrier. */
    MPI_Comm i1 = MPI_COMM_NULL, i2 = MPI_COMM_NULL;
    MPI_Request rq[2];
    copies = 0;
    OK(MPI_Comm_idup(c->ic, &i1, &rq[0]));
    OK(MPI_Comm_idup(c->ic, &i2, &rq[1]));
    CHECK(copies == 2, "idup copy callbacks at the calls: %d", copies);
    OK(MPI_Barrier(c->ic));
    OK(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
    CHECK(i1 != MPI_COMM_NULL && i2 != MPI_COMM_NULL && i1 != i2, "idup handles");
    OK(MPI_Comm_get_attr(i2, key, &v, &flag));
    CHECK(flag && v == base + 1, "idup's attribute");
    OK(MPI_Comm_set_errhandler(i1, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(i2, MPI_ERRORS_RETURN));
    shape(c, i1);
    p2p(c, i2);
    p2p(c, i1);
    OK(MPI_Comm_compare(c->ic, i1, &res));
    CHECK(res == MPI_CONGRUENT, "compare with idup %d", res);
    OK(MPI_Comm_free(&i1));
    OK(MPI_Comm_free(&i2));
    OK(MPI_Comm_free_keyval(&key));

    /* Split by local rank parity: the parts of a parity present in both groups pair up. */
    MPI_Comm s;
    OK(MPI_Comm_split(c->ic, c->lrank % 2, -c->lrank, &s));
    int p = c->lrank % 2;
    int nl = (c->lsize + 1 - p) / 2, nr = (c->rsize + 1 - p) / 2;
    if (nr == 0) {
        CHECK(s == MPI_COMM_NULL, "split without remote part");
    } else {
        CHECK(s != MPI_COMM_NULL, "split");
        int n, r, rs;
        OK(MPI_Comm_size(s, &n));
        OK(MPI_Comm_rank(s, &r));
        OK(MPI_Comm_remote_size(s, &rs));
        CHECK(n == nl && rs == nr && r == nl - 1 - c->lrank / 2, "split: size %d rank %d remote %d", n, r, rs);
        /* Remote rank k of the split is the remote group's member of parity p with the k-th
         * highest local rank (keys reverse the order); rank k of each side sends to rank k of
         * the other where both exist. */
        int top = ((c->rsize - 1 - p) / 2) * 2 + p;
        if (r < nr && r < nl) {
            int out = rank, in = -1;
            MPI_Status st;
            OK(MPI_Sendrecv(&out, 1, MPI_INT, r, 4, &in, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, s, &st));
            CHECK(st.MPI_SOURCE == r && in == c->rworld[top - 2 * r], "split p2p: %d from %d", in, st.MPI_SOURCE);
        }
        OK(MPI_Comm_free(&s));
    }

    /* Create: the local group less its last member (when it has more than one). */
    MPI_Group lg, sub;
    OK(MPI_Comm_group(c->ic, &lg));
    int drop = c->lsize - 1;
    if (c->lsize > 1)
        OK(MPI_Group_excl(lg, 1, &drop, &sub));
    else
        OK(MPI_Group_incl(lg, 1, &drop, &sub));
    MPI_Comm cr;
    OK(MPI_Comm_create(c->ic, sub, &cr));
    int rsub = c->rsize > 1 ? c->rsize - 1 : 1;
    if (c->lsize > 1 && c->lrank == c->lsize - 1) {
        CHECK(cr == MPI_COMM_NULL, "create: not a member");
    } else {
        CHECK(cr != MPI_COMM_NULL, "create");
        int rs;
        OK(MPI_Comm_remote_size(cr, &rs));
        CHECK(rs == rsub, "create: remote size %d, expected %d", rs, rsub);
        int x = 0;
        OK(MPI_Allreduce(&rank, &x, 1, MPI_INT, MPI_SUM, cr));
        int expect = 0;
        for (int i = 0; i < rsub; i++) expect += c->rworld[i];
        CHECK(x == expect, "create: allreduce %d, expected %d", x, expect);
        OK(MPI_Comm_free(&cr));
    }
    OK(MPI_Group_free(&sub));
    OK(MPI_Group_free(&lg));
}

/* Every intercommunicator collective, value by value. */
static void collectives(const Conf *c, int count) {
    MPI_Comm ic = c->ic;
    int L = c->lsize, R = c->rsize, lr = c->lrank;
    int big = count * (L > R ? L : R);
    int *sb = xmalloc(sizeof(int) * big), *rb = xmalloc(sizeof(int) * big);
    OK(MPI_Barrier(ic));
    for (int g = 0; g < 2; g++) {
        /* Group g holds the root; every root of it in turn. */
        int nroots = g == 0 ? (c->color == 0 ? L : R) : (c->color == 1 ? L : R);
        for (int root = 0; root < nroots; root++) {
            int in_root_group = c->color == g;
            int arg = in_root_group ? (lr == root ? MPI_ROOT : MPI_PROC_NULL) : root;
            int rootw = in_root_group ? c->lworld[root] : c->rworld[root];
            /* Bcast. */
            for (int i = 0; i < count; i++) sb[i] = (arg == MPI_ROOT) ? rootw * 7 + i : -1;
            OK(MPI_Bcast(sb, count, MPI_INT, arg, ic));
            if (!in_root_group || arg == MPI_ROOT)
                for (int i = 0; i < count; i++) CHECK(sb[i] == rootw * 7 + i, "bcast [%d] %d", i, sb[i]);
            /* Reduce: the root gets the sum over the other group. */
            for (int i = 0; i < count; i++) sb[i] = rank + i, rb[i] = -1;
            OK(MPI_Reduce(sb, rb, count, MPI_INT, MPI_SUM, arg, ic));
            if (arg == MPI_ROOT) {
                int s = 0;
                for (int k = 0; k < R; k++) s += c->rworld[k];
                for (int i = 0; i < count; i++) CHECK(rb[i] == s + R * i, "reduce [%d] %d", i, rb[i]);
            }
            /* Gather: the root gets the remote members' blocks in rank order. */
            for (int i = 0; i < count; i++) sb[i] = rank * 10000 + i;
            for (int i = 0; i < big; i++) rb[i] = -1;
            OK(MPI_Gather(sb, count, MPI_INT, rb, count, MPI_INT, arg, ic));
            if (arg == MPI_ROOT)
                for (int k = 0; k < R; k++)
                    for (int i = 0; i < count; i++)
                        CHECK(rb[k * count + i] == c->rworld[k] * 10000 + i, "gather [%d][%d] %d", k, i, rb[k * count + i]);
            /* Scatter: block k of the root to remote rank k. */
            if (arg == MPI_ROOT)
                for (int k = 0; k < R; k++)
                    for (int i = 0; i < count; i++) sb[k * count + i] = rootw * 100 + k * 7 + i;
            for (int i = 0; i < count; i++) rb[i] = -1;
            OK(MPI_Scatter(sb, count, MPI_INT, rb, count, MPI_INT, arg, ic));
            if (!in_root_group)
                for (int i = 0; i < count; i++) CHECK(rb[i] == rootw * 100 + lr * 7 + i, "scatter [%d] %d", i, rb[i]);
        }
    }
    /* Allreduce: each group gets the other's sum (MPI_MAX too). */
    for (int i = 0; i < count; i++) sb[i] = rank + i, rb[i] = -1;
    OK(MPI_Allreduce(sb, rb, count, MPI_INT, MPI_SUM, ic));
    int s = 0, mx = 0;
    for (int k = 0; k < R; k++) s += c->rworld[k], mx = c->rworld[k] > mx ? c->rworld[k] : mx;
    for (int i = 0; i < count; i++) CHECK(rb[i] == s + R * i, "allreduce [%d] %d", i, rb[i]);
    OK(MPI_Allreduce(sb, rb, count, MPI_INT, MPI_MAX, ic));
    for (int i = 0; i < count; i++) CHECK(rb[i] == mx + i, "allreduce max [%d] %d", i, rb[i]);
    /* Allgather. */
    for (int i = 0; i < count; i++) sb[i] = rank * 10000 + i;
    for (int i = 0; i < big; i++) rb[i] = -1;
    OK(MPI_Allgather(sb, count, MPI_INT, rb, count, MPI_INT, ic));
    for (int k = 0; k < R; k++)
        for (int i = 0; i < count; i++)
            CHECK(rb[k * count + i] == c->rworld[k] * 10000 + i, "allgather [%d][%d] %d", k, i, rb[k * count + i]);
    /* Alltoall: block k to remote rank k; block k received from remote rank k. */
    for (int k = 0; k < R; k++)
        for (int i = 0; i < count; i++) sb[k * count + i] = rank * 1000 + k * 10 + i % 10;
    for (int i = 0; i < big; i++) rb[i] = -1;
    OK(MPI_Alltoall(sb, count, MPI_INT, rb, count, MPI_INT, ic));
    for (int k = 0; k < R; k++)
        for (int i = 0; i < count; i++)
            CHECK(rb[k * count + i] == c->rworld[k] * 1000 + lr * 10 + i % 10, "alltoall [%d][%d] %d", k, i, rb[k * count + i]);
    /* A strided type on the receiving side of a broadcast from group 0's rank 0. */
    MPI_Datatype vec;
    OK(MPI_Type_vector(count, 1, 2, MPI_INT, &vec));
    OK(MPI_Type_commit(&vec));
    int *wide = xmalloc(sizeof(int) * 2 * count);
    for (int i = 0; i < 2 * count; i++) wide[i] = -5;
    if (c->color == 0) {
        for (int i = 0; i < count; i++) sb[i] = i * 3;
        OK(MPI_Bcast(sb, count, MPI_INT, lr == 0 ? MPI_ROOT : MPI_PROC_NULL, ic));
    } else {
        OK(MPI_Bcast(wide, 1, vec, 0, ic));
        for (int i = 0; i < count; i++)
            CHECK(wide[2 * i] == i * 3 && wide[2 * i + 1] == -5, "strided bcast [%d] %d %d", i, wide[2 * i], wide[2 * i + 1]);
    }
    OK(MPI_Type_free(&vec));
    free(wide);
    OK(MPI_Barrier(ic));
    free(sb);
    free(rb);
}

/* The v-forms and reduce-scatter, value by value, gaps untouched. */
static void vcollectives(const Conf *c) {
    MPI_Comm ic = c->ic;
    int L = c->lsize, R = c->rsize, lr = c->lrank, M = L > R ? L : R;
    int cap = 4 * M * M + 64;
    int *sb = xmalloc(sizeof(int) * cap), *rb = xmalloc(sizeof(int) * cap);
    int *cnt = xmalloc(sizeof(int) * M), *dsp = xmalloc(sizeof(int) * M);
    int *cnt2 = xmalloc(sizeof(int) * M), *dsp2 = xmalloc(sizeof(int) * M);
    /* Remote rank k's blocks: k + 1 ints at a gap of 2 after the previous. */
    int at = 0;
    for (int k = 0; k < R; k++) cnt[k] = k + 1, dsp[k] = at + 2, at += k + 3;
    for (int g = 0; g < 2; g++) {
        int nroots = c->color == g ? L : R;
        for (int root = 0; root < nroots; root++) {
            int in_root_group = c->color == g;
            int arg = in_root_group ? (lr == root ? MPI_ROOT : MPI_PROC_NULL) : root;
            int rootw = in_root_group ? c->lworld[root] : c->rworld[root];
            /* Gatherv. */
            for (int i = 0; i <= lr; i++) sb[i] = rank * 100 + i;
            for (int i = 0; i < cap; i++) rb[i] = -1;
            OK(MPI_Gatherv(sb, lr + 1, MPI_INT, rb, cnt, dsp, MPI_INT, arg, ic));
            if (arg == MPI_ROOT)
                for (int k = 0; k < R; k++) {
                    CHECK(rb[dsp[k] - 1] == -1, "gatherv gap before %d", k);
                    for (int i = 0; i <= k; i++) CHECK(rb[dsp[k] + i] == c->rworld[k] * 100 + i, "gatherv [%d][%d] %d", k, i, rb[dsp[k] + i]);
                }
            /* Scatterv. */
            if (arg == MPI_ROOT)
                for (int k = 0; k < R; k++)
                    for (int i = 0; i <= k; i++) sb[dsp[k] + i] = rootw * 1000 + k * 10 + i;
            for (int i = 0; i < cap; i++) rb[i] = -1;
            OK(MPI_Scatterv(sb, cnt, dsp, MPI_INT, rb, lr + 1, MPI_INT, arg, ic));
            if (!in_root_group) {
                for (int i = 0; i <= lr; i++) CHECK(rb[i] == rootw * 1000 + lr * 10 + i, "scatterv [%d] %d", i, rb[i]);
                CHECK(rb[lr + 1] == -1, "scatterv past the block");
            }
        }
    }
    /* Allgatherv. */
    for (int i = 0; i <= lr; i++) sb[i] = rank * 100 + i;
    for (int i = 0; i < cap; i++) rb[i] = -1;
    OK(MPI_Allgatherv(sb, lr + 1, MPI_INT, rb, cnt, dsp, MPI_INT, ic));
    for (int k = 0; k < R; k++) {
        CHECK(rb[dsp[k] - 1] == -1, "allgatherv gap before %d", k);
        for (int i = 0; i <= k; i++) CHECK(rb[dsp[k] + i] == c->rworld[k] * 100 + i, "allgatherv [%d][%d] %d", k, i, rb[dsp[k] + i]);
    }
    /* Alltoallv and Alltoallw: (lr + k) % 3 ints to remote rank k (zero too). */
    int sat = 0, rat = 0;
    for (int k = 0; k < R; k++) {
        cnt[k] = (lr + k) % 3, dsp[k] = sat, sat += cnt[k] + 1;
        cnt2[k] = (k + lr) % 3, dsp2[k] = rat + 1, rat += cnt2[k] + 1;
        for (int i = 0; i < cnt[k]; i++) sb[dsp[k] + i] = rank * 100 + k * 10 + i;
    }
    for (int w = 0; w < 2; w++) {
        for (int i = 0; i < cap; i++) rb[i] = -1;
        if (w == 0) {
            OK(MPI_Alltoallv(sb, cnt, dsp, MPI_INT, rb, cnt2, dsp2, MPI_INT, ic));
        } else {
            int *bs = xmalloc(sizeof(int) * M), *br = xmalloc(sizeof(int) * M);
            MPI_Datatype *ts = xmalloc(sizeof(MPI_Datatype) * M);
            for (int k = 0; k < R; k++) bs[k] = dsp[k] * (int)sizeof(int), br[k] = dsp2[k] * (int)sizeof(int), ts[k] = MPI_INT;
            OK(MPI_Alltoallw(sb, cnt, bs, ts, rb, cnt2, br, ts, ic));
            free(bs), free(br), free(ts);
        }
        for (int k = 0; k < R; k++) {
            CHECK(rb[dsp2[k] - 1] == -1, "alltoallv gap before %d", k);
            for (int i = 0; i < cnt2[k]; i++)
                CHECK(rb[dsp2[k] + i] == c->rworld[k] * 100 + lr * 10 + i, "alltoall%c [%d][%d] %d", w ? 'w' : 'v', k, i, rb[dsp2[k] + i]);
        }
    }
    /* Reduce_scatter_block: vectors of L × R ints in both groups, R to each member. */
    int s = 0;
    for (int k = 0; k < R; k++) s += c->rworld[k];
    for (int i = 0; i < L * R; i++) sb[i] = rank + i;
    for (int i = 0; i < cap; i++) rb[i] = -1;
    OK(MPI_Reduce_scatter_block(sb, rb, R, MPI_INT, MPI_SUM, ic));
    for (int i = 0; i < R; i++) CHECK(rb[i] == s + R * (lr * R + i), "reduce_scatter_block [%d] %d", i, rb[i]);
    CHECK(rb[R] == -1, "reduce_scatter_block past the block");
    /* Reduce_scatter: rank 0 takes all but L - 1 of them, the others one each. */
    for (int i = 0; i < L; i++) cnt[i] = i == 0 ? L * R - (L - 1) : 1;
    int start = lr == 0 ? 0 : L * R - (L - 1) + (lr - 1);
    for (int i = 0; i < cap; i++) rb[i] = -1;
    OK(MPI_Reduce_scatter(sb, rb, cnt, MPI_INT, MPI_SUM, ic));
    for (int i = 0; i < cnt[lr]; i++) CHECK(rb[i] == s + R * (start + i), "reduce_scatter [%d] %d", i, rb[i]);
    CHECK(rb[cnt[lr]] == -1, "reduce_scatter past the block");
    free(sb), free(rb), free(cnt), free(dsp), free(cnt2), free(dsp2);
}

static void errors(Conf *c) {
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(c->local, MPI_ERRORS_RETURN));
    MPI_Comm bad = MPI_COMM_NULL;
    int x = 0, y = 0, flag = -1;
    /* A leader outside the local communicator: every member fails alike. */
    FAILS_WITH(MPI_Intercomm_create(c->local, c->lsize, MPI_COMM_WORLD, c->rworld[0], 78, &bad), MPI_ERR_RANK);
    FAILS_WITH(MPI_Intercomm_create(c->local, -1, MPI_COMM_WORLD, c->rworld[0], 78, &bad), MPI_ERR_RANK);
    /* Intercommunicators where intracommunicators are required. */
    FAILS_WITH(MPI_Intercomm_create(c->ic, 0, MPI_COMM_WORLD, c->rworld[0], 78, &bad), MPI_ERR_COMM);
    MPI_Group g;
    OK(MPI_Comm_group(c->ic, &g));
    FAILS_WITH(MPI_Comm_create_group(c->ic, g, 1, &bad), MPI_ERR_COMM);
    OK(MPI_Group_free(&g));
    int dims[1] = {c->lsize}, periods[1] = {0};
    FAILS_WITH(MPI_Cart_create(c->ic, 1, dims, periods, 0, &bad), MPI_ERR_COMM);
    OK(MPI_Topo_test(c->ic, &flag));
    CHECK(flag == MPI_UNDEFINED, "an intercommunicator has no topology");
    FAILS_WITH(MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, c->ic), MPI_ERR_COMM);
    FAILS_WITH(MPI_Exscan(&x, &y, 1, MPI_INT, MPI_SUM, c->ic), MPI_ERR_COMM);
    FAILS_WITH(MPI_Allreduce(MPI_IN_PLACE, &y, 1, MPI_INT, MPI_SUM, c->ic), MPI_ERR_BUFFER);
    MPI_Request rq = MPI_REQUEST_NULL;
    /* Scans are defined on intracommunicators only (the other non-blocking collectives: inter_nbc.c). */
    FAILS_WITH(MPI_Iscan(&x, &y, 1, MPI_INT, MPI_SUM, c->ic, &rq), MPI_ERR_COMM);
    /* Intracommunicators where intercommunicators are required. */
    FAILS_WITH(MPI_Comm_remote_size(MPI_COMM_WORLD, &x), MPI_ERR_COMM);
    FAILS_WITH(MPI_Comm_remote_group(MPI_COMM_WORLD, &g), MPI_ERR_COMM);
    FAILS_WITH(MPI_Intercomm_merge(MPI_COMM_WORLD, 0, &bad), MPI_ERR_COMM);
    OK(MPI_Comm_test_inter(MPI_COMM_WORLD, &flag));
    CHECK(flag == 0, "WORLD is not an intercommunicator");
    /* A root past the remote group. */
    FAILS_WITH(MPI_Bcast(&x, 1, MPI_INT, c->rsize, c->ic), MPI_ERR_ROOT);
    FAILS_WITH(MPI_Reduce(&x, &y, 1, MPI_INT, MPI_SUM, -7, c->ic), MPI_ERR_ROOT);
    CHECK(bad == MPI_COMM_NULL, "no communicator made");
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void run(int (*color_of)(int), int counts_big) {
    Conf c = make(color_of);
    shape(&c, c.ic);
    p2p(&c, c.ic);
    merge(&c, c.color, 1 - c.color);
    merge(&c, 1 - c.color, c.color);
    merge(&c, 0, 0);
    merge(&c, 1, 1);
    dup_and_friends(&c);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    collectives(&c, 1);
    if (counts_big) collectives(&c, 3000);
    vcollectives(&c);
    errors(&c);
    unmake(&c);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    if (size >= 2) {
        cut = size / 3 > 0 ? size / 3 : 1;
        run(low_high, 1);
        run(parity, 0);
        /* Many intercommunicators, created (a dup and a merge too) and freed: past the 4096
         * contexts a process has when INTERCOMM_ROUNDS is large, so nothing may leak. */
        int rounds = getenv("INTERCOMM_ROUNDS") ? atoi(getenv("INTERCOMM_ROUNDS")) : 50;
        for (int i = 0; i < rounds; i++) {
            Conf c = make(parity);
            MPI_Comm d, m;
            OK(MPI_Comm_dup(c.ic, &d));
            OK(MPI_Intercomm_merge(d, c.color, &m));
            OK(MPI_Comm_free(&m));
            OK(MPI_Comm_free(&d));
            unmake(&c);
        }
    }
    printf("OK intercomm %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
