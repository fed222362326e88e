/* What a communicator takes from the one it comes from, in the Sessions model (MPI_Init never
 * called): communicators derived from one of session S (dup, idup, split, split_type, create,
 * create_group, Intercomm_create, Intercomm_merge) keep its error handler and belong to S, so
 * their buffered sends take S's buffer (MPI_Session_attach_buffer), where those derived from
 * session T's find none; hints (MPI-4.1 §7.4.4): the four assertions, other keys ignored (as
 * MPICH), copied by dup and idup, replaced by dup_with_info, idup_with_info and split_type's
 * info, the defaults after split and create; split types HW_GUIDED and RESOURCE_GUIDED
 * (mpi_shared_memory: the node's ranks; anything else MPI_COMM_NULL), HW_UNGUIDED (by node over
 * several nodes, naming the resource in the info; MPI_COMM_NULL on one). Prints
 * "OK comm_lineage <rank>". */
#include "check.h"

static int handler_calls;

static void on_comm(MPI_Comm *c, int *code, ...) {
    (void)c;
    (void)code;
    handler_calls++;
}

static MPI_Comm world_of(MPI_Session s, const char *tag, MPI_Errhandler e) {
    MPI_Group g;
    MPI_Comm c;
    OK(MPI_Group_from_session_pset(s, "mpi://WORLD", &g));
    OK(MPI_Comm_create_from_group(g, tag, MPI_INFO_NULL, e, &c));
    OK(MPI_Group_free(&g));
    return c;
}

/* The value of key in c's hints ("" if absent). */
static const char *hint(MPI_Comm c, const char *key) {
    static char v[MPI_MAX_INFO_VAL + 1];
    MPI_Info i;
    int flag = 0, len = sizeof v - 1;
    OK(MPI_Comm_get_info(c, &i));
    OK(MPI_Info_get_string(i, key, &len, v, &flag));
    int n;
    OK(MPI_Info_get_nkeys(i, &n));
    CHECK(n == 4, "%d hints, the four assertions expected", n);
    OK(MPI_Info_free(&i));
    if (!flag) v[0] = 0;
    return v;
}

/* c (an intracommunicator) has handler e and S's buffer: a buffered send to oneself. */
static void derived(MPI_Comm c, MPI_Errhandler e, const char *what) {
    MPI_Errhandler got;
    OK(MPI_Comm_get_errhandler(c, &got));
    CHECK(got == e, "%s: handler %#x, not %#x", what, got, e);
    OK(MPI_Errhandler_free(&got));
    int me, x = 42, y = 0;
    OK(MPI_Comm_rank(c, &me));
    int rc = MPI_Bsend(&x, 1, MPI_INT, me, 5, c);
    CHECK(rc == MPI_SUCCESS, "%s: Bsend through the session's buffer: %d", what, rc);
    OK(MPI_Recv(&y, 1, MPI_INT, me, 5, c, MPI_STATUS_IGNORE));
    CHECK(y == 42, "%s: got %d", what, y);
}

