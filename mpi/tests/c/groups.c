/* Groups and communicator creation: MPI_Comm_group and every MPI_Group_* call against results
 * computed here; MPI_Comm_create (evens, and disjoint halves at once), MPI_Comm_create_group
 * (called by the odd ranks only, with two tags), MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) (the
 * ranks of a node: GROUPS_NODES tells how many nodes the launcher made), MPI_Comm_compare,
 * names; freed communicators really freed: a communicator freed with a receive pending on it
 * still completes it, handles are reused, and 4200 dup/free rounds (more than the 4096 contexts a
 * process has) succeed. Prints "OK groups <rank>". */
#include "check.h"

static int rank, size;

static void ring_on(MPI_Comm comm) {
    int r, n;
    OK(MPI_Comm_rank(comm, &r));
    OK(MPI_Comm_size(comm, &n));
    int next = (r + 1) % n, prev = (r + n - 1) % n, got = -1;
    MPI_Status st;
    OK(MPI_Sendrecv(&r, 1, MPI_INT, next, 9, &got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &st));
    CHECK(got == prev && st.MPI_SOURCE == prev, "ring: got %d from %d (expected %d)", got, st.MPI_SOURCE, prev);
    int sum = 0;
    OK(MPI_Allreduce(&r, &sum, 1, MPI_INT, MPI_SUM, comm));
    CHECK(sum == n * (n - 1) / 2, "allreduce on the new communicator: %d", sum);
}

/* The world ranks of `g`'s members, through translate_ranks. */
static void world_ranks(MPI_Group g, MPI_Group world, int *out, int *n) {
    OK(MPI_Group_size(g, n));
    int *in = xmalloc(sizeof(int) * (*n + 1));
    for (int i = 0; i < *n; i++) in[i] = i;
    OK(MPI_Group_translate_ranks(g, *n, in, world, out));
    free(in);
}

static void expect_members(MPI_Group g, MPI_Group world, const int *want, int n, const char *what) {
    int got[64], k;
    world_ranks(g, world, got, &k);
    CHECK(k == n, "%s: %d members, expected %d", what, k, n);
    for (int i = 0; i < n; i++) CHECK(got[i] == want[i], "%s: member %d is %d, expected %d", what, i, got[i], want[i]);
    int r, wr = -1;
    OK(MPI_Group_rank(g, &r));
    for (int i = 0; i < n; i++)
        if (want[i] == rank) wr = i;
    CHECK(r == (wr < 0 ? MPI_UNDEFINED : wr), "%s: my rank %d, expected %d", what, r, wr);
}

