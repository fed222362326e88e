/* MPI_Comm_spawn under nemesis-run --universe-size: the parents (every rank of MPI_COMM_WORLD)
 * spawn SPAWN_CHILDREN (default 2) copies of this program with arguments, root SPAWN_ROOT
 * (default: the last rank), an info with "wdir" and "host" (the children's node identity). The
 * children check MPI_Comm_get_parent, their own world, argv, MPI_APPNUM and MPI_UNIVERSE_SIZE.
 * Then: point-to-point both ways over the intercommunicator (every parent to every child and back,
 * values checked), an intercommunicator collective (Bcast from parent 0, Allreduce both ways),
 * MPI_Intercomm_merge (the parents low: ranks and a sum checked), a second connection (the
 * children's root publishes a port, the parents look it up and connect), MPI_Comm_disconnect with
 * a receive pending in the parents (it completes inside; the handle becomes MPI_COMM_NULL, and
 * MPI_Comm_get_parent answers MPI_COMM_NULL afterwards in the children). A non-spawned process
 * sees MPI_COMM_NULL as its parent; array_of_errcodes is all MPI_SUCCESS. SPAWN_ROUNDS (default
 * 1) spawns one after the other (each group takes new slots of the universe).
 * Prints "OK spawn_basic <rank>" in the parents and "CHILD spawn_basic <rank>" in the children. */
#include "check.h"

#include <unistd.h>

static int rank, size;

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* Point-to-point, a collective and a merge over the intercommunicator `ic`, whose local group
 * is this process's world; `parent` true in the parents. */