int main(void) {
    MPI_Session s, t;
    MPI_Errhandler e;
    OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &s));
    OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &t));
    OK(MPI_Comm_create_errhandler(on_comm, &e));
    MPI_Comm c = world_of(s, "comm_lineage/s", e), other = world_of(t, "comm_lineage/t", MPI_ERRORS_RETURN);
    int rank, size;
    OK(MPI_Comm_rank(c, &rank));
    OK(MPI_Comm_size(c, &size));
    check_rank = rank;
    int bsize = 16 * (64 + MPI_BSEND_OVERHEAD);
    char *buf = malloc((size_t)bsize);
    OK(MPI_Session_attach_buffer(s, buf, bsize));

    /* Session lineage: every derived communicator. */
    MPI_Comm d, i, sp, st, cr, cg, tdup;
    MPI_Request r;
    OK(MPI_Comm_dup(c, &d));
    derived(d, e, "dup");
    OK(MPI_Comm_idup(d, &i, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    derived(i, e, "idup of a dup");
    OK(MPI_Comm_split(c, rank % 2, rank, &sp));
    derived(sp, e, "split");
    OK(MPI_Comm_split_type(i, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &st));
    derived(st, e, "split_type");
    MPI_Group g;
    OK(MPI_Comm_group(c, &g));
    OK(MPI_Comm_create(c, g, &cr));
    derived(cr, e, "create");
    OK(MPI_Comm_create_group(c, g, 7, &cg));
    derived(cg, e, "create_group");
    OK(MPI_Group_free(&g));
    if (size > 1) {
        MPI_Comm inter, merged;
        OK(MPI_Intercomm_create(sp, 0, c, rank % 2 ? 0 : 1, 9, &inter));
        MPI_Errhandler got;
        OK(MPI_Comm_get_errhandler(inter, &got));
        CHECK(got == e, "intercomm handler %#x", got);
        OK(MPI_Errhandler_free(&got));
        /* Over the intercommunicator: rank k of each side sends to remote rank k if there is one. */
        int lsize, rsize, x = rank, y = -1;
        OK(MPI_Comm_size(inter, &lsize));
        OK(MPI_Comm_remote_size(inter, &rsize));
        int lr;
        OK(MPI_Comm_rank(inter, &lr));
        if (lr < rsize) OK(MPI_Bsend(&x, 1, MPI_INT, lr, 3, inter));
        if (lr < rsize) {
            MPI_Status stt;
            OK(MPI_Recv(&y, 1, MPI_INT, lr, 3, inter, &stt));
            CHECK(y % 2 != rank % 2, "intercomm message from %d", y);
        }
        OK(MPI_Intercomm_merge(inter, rank % 2, &merged));
        derived(merged, e, "merge");
        OK(MPI_Comm_free(&merged));
        OK(MPI_Comm_free(&inter));
    }
    /* Session T's communicators have no buffer. */
    OK(MPI_Comm_dup(other, &tdup));
    int x = 1;
    FAILS_WITH(MPI_Bsend(&x, 1, MPI_INT, rank, 5, tdup), MPI_ERR_BUFFER);
    CHECK(handler_calls == 0, "handler called %d times", handler_calls);
    /* An error on a derived communicator reaches the handler it took. */
    int rc = MPI_Send(&x, 1, MPI_INT, size + 3, 0, cg);
    CHECK(class_of(rc) == MPI_ERR_RANK && handler_calls == 1, "error on create_group's: %d calls", handler_calls);

    /* Hints. */
    MPI_Info in;
    MPI_Comm h1, h2, h3, h4, h5, h6;
    CHECK(strcmp(hint(d, "mpi_assert_no_any_tag"), "false") == 0, "default");
    OK(MPI_Info_create(&in));
    OK(MPI_Info_set(in, "mpi_assert_no_any_tag", "true"));
    OK(MPI_Info_set(in, "nemesis_unknown", "1"));
    OK(MPI_Comm_set_info(d, in));
    CHECK(strcmp(hint(d, "mpi_assert_no_any_tag"), "true") == 0, "set");
    CHECK(strcmp(hint(d, "nemesis_unknown"), "") == 0, "an unknown hint is ignored");
    OK(MPI_Comm_dup(d, &h1));
    CHECK(strcmp(hint(h1, "mpi_assert_no_any_tag"), "true") == 0, "dup copies the hints");
    OK(MPI_Comm_idup(d, &h2, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(strcmp(hint(h2, "mpi_assert_no_any_tag"), "true") == 0, "idup copies the hints");
    OK(MPI_Info_free(&in));
    OK(MPI_Info_create(&in));
    OK(MPI_Info_set(in, "mpi_assert_exact_length", "true"));
    OK(MPI_Comm_dup_with_info(d, in, &h3));
    CHECK(strcmp(hint(h3, "mpi_assert_exact_length"), "true") == 0 && strcmp(hint(h3, "mpi_assert_no_any_tag"), "false") == 0,
          "dup_with_info takes the info's");
    OK(MPI_Comm_idup_with_info(d, in, &h4, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK(strcmp(hint(h4, "mpi_assert_exact_length"), "true") == 0 && strcmp(hint(h4, "mpi_assert_no_any_tag"), "false") == 0,
          "idup_with_info takes the info's");
    OK(MPI_Comm_split_type(d, MPI_COMM_TYPE_SHARED, 0, in, &h5));
    CHECK(strcmp(hint(h5, "mpi_assert_exact_length"), "true") == 0 && strcmp(hint(h5, "mpi_assert_no_any_tag"), "false") == 0,
          "split_type takes the info's");
    OK(MPI_Comm_split(d, 0, rank, &h6));
    CHECK(strcmp(hint(h6, "mpi_assert_no_any_tag"), "false") == 0, "split: the defaults");
    /* A plain idup and an idup with info of the same parent in flight at once, the plain one
     * started (and completing) first: each takes its own call's hints. */
    {
        MPI_Comm h7, h8;
        MPI_Request rs[2];
        OK(MPI_Comm_idup(d, &h7, &rs[0]));
        OK(MPI_Comm_idup_with_info(d, in, &h8, &rs[1]));
        OK(MPI_Waitall(2, rs, MPI_STATUSES_IGNORE));
        CHECK(strcmp(hint(h7, "mpi_assert_no_any_tag"), "true") == 0 && strcmp(hint(h7, "mpi_assert_exact_length"), "false") == 0,
              "the plain idup beside an idup with info copies the parent's hints");
        CHECK(strcmp(hint(h8, "mpi_assert_exact_length"), "true") == 0 && strcmp(hint(h8, "mpi_assert_no_any_tag"), "false") == 0,
              "the idup with info beside a plain idup takes the info's");
        OK(MPI_Comm_free(&h7));
        OK(MPI_Comm_free(&h8));
    }
    OK(MPI_Info_free(&in));
    derived(h4, e, "idup_with_info");

    /* Split types. */
    int shared_size, n;
    OK(MPI_Comm_size(st, &shared_size));
    MPI_Comm z;
    OK(MPI_Comm_split_type(c, MPI_COMM_TYPE_HW_GUIDED, 0, MPI_INFO_NULL, &z));
    CHECK(z == MPI_COMM_NULL, "HW_GUIDED without a resource");
    OK(MPI_Info_create(&in));
    OK(MPI_Info_set(in, "mpi_hw_resource_type", "nemesis_no_such_thing"));
    OK(MPI_Comm_split_type(c, MPI_COMM_TYPE_RESOURCE_GUIDED, 0, in, &z));
    CHECK(z == MPI_COMM_NULL, "RESOURCE_GUIDED with an unknown resource");
    OK(MPI_Info_set(in, "mpi_hw_resource_type", "mpi_shared_memory"));
    int kinds[2] = {MPI_COMM_TYPE_HW_GUIDED, MPI_COMM_TYPE_RESOURCE_GUIDED};
    for (int k = 0; k < 2; k++) {
        OK(MPI_Comm_split_type(c, kinds[k], 0, in, &z));
        CHECK(z != MPI_COMM_NULL, "split type %d with mpi_shared_memory", kinds[k]);
        OK(MPI_Comm_size(z, &n));
        CHECK(n == shared_size, "split type %d: %d ranks, the node has %d", kinds[k], n, shared_size);
        derived(z, e, "hw/resource guided");
        OK(MPI_Comm_free(&z));
    }
    OK(MPI_Info_free(&in));
    OK(MPI_Info_create(&in));
    OK(MPI_Comm_split_type(c, MPI_COMM_TYPE_HW_UNGUIDED, rank, in, &z));
    char v[64];
    int len = sizeof v - 1, flag = 0;
    OK(MPI_Info_get_string(in, "mpi_hw_resource_type", &len, v, &flag));
    if (shared_size == size) {
        CHECK(z == MPI_COMM_NULL && !flag, "HW_UNGUIDED on one node");
    } else {
        CHECK(z != MPI_COMM_NULL && flag && strcmp(v, "mpi_shared_memory") == 0, "HW_UNGUIDED over nodes");
        OK(MPI_Comm_size(z, &n));
        CHECK(n == shared_size && n < size, "HW_UNGUIDED: %d ranks", n);
        OK(MPI_Comm_free(&z));
    }
    OK(MPI_Info_free(&in));
    FAILS_WITH(MPI_Comm_split_type(c, 12345, 0, MPI_INFO_NULL, &z), MPI_ERR_ARG);
    CHECK(handler_calls == 2, "the bad split type reached the handler: %d", handler_calls);

    MPI_Comm all[] = {d, i, sp, st, cr, cg, tdup, h1, h2, h3, h4, h5, h6, c, other};
    for (unsigned k = 0; k < sizeof all / sizeof all[0]; k++) OK(MPI_Comm_free(&all[k]));
    void *back;
    int bs;
    OK(MPI_Session_detach_buffer(s, &back, &bs));
    CHECK(back == buf && bs == bsize, "detached %p %d", back, bs);
    free(buf);
    OK(MPI_Errhandler_free(&e));
    printf("OK comm_lineage %d\n", rank);
    OK(MPI_Session_finalize(&t));
    OK(MPI_Session_finalize(&s));
    return 0;
}
