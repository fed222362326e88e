/* The Sessions model (MPI-4.1 §11.3), alone and beside the world model, in the order that
 * SESSION_MODE names:
 *   only           sessions only (MPI_Init not called yet): two sessions open at once, process
 *                  sets, their info and groups, communicators from mpi://WORLD, mpi://SELF and
 *                  nemesis://NODE doing collectives and point-to-point, an intercommunicator
 *                  from two halves of the job, communicator hints, error handlers, bad input;
 *                  then sessions again after all ended, MPI_Init and MPI_Finalize while one is
 *                  open, and that session used after MPI_Finalize and finalized last;
 *   world-first    MPI_Init, then a session; MPI_Finalize while the session's communicator
 *                  still works; then MPI_Session_finalize;
 *   session-first  a session, then MPI_Init; MPI_Session_finalize first, then MPI_Finalize.
 * Prints "OK session_models <rank>". */
#include "check.h"

#ifndef MPI_MAX_PSET_NAME_LEN /* MPICH's value; not in nemesis's mpi.h yet */
#define MPI_MAX_PSET_NAME_LEN 256
#endif

static int handler_calls = 0, handler_code = 0;
static MPI_Session handler_session = MPI_SESSION_NULL;

static void session_handler(MPI_Session *s, int *code, ...) {
    handler_calls++;
    handler_code = *code;
    handler_session = *s;
}

/* The value of KEY in INFO, or "" (and FLAG 0). */
static int info_value(MPI_Info info, const char *key, char *value, int cap) {
    int flag = 0;
    value[0] = 0;
    OK(MPI_Info_get(info, key, cap - 1, value, &flag));
    return flag;
}

/* A communicator from process set PSET of session S, checked against the set's group and used:
 * an Allreduce of the ranks, a Bcast from the last rank, a ring. */
static MPI_Comm comm_from(MPI_Session s, const char *pset, const char *tag) {
    MPI_Group g;
    MPI_Comm c;
    int gsize, grank, size, rank;
    OK(MPI_Group_from_session_pset(s, pset, &g));
    OK(MPI_Group_size(g, &gsize));
    OK(MPI_Group_rank(g, &grank));
    CHECK(grank >= 0 && grank < gsize, "%s: group rank %d of %d", pset, grank, gsize);
    OK(MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c));
    CHECK(c != MPI_COMM_NULL, "%s: no communicator", pset);
    OK(MPI_Group_free(&g));
    OK(MPI_Comm_size(c, &size));
    OK(MPI_Comm_rank(c, &rank));
    CHECK(size == gsize && rank == grank, "%s: %d of %d, group %d of %d", pset, rank, size, grank, gsize);
    int sum = -1, root = size - 1, v = rank == root ? 4242 : -1;
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == size * (size - 1) / 2, "%s: allreduce %d", pset, sum);
    OK(MPI_Bcast(&v, 1, MPI_INT, root, c));
    CHECK(v == 4242, "%s: bcast %d", pset, v);
    int right = (rank + 1) % size, left = (rank + size - 1) % size, got = -1;
    OK(MPI_Sendrecv(&rank, 1, MPI_INT, right, 7, &got, 1, MPI_INT, left, 7, c, MPI_STATUS_IGNORE));
    CHECK(got == left, "%s: ring got %d from %d", pset, got, left);
    OK(MPI_Barrier(c));
    return c;
}

/* Process sets, their info and the session's info. Returns the job's size. */
static int psets(MPI_Session s) {
    int n = -1, world = 0, self = 0, size = -1;
    OK(MPI_Session_get_num_psets(s, MPI_INFO_NULL, &n));
    CHECK(n >= 2, "%d process sets", n);
    for (int i = 0; i < n; i++) {
        char name[MPI_MAX_PSET_NAME_LEN];
        int len = 0;
        OK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, NULL));
        CHECK(len > 1 && len <= MPI_MAX_PSET_NAME_LEN, "pset %d: length %d", i, len);
        OK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, i, &len, name));
        CHECK((int)strlen(name) == len - 1, "pset %d: %s for length %d", i, name, len);
        world += strcmp(name, "mpi://WORLD") == 0;
        self += strcmp(name, "mpi://SELF") == 0;
        MPI_Info info;
        char v[64];
        OK(MPI_Session_get_pset_info(s, name, &info));
        CHECK(info_value(info, "mpi_size", v, sizeof v), "%s: no mpi_size", name);
        if (strcmp(name, "mpi://SELF") == 0) CHECK(atoi(v) == 1, "mpi://SELF: size %s", v);
        if (strcmp(name, "mpi://WORLD") == 0) size = atoi(v);
        OK(MPI_Info_free(&info));
    }
    CHECK(world == 1 && self == 1, "mpi://WORLD %d times, mpi://SELF %d times", world, self);
    /* A short buffer gets a cut name, NUL-terminated. */
    char cut[4] = "xxx";
    int len = 4;
    OK(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 0, &len, cut));
    CHECK(strlen(cut) == 3, "cut name %s", cut);
    MPI_Info info;
    char v[64];
    OK(MPI_Session_get_info(s, &info));
    CHECK(info_value(info, "thread_level", v, sizeof v), "no thread_level");
    CHECK(strncmp(v, "MPI_THREAD_", 11) == 0, "thread_level %s", v);
    OK(MPI_Info_free(&info));
    return size;
}