static void exercise(MPI_Comm ic, int parent) {
    int lsize, rsize, lrank, inter;
    OK(MPI_Comm_test_inter(ic, &inter));
    CHECK(inter, "not an intercommunicator");
    OK(MPI_Comm_size(ic, &lsize));
    OK(MPI_Comm_remote_size(ic, &rsize));
    OK(MPI_Comm_rank(ic, &lrank));
    CHECK(lsize == size && lrank == rank, "local group %d/%d, world %d/%d", lrank, lsize, rank, size);
    /* Every member sends its rank * 100 + remote rank to every remote member, then receives. */
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * rsize);
    int *out = malloc(sizeof(int) * rsize), *in = malloc(sizeof(int) * rsize);
    for (int r = 0; r < rsize; r++) {
        out[r] = (parent ? 1000 : 2000) + lrank * 100 + r;
        OK(MPI_Isend(&out[r], 1, MPI_INT, r, 7, ic, &reqs[r]));
    }
    for (int r = 0; r < rsize; r++) {
        MPI_Status st;
        OK(MPI_Recv(&in[r], 1, MPI_INT, r, 7, ic, &st));
        CHECK(st.MPI_SOURCE == r, "source %d, expected %d", st.MPI_SOURCE, r);
        int want = (parent ? 2000 : 1000) + r * 100 + lrank;
        CHECK(in[r] == want, "from remote %d: %d, expected %d", r, in[r], want);
    }
    OK(MPI_Waitall(rsize, reqs, MPI_STATUSES_IGNORE));
    free(reqs);
    free(out);
    free(in);
    /* Bcast from parent 0 to the children. */
    int v = parent ? 4242 : -1;
    if (parent)
        OK(MPI_Bcast(&v, 1, MPI_INT, lrank == 0 ? MPI_ROOT : MPI_PROC_NULL, ic));
    else
        OK(MPI_Bcast(&v, 1, MPI_INT, 0, ic));
    CHECK(v == 4242, "bcast gave %d", v);
    /* Allreduce: each side gets the sum of the other side's ranks + 1. */
    int mine = lrank + 1, sum = 0;
    OK(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, ic));
    CHECK(sum == rsize * (rsize + 1) / 2, "allreduce %d over %d remote", sum, rsize);
    /* Merge, parents first. */
    MPI_Comm merged;
    OK(MPI_Intercomm_merge(ic, parent ? 0 : 1, &merged));
    int mrank, msize;
    OK(MPI_Comm_rank(merged, &mrank));
    OK(MPI_Comm_size(merged, &msize));
    CHECK(msize == lsize + rsize, "merged size %d", msize);
    CHECK(mrank == (parent ? lrank : rsize + lrank), "merged rank %d", mrank);
    int total = 0;
    OK(MPI_Allreduce(&mrank, &total, 1, MPI_INT, MPI_SUM, merged));
    CHECK(total == msize * (msize - 1) / 2, "merged sum %d", total);
    OK(MPI_Comm_free(&merged));
    /* A second connection between the two jobs, through a port the children's root opens and
     * publishes: the parents look it up and connect. */
    char port[MPI_MAX_PORT_NAME] = "";
    if (!parent && lrank == 0) {
        OK(MPI_Open_port(MPI_INFO_NULL, port));
        OK(MPI_Publish_name("spawn-basic-children", MPI_INFO_NULL, port));
    }
    OK(MPI_Barrier(ic));
    if (parent && lrank == 0) OK(MPI_Lookup_name("spawn-basic-children", MPI_INFO_NULL, port));
    MPI_Comm again;
    if (parent)
        OK(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &again));
    else
        OK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &again));
    int r2;
    OK(MPI_Comm_remote_size(again, &r2));
    CHECK(r2 == rsize, "second connection: remote size %d", r2);
    int x = lrank, y = -1;
    OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, again));
    CHECK(y == rsize - 1, "second connection: allreduce %d", y);
    OK(MPI_Comm_disconnect(&again));
    if (!parent && lrank == 0) {
        OK(MPI_Unpublish_name("spawn-basic-children", MPI_INFO_NULL, port));
        OK(MPI_Close_port(port));
    }
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    MPI_Comm parent;
    OK(MPI_Comm_get_parent(&parent));
    int *flagp, flag, *app;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &flagp, &flag));
    CHECK(flag && *flagp >= size, "MPI_UNIVERSE_SIZE");
    int universe = *flagp;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &app, &flag));
    CHECK(flag && *app == 0, "MPI_APPNUM");
    if (parent == MPI_COMM_NULL) {
        int children = env_int("SPAWN_CHILDREN", 2), root = env_int("SPAWN_ROOT", size - 1);
        int rounds = env_int("SPAWN_ROUNDS", 1);
        CHECK(universe >= size + rounds * children, "universe %d for %d + %d", universe, size, children);
        for (int round = 0; round < rounds; round++) {
        char *args[] = {"child", "two words", NULL};
        MPI_Info info;
        OK(MPI_Info_create(&info));
        OK(MPI_Info_set(info, "wdir", "/tmp"));
        OK(MPI_Info_set(info, "host", "spawnhost"));
        MPI_Comm ic;
        int codes[8];
        for (int i = 0; i < 8; i++) codes[i] = -1;
        OK(MPI_Comm_spawn(argv[0], args, children, info, root, MPI_COMM_WORLD, &ic, codes));
        OK(MPI_Info_free(&info));
        for (int i = 0; i < children; i++) CHECK(codes[i] == MPI_SUCCESS, "errcode %d: %d", i, codes[i]);
        int rsize;
        OK(MPI_Comm_remote_size(ic, &rsize));
        CHECK(rsize == children, "%d children, asked for %d", rsize, children);
        exercise(ic, 1);
        /* A receive still pending at the disconnect completes inside it (the child sends). */
        int late = 0;
        MPI_Request rq;
        OK(MPI_Irecv(&late, 1, MPI_INT, 0, 99, ic, &rq));
        OK(MPI_Comm_disconnect(&ic));
        OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
        CHECK(late == 77, "late message %d", late);
        CHECK(ic == MPI_COMM_NULL, "disconnect left the handle");
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
        printf("OK spawn_basic %d\n", rank);
    } else {
        int psize;
        OK(MPI_Comm_remote_size(parent, &psize));
        CHECK(argc == 3 && !strcmp(argv[1], "child") && !strcmp(argv[2], "two words"), "argv (%d)", argc);
        char cwd[256];
        CHECK(getcwd(cwd, sizeof cwd) && !strcmp(cwd, "/tmp"), "wdir: %s", cwd);
        const char *node = getenv("NEMESIS_NODE");
        CHECK(node && !strncmp(node, "spawnhost", 9), "node identity %s", node ? node : "(unset)");
        /* The parent stays the parent when its properties change (mpi4py sets its error handler,
           then asks again). */
        OK(MPI_Comm_set_errhandler(parent, MPI_ERRORS_RETURN));
        OK(MPI_Comm_set_name(parent, "parent"));
        MPI_Comm again;
        OK(MPI_Comm_get_parent(&again));
        CHECK(again == parent, "MPI_Comm_get_parent after set_errhandler and set_name");
        exercise(parent, 0);
        int late = 77;
        for (int r = 0; rank == 0 && r < psize; r++) OK(MPI_Send(&late, 1, MPI_INT, r, 99, parent));
        OK(MPI_Comm_disconnect(&parent));
        OK(MPI_Comm_get_parent(&parent));
        CHECK(parent == MPI_COMM_NULL, "parent after disconnect");
        printf("CHILD spawn_basic %d\n", rank);
    }
    fflush(stdout);
    OK(MPI_Finalize());
    return 0;
}