static void groups(void) {
    MPI_Group world, evens, odds, g;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int all[64], n = 0;
    for (int r = 0; r < size; r++) all[n++] = r;
    expect_members(world, world, all, size, "world");

    int ev[64], ne = 0, od[64], no = 0;
    for (int r = 0; r < size; r++) {
        if (r % 2 == 0)
            ev[ne++] = r;
        else
            od[no++] = r;
    }
    OK(MPI_Group_incl(world, ne, ev, &evens));
    expect_members(evens, world, ev, ne, "incl evens");
    OK(MPI_Group_excl(world, ne, ev, &odds));
    expect_members(odds, world, od, no, "excl evens");

    /* Range of evens, reversed: (last even, 0, -2). */
    int ranges[1][3] = {{(size - 1) / 2 * 2, 0, -2}};
    OK(MPI_Group_range_incl(world, 1, ranges, &g));
    int rev[64];
    for (int i = 0; i < ne; i++) rev[i] = ev[ne - 1 - i];
    expect_members(g, world, rev, ne, "range_incl reversed evens");
    int cmp;
    OK(MPI_Group_compare(g, evens, &cmp));
    CHECK(cmp == (ne > 1 ? MPI_SIMILAR : MPI_IDENT), "compare reversed evens: %d", cmp);
    OK(MPI_Group_free(&g));
    CHECK(g == MPI_GROUP_NULL, "freed group is not MPI_GROUP_NULL");
    int ranges2[1][3] = {{0, size - 1, 2}};
    OK(MPI_Group_range_excl(world, 1, ranges2, &g));
    expect_members(g, world, od, no, "range_excl evens");
    OK(MPI_Group_compare(g, odds, &cmp));
    CHECK(cmp == MPI_IDENT, "compare odds: %d", cmp);
    OK(MPI_Group_free(&g));

    /* Set operations: odds ∪ evens is odds then evens; ∩ is empty; world \ odds = evens. */
    OK(MPI_Group_union(odds, evens, &g));
    int un[64], nu = 0;
    for (int i = 0; i < no; i++) un[nu++] = od[i];
    for (int i = 0; i < ne; i++) un[nu++] = ev[i];
    expect_members(g, world, un, nu, "union");
    OK(MPI_Group_compare(g, world, &cmp));
    CHECK(cmp == (size > 1 ? MPI_SIMILAR : MPI_IDENT), "union vs world: %d", cmp);
    OK(MPI_Group_free(&g));
    OK(MPI_Group_intersection(odds, evens, &g));
    CHECK(g == MPI_GROUP_EMPTY, "odds ∩ evens is not MPI_GROUP_EMPTY");
    int gs = -1;
    OK(MPI_Group_size(MPI_GROUP_EMPTY, &gs));
    CHECK(gs == 0, "empty group size %d", gs);
    OK(MPI_Group_difference(world, odds, &g));
    expect_members(g, world, ev, ne, "world minus odds");
    OK(MPI_Group_compare(g, evens, &cmp));
    CHECK(cmp == MPI_IDENT, "difference vs evens: %d", cmp);
    OK(MPI_Group_free(&g));
    OK(MPI_Group_compare(odds, evens, &cmp));
    CHECK(cmp == (size > 1 ? MPI_UNEQUAL : MPI_UNEQUAL), "odds vs evens: %d", cmp);

    /* translate_ranks: PROC_NULL stays, a non-member is UNDEFINED. */
    int in[2] = {MPI_PROC_NULL, 0}, out[2];
    OK(MPI_Group_translate_ranks(world, 2, in, odds, out));
    CHECK(out[0] == MPI_PROC_NULL && out[1] == MPI_UNDEFINED, "translate: %d %d", out[0], out[1]);

    /* Errors. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int dup2[2] = {0, 0};
    FAILS_WITH(MPI_Group_incl(world, 2, dup2, &g), MPI_ERR_RANK);
    int bad[1] = {size};
    FAILS_WITH(MPI_Group_incl(world, 1, bad, &g), MPI_ERR_RANK);
    FAILS_WITH(MPI_Group_size(MPI_GROUP_NULL, &gs), MPI_ERR_GROUP);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

    /* MPI_Comm_create over the evens: they get a communicator ordered as the group, the odds
     * MPI_COMM_NULL. */
    MPI_Comm c;
    OK(MPI_Comm_create(MPI_COMM_WORLD, evens, &c));
    if (rank % 2 == 0) {
        CHECK(c != MPI_COMM_NULL, "an even rank got MPI_COMM_NULL");
        int cr, cn;
        OK(MPI_Comm_rank(c, &cr));
        OK(MPI_Comm_size(c, &cn));
        CHECK(cr == rank / 2 && cn == ne, "create: rank %d of %d", cr, cn);
        ring_on(c);
        MPI_Group cg;
        OK(MPI_Comm_group(c, &cg));
        OK(MPI_Group_compare(cg, evens, &cmp));
        CHECK(cmp == MPI_IDENT, "the new communicator's group: %d", cmp);
        OK(MPI_Group_free(&cg));
        OK(MPI_Comm_free(&c));
    } else {
        CHECK(c == MPI_COMM_NULL, "an odd rank got a communicator");
    }
    /* Disjoint groups at once: each rank names its own half (reversed order). */
    int half[64], nh = 0;
    for (int r = size - 1; r >= 0; r--)
        if ((r < size / 2) == (rank < size / 2)) half[nh++] = r;
    OK(MPI_Group_incl(world, nh, half, &g));
    /* A group of world ranks, expressed in world's rank numbers: incl took world ranks. */
    OK(MPI_Comm_create(MPI_COMM_WORLD, g, &c));
    int cr, cn;
    OK(MPI_Comm_rank(c, &cr));
    OK(MPI_Comm_size(c, &cn));
    int want_r = -1;
    for (int i = 0; i < nh; i++)
        if (half[i] == rank) want_r = i;
    CHECK(cn == nh && cr == want_r, "disjoint create: rank %d of %d, expected %d of %d", cr, cn, want_r, nh);
    ring_on(c);
    OK(MPI_Comm_free(&c));
    OK(MPI_Group_free(&g));

    /* MPI_Comm_create_group: only the odd ranks call it, twice with different tags, while the
     * even ranks run a collective of their own on MPI_COMM_WORLD's subsets meanwhile. */
    if (rank % 2 == 1) {
        MPI_Comm a, b;
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, odds, 7, &a));
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, odds, 8, &b));
        int ar, an;
        OK(MPI_Comm_rank(a, &ar));
        OK(MPI_Comm_size(a, &an));
        CHECK(ar == rank / 2 && an == no, "create_group: rank %d of %d", ar, an);
        ring_on(a);
        ring_on(b);
        OK(MPI_Comm_compare(a, b, &cmp));
        CHECK(cmp == MPI_CONGRUENT, "two create_group communicators: %d", cmp);
        OK(MPI_Comm_free(&a));
        OK(MPI_Comm_free(&b));
    } else {
        MPI_Comm e;
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, evens, 3, &e));
        ring_on(e);
        OK(MPI_Comm_free(&e));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    /* A caller outside the group gets MPI_COMM_NULL without communicating. */
    if (size > 1) {
        MPI_Comm none;
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, rank % 2 ? evens : odds, 5, &none));
        CHECK(none == MPI_COMM_NULL, "outside the group: not MPI_COMM_NULL");
    }
    OK(MPI_Group_free(&evens));
    OK(MPI_Group_free(&odds));
    OK(MPI_Group_free(&world));
}