/* Bad input reported through the session's handler (MPI_ERRORS_RETURN, then the program's). */
static void bad_input(MPI_Session s) {
    MPI_Group g;
    MPI_Info info;
    int len = 0;
    OK(MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Group_from_session_pset(s, "mpi://NOWHERE", &g), MPI_ERR_ARG);
    FAILS_WITH(MPI_Session_get_pset_info(s, "mpi://NOWHERE", &info), MPI_ERR_ARG);
    FAILS_WITH(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, 99, &len, NULL), MPI_ERR_ARG);
    FAILS_WITH(MPI_Session_get_nth_pset(s, MPI_INFO_NULL, -1, &len, NULL), MPI_ERR_ARG);
    FAILS_WITH(MPI_Group_from_session_pset(s, NULL, &g), MPI_ERR_ARG);
    MPI_Errhandler e, got;
    OK(MPI_Session_create_errhandler(session_handler, &e));
    OK(MPI_Session_set_errhandler(s, e));
    OK(MPI_Session_get_errhandler(s, &got));
    CHECK(got == e, "errhandler %x, set %x", got, e);
    int rc = MPI_Group_from_session_pset(s, "mpi://NOWHERE", &g);
    CHECK(class_of(rc) == MPI_ERR_ARG, "through the program's handler: %d", rc);
    CHECK(handler_calls == 1 && handler_code == rc && handler_session == s, "handler: %d calls, code %d, session %x",
          handler_calls, handler_code, handler_session);
    OK(MPI_Session_call_errhandler(s, MPI_ERR_OTHER));
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER, "call_errhandler: %d calls", handler_calls);
    /* Freed while the session uses it: it stays until replaced. */
    OK(MPI_Errhandler_free(&e));
    rc = MPI_Session_get_pset_info(s, "mpi://NOWHERE", &info);
    CHECK(class_of(rc) == MPI_ERR_ARG && handler_calls == 3, "freed handler: rc %d, %d calls", rc, handler_calls);
    OK(MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN));
    /* Communicators from groups: the caller must be a member; a null tag. */
    MPI_Comm c;
    OK(MPI_Group_from_session_pset(s, "mpi://SELF", &g));
    FAILS_WITH(MPI_Comm_create_from_group(g, NULL, MPI_INFO_NULL, MPI_ERRORS_RETURN, &c), MPI_ERR_ARG);
    OK(MPI_Group_free(&g));
    FAILS_WITH(MPI_Comm_create_from_group(MPI_GROUP_EMPTY, "t", MPI_INFO_NULL, MPI_ERRORS_RETURN, &c), MPI_ERR_GROUP);
}

