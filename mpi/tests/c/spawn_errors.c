/* MPI_Comm_spawn's error path, with MPI_ERRORS_RETURN on MPI_COMM_WORLD: SPAWN_EXPECT says what
 * the spawn of 3 more copies of this program must do: "full" (nemesis-run without room in the
 * universe), "singleton" (started without a launcher) or "foreign" (another process manager):
 * MPI_ERR_SPAWN at every rank, array_of_errcodes filled with MPI_ERR_SPAWN. With SPAWN_FATAL
 * set, the spawn runs under MPI_ERRORS_ARE_FATAL instead and must end the job (the driver checks
 * that the message gives the reason). Under "room" (one free slot): a program that does not
 * exist is MPI_ERR_SPAWN, then 3 asked for with the info key soft=1:3 start the 1 that fits
 * (MPI_SUCCESS; errcodes SUCCESS, ERR_SPAWN, ERR_SPAWN). Then bad arguments: maxprocs 0 at the
 * root (MPI_ERR_ARG), a bad root (MPI_ERR_ROOT), an invalid info object (MPI_ERR_INFO, for
 * MPI_Open_port and the spawn); closing a port never opened, accepting on it, connecting to a
 * malformed name (MPI_ERR_PORT); looking up an unknown name (MPI_ERR_NAME), unpublishing one
 * (MPI_ERR_SERVICE); disconnecting MPI_COMM_NULL (MPI_ERR_COMM). Prints "OK spawn_errors
 * <rank>". */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_Comm parent;
    OK(MPI_Comm_get_parent(&parent));
    if (parent != MPI_COMM_NULL) {
        /* A child of the soft spawn below: nothing to check here. */
        OK(MPI_Comm_disconnect(&parent));
        OK(MPI_Finalize());
        return 0;
    }
    const char *expect = getenv("SPAWN_EXPECT");
    CHECK(expect, "SPAWN_EXPECT must be set");
    MPI_Comm ic = MPI_COMM_NULL;
    int codes[3] = {-1, -1, -1};
    if (getenv("SPAWN_FATAL")) {
        /* The default handler: the job ends, and the launcher's output shows the reason. */
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
        MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 3, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic, codes);
        CHECK(0, "a failed spawn returned under MPI_ERRORS_ARE_FATAL");
    }
    if (strcmp(expect, "room") != 0) {
        int rc = MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 3, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic, codes);
        CHECK(class_of(rc) == MPI_ERR_SPAWN, "spawn returned class %d", class_of(rc));
        for (int i = 0; i < 3; i++) CHECK(codes[i] == MPI_ERR_SPAWN, "errcode %d: %d", i, codes[i]);
    } else {
        int rc = MPI_Comm_spawn("/nonexistent/program", MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic,
                                codes);
        CHECK(class_of(rc) == MPI_ERR_SPAWN, "a missing program: class %d", class_of(rc));
        CHECK(codes[0] == MPI_ERR_SPAWN, "errcode %d", codes[0]);
        /* One free slot, three asked for with soft 1:3: one starts, the call succeeds. */
        MPI_Info soft;
        OK(MPI_Info_create(&soft));
        OK(MPI_Info_set(soft, "soft", "1:3"));
        OK(MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 3, soft, 0, MPI_COMM_WORLD, &ic, codes));
        OK(MPI_Info_free(&soft));
        int rsize;
        OK(MPI_Comm_remote_size(ic, &rsize));
        CHECK(rsize == 1, "soft spawn started %d", rsize);
        CHECK(codes[0] == MPI_SUCCESS && codes[1] == MPI_ERR_SPAWN && codes[2] == MPI_ERR_SPAWN,
              "soft spawn errcodes %d %d %d", codes[0], codes[1], codes[2]);
        OK(MPI_Comm_disconnect(&ic));
    }
    FAILS_WITH(MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 0, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &ic, MPI_ERRCODES_IGNORE),
               MPI_ERR_ARG);
    FAILS_WITH(MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, size, MPI_COMM_WORLD, &ic, MPI_ERRCODES_IGNORE),
               MPI_ERR_ROOT);
    FAILS_WITH(MPI_Close_port("nemesis-port:0:999"), MPI_ERR_PORT);
    FAILS_WITH(MPI_Comm_accept("nemesis-port:0:999", MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic), MPI_ERR_PORT);
    FAILS_WITH(MPI_Comm_connect("not a port", MPI_INFO_NULL, 0, MPI_COMM_SELF, &ic), MPI_ERR_PORT);
    char port[MPI_MAX_PORT_NAME];
    MPI_Info bogus = (MPI_Info)0x1c0000ff;
    FAILS_WITH(MPI_Open_port(bogus, port), MPI_ERR_INFO);
    FAILS_WITH(MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, bogus, 0, MPI_COMM_WORLD, &ic, MPI_ERRCODES_IGNORE),
               MPI_ERR_INFO);
    FAILS_WITH(MPI_Lookup_name("spawn-errors-nobody", MPI_INFO_NULL, port), MPI_ERR_NAME);
    FAILS_WITH(MPI_Unpublish_name("spawn-errors-nobody", MPI_INFO_NULL, "x"), MPI_ERR_SERVICE);
    FAILS_WITH(MPI_Comm_disconnect(&ic), MPI_ERR_COMM);
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK spawn_errors %d\n", rank);
    fflush(stdout);
    OK(MPI_Finalize());
    return 0;
}