static void split_type(void) {
    const char *env = getenv("GROUPS_NODES");
    int nodes = env ? atoi(env) : 1;
    MPI_Comm node;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    int nr, nn;
    OK(MPI_Comm_rank(node, &nr));
    OK(MPI_Comm_size(node, &nn));
    ring_on(node);
    /* Every member names the same leader (its world rank 0 of the node communicator); members are
     * consecutive world ranks; there are `nodes` leaders. */
    int leader = nr == 0 ? rank : -1;
    OK(MPI_Bcast(&leader, 1, MPI_INT, 0, node));
    CHECK(leader == rank - nr, "node communicator: leader %d, my rank %d is rank %d", leader, rank, nr);
    int is_leader = nr == 0, leaders = 0;
    OK(MPI_Allreduce(&is_leader, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(leaders == nodes, "%d nodes, expected %d", leaders, nodes);
    int total = 0, one = nr == 0 ? nn : 0;
    OK(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(total == size, "node sizes add up to %d", total);
    OK(MPI_Comm_free(&node));
    MPI_Comm none;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &none));
    CHECK(none == MPI_COMM_NULL, "MPI_UNDEFINED split type");
}

static void compare_and_names(void) {
    int cmp;
    OK(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &cmp));
    CHECK(cmp == MPI_IDENT, "world vs world: %d", cmp);
    MPI_Comm d, rev;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    OK(MPI_Comm_compare(MPI_COMM_WORLD, d, &cmp));
    CHECK(cmp == MPI_CONGRUENT, "world vs dup: %d", cmp);
    OK(MPI_Comm_split(MPI_COMM_WORLD, 0, -rank, &rev));
    OK(MPI_Comm_compare(MPI_COMM_WORLD, rev, &cmp));
    CHECK(cmp == (size > 1 ? MPI_SIMILAR : MPI_CONGRUENT), "world vs reversed: %d", cmp);
    OK(MPI_Comm_compare(MPI_COMM_SELF, MPI_COMM_WORLD, &cmp));
    CHECK(cmp == (size > 1 ? MPI_UNEQUAL : MPI_CONGRUENT), "self vs world: %d", cmp);

    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14, "world's name: %s", name);
    OK(MPI_Comm_get_name(MPI_COMM_SELF, name, &len));
    CHECK(strcmp(name, "MPI_COMM_SELF") == 0, "self's name: %s", name);
    OK(MPI_Comm_get_name(d, name, &len));
    CHECK(len == 0 && name[0] == 0, "a new communicator has no name: %s", name);
    OK(MPI_Comm_set_name(d, "my dup"));
    OK(MPI_Comm_get_name(d, name, &len));
    CHECK(strcmp(name, "my dup") == 0 && len == 6, "dup's name: %s", name);
    char longname[300];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    OK(MPI_Comm_set_name(d, longname));
    OK(MPI_Comm_get_name(d, name, &len));
    CHECK(len == MPI_MAX_OBJECT_NAME - 1 && strlen(name) == (size_t)len, "a long name is cut: %d", len);
    OK(MPI_Comm_free(&d));
    OK(MPI_Comm_free(&rev));
}

static void freed_really_freed(void) {
    /* A communicator freed while a receive on it is pending: the receive completes. */
    MPI_Comm d;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    int peer = rank ^ 1, got = -1;
    MPI_Request r = MPI_REQUEST_NULL;
    if (peer < size) {
        OK(MPI_Irecv(&got, 1, MPI_INT, peer, 4, d, &r));
        OK(MPI_Send(&rank, 1, MPI_INT, peer, 4, d));
    }
    OK(MPI_Comm_free(&d));
    CHECK(d == MPI_COMM_NULL, "a freed communicator is not MPI_COMM_NULL");
    MPI_Status st;
    OK(MPI_Wait(&r, &st));
    if (peer < size) CHECK(got == peer && st.MPI_SOURCE == peer, "receive on a freed communicator: %d", got);
    /* The slot of a freed communicator is reused: the next one gets the same handle. */
    MPI_Comm a, b;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    MPI_Comm old = a;
    OK(MPI_Comm_free(&a));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &b));
    CHECK(b == old, "handle %#x not reused (got %#x)", old, b);
    ring_on(b);
    OK(MPI_Comm_free(&b));
    /* More creations than a process has contexts: each freed one's context comes back. */
    const char *env = getenv("GROUPS_ROUNDS");
    int rounds = env ? atoi(env) : 4200;
    for (int i = 0; i < rounds; i++) {
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
        if (i % 1000 == 0) ring_on(a);
        OK(MPI_Comm_free(&a));
    }
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    CHECK(size <= 64, "at most 64 ranks");
    groups();
    split_type();
    compare_and_names();
    freed_really_freed();
    OK(MPI_Finalize());
    printf("OK groups %d\n", rank);
    return 0;
}