/* Hints: the MPI-4.1 assertions at their defaults, set ones returned, dup_with_info's own. */
static void hints(MPI_Comm c) {
    MPI_Info set, got;
    char v[64];
    OK(MPI_Comm_get_info(c, &got));
    CHECK(info_value(got, "mpi_assert_no_any_tag", v, sizeof v) && strcmp(v, "false") == 0, "default %s", v);
    OK(MPI_Info_free(&got));
    OK(MPI_Info_create(&set));
    OK(MPI_Info_set(set, "mpi_assert_no_any_tag", "true"));
    OK(MPI_Info_set(set, "nemesis_unknown_hint", "42"));
    OK(MPI_Comm_set_info(c, set));
    OK(MPI_Comm_get_info(c, &got));
    CHECK(info_value(got, "mpi_assert_no_any_tag", v, sizeof v) && strcmp(v, "true") == 0, "set %s", v);
    CHECK(info_value(got, "mpi_assert_exact_length", v, sizeof v) && strcmp(v, "false") == 0, "default %s", v);
    OK(MPI_Info_free(&got));
    MPI_Comm d;
    OK(MPI_Info_set(set, "mpi_assert_no_any_tag", "false"));
    OK(MPI_Info_set(set, "mpi_assert_allow_overtaking", "true"));
    OK(MPI_Comm_dup_with_info(c, set, &d));
    OK(MPI_Comm_get_info(d, &got));
    CHECK(info_value(got, "mpi_assert_allow_overtaking", v, sizeof v) && strcmp(v, "true") == 0, "dup %s", v);
    CHECK(info_value(got, "mpi_assert_no_any_tag", v, sizeof v) && strcmp(v, "false") == 0, "dup %s", v);
    OK(MPI_Info_free(&got));
    int sum = 0, one = 1, size;
    OK(MPI_Comm_size(d, &size));
    OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d));
    CHECK(sum == size, "dup_with_info allreduce %d", sum);
    OK(MPI_Comm_free(&d));
    OK(MPI_Info_free(&set));
    FAILS_WITH(MPI_Comm_set_info(c, MPI_INFO_NULL), MPI_ERR_INFO);
}

/* An intercommunicator between the lower and upper halves of mpi://WORLD (size >= 2). */
static void halves(MPI_Session s, int size) {
    MPI_Group world, low, high;
    int rank;
    OK(MPI_Group_from_session_pset(s, "mpi://WORLD", &world));
    OK(MPI_Group_rank(world, &rank));
    int half = size / 2;
    int lo[3] = {0, half - 1, 1}, hi[3] = {half, size - 1, 1};
    OK(MPI_Group_range_incl(world, 1, &lo, &low));
    OK(MPI_Group_range_incl(world, 1, &hi, &high));
    int mine_low = rank < half;
    MPI_Comm ic;
    OK(MPI_Intercomm_create_from_groups(mine_low ? low : high, 0, mine_low ? high : low, 0, "halves", MPI_INFO_NULL,
                                        MPI_ERRORS_RETURN, &ic));
    int flag = 0, rsize = -1, lsize = -1;
    OK(MPI_Comm_test_inter(ic, &flag));
    OK(MPI_Comm_remote_size(ic, &rsize));
    OK(MPI_Comm_size(ic, &lsize));
    CHECK(flag && lsize == (mine_low ? half : size - half) && rsize == (mine_low ? size - half : half),
          "inter %d, sizes %d/%d", flag, lsize, rsize);
    /* Rank 0 of each half sends its group's size to the other's rank 0. */
    int lrank;
    OK(MPI_Comm_rank(ic, &lrank));
    if (lrank == 0) {
        int got = -1;
        OK(MPI_Sendrecv(&lsize, 1, MPI_INT, 0, 3, &got, 1, MPI_INT, 0, 3, ic, MPI_STATUS_IGNORE));
        CHECK(got == rsize, "across: %d", got);
    }
    MPI_Comm merged;
    OK(MPI_Intercomm_merge(ic, !mine_low, &merged));
    int mrank;
    OK(MPI_Comm_rank(merged, &mrank));
    CHECK(mrank == rank, "merged rank %d, world rank %d", mrank, rank);
    OK(MPI_Comm_free(&merged));
    OK(MPI_Comm_free(&ic));
    /* Overlapping groups. */
    FAILS_WITH(MPI_Intercomm_create_from_groups(world, 0, world, 0, "bad", MPI_INFO_NULL, MPI_ERRORS_RETURN, &ic),
               MPI_ERR_GROUP);
    OK(MPI_Group_free(&low));
    OK(MPI_Group_free(&high));
    OK(MPI_Group_free(&world));
}

static MPI_Session start(const char *level) {
    MPI_Info info;
    MPI_Session s = MPI_SESSION_NULL;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "thread_level", level));
    OK(MPI_Session_init(info, MPI_ERRORS_RETURN, &s));
    OK(MPI_Info_free(&info));
    CHECK(s != MPI_SESSION_NULL, "no session");
    return s;
}

int main(int argc, char **argv) {
    const char *mode = getenv("SESSION_MODE");
    if (mode == NULL) mode = "only";
    int flag = -1, rank, size;
    if (strcmp(mode, "only") == 0) {
        MPI_Session s = start("MPI_THREAD_SINGLE"), t = start("MPI_THREAD_MULTIPLE");
        OK(MPI_Initialized(&flag));
        CHECK(flag == 0, "initialized with sessions only");
        size = psets(s);
        MPI_Comm w = comm_from(s, "mpi://WORLD", "org.nemesis.world");
        OK(MPI_Comm_rank(w, &rank));
        check_rank = rank;
        MPI_Comm me = comm_from(t, "mpi://SELF", "org.nemesis.self");
        MPI_Comm node = comm_from(t, "nemesis://NODE", "org.nemesis.node");
        /* Two communicators over the same group with different tags are different ones. */
        MPI_Comm w2 = comm_from(t, "mpi://WORLD", "org.nemesis.world.2");
        int cmp = -1;
        OK(MPI_Comm_compare(w, w2, &cmp));
        CHECK(cmp == MPI_CONGRUENT, "compare %d", cmp);
        if (size >= 2) halves(s, size);
        hints(w);
        bad_input(s);
        OK(MPI_Comm_free(&w2));
        OK(MPI_Comm_free(&node));
        OK(MPI_Comm_free(&me));
        OK(MPI_Comm_free(&w));
        OK(MPI_Session_finalize(&t));
        CHECK(t == MPI_SESSION_NULL, "finalized handle %x", t);
        OK(MPI_Session_finalize(&s));
        OK(MPI_Finalized(&flag));
        CHECK(flag == 0, "finalized with sessions only");
        /* Sessions start again, and the world model after them; the session ends last. */
        for (int round = 0; round < 2; round++) {
            s = start("MPI_THREAD_SINGLE");
            w = comm_from(s, "mpi://WORLD", "org.nemesis.again");
            OK(MPI_Comm_free(&w));
            if (round == 0) OK(MPI_Session_finalize(&s));
        }
        OK(MPI_Init(&argc, &argv));
        OK(MPI_Comm_size(MPI_COMM_WORLD, &flag));
        CHECK(flag == size, "world %d after sessions", flag);
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Finalize());
        w = comm_from(s, "mpi://WORLD", "org.nemesis.after");
        OK(MPI_Comm_free(&w));
        OK(MPI_Session_finalize(&s));
    } else if (strcmp(mode, "world-first") == 0) {
        OK(MPI_Init(&argc, &argv));
        OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
        check_rank = rank;
        MPI_Session s = start("MPI_THREAD_SINGLE");
        size = psets(s);
        OK(MPI_Comm_size(MPI_COMM_WORLD, &flag));
        CHECK(flag == size, "world %d, mpi://WORLD %d", flag, size);
        MPI_Comm w = comm_from(s, "mpi://WORLD", "org.nemesis.world");
        int cmp = -1;
        OK(MPI_Comm_compare(w, MPI_COMM_WORLD, &cmp));
        CHECK(cmp == MPI_CONGRUENT, "compare %d", cmp);
        /* Both at once: a world collective between two of the session's. */
        int one = 1, sum = 0;
        OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(sum == size, "world allreduce %d", sum);
        OK(MPI_Finalize());
        OK(MPI_Finalized(&flag));
        CHECK(flag == 1, "finalized");
        sum = 0;
        OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, w));
        CHECK(sum == size, "session allreduce after MPI_Finalize %d", sum);
        OK(MPI_Comm_free(&w));
        OK(MPI_Session_finalize(&s));
    } else {
        MPI_Session s = start("MPI_THREAD_FUNNELED");
        size = psets(s);
        MPI_Comm w = comm_from(s, "mpi://WORLD", "org.nemesis.world");
        OK(MPI_Comm_rank(w, &rank));
        check_rank = rank;
        OK(MPI_Initialized(&flag));
        CHECK(flag == 0, "initialized before MPI_Init");
        int provided = -1;
        OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided));
        CHECK(provided >= MPI_THREAD_SINGLE, "provided %d", provided);
        OK(MPI_Initialized(&flag));
        CHECK(flag == 1, "initialized after MPI_Init");
        OK(MPI_Comm_size(MPI_COMM_WORLD, &flag));
        CHECK(flag == size, "world %d", flag);
        MPI_Comm d;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
        int one = 1, sum = 0;
        OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d));
        CHECK(sum == size, "dup allreduce %d", sum);
        OK(MPI_Comm_free(&w));
        OK(MPI_Session_finalize(&s));
        sum = 0;
        OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, d));
        CHECK(sum == size, "world allreduce after MPI_Session_finalize %d", sum);
        OK(MPI_Comm_free(&d));
        OK(MPI_Finalize());
    }
    printf("OK session_models %d\n", rank);
    return 0;
}
