/* MPI_Comm_spawn's error path, with MPI_ERRORS_RETURN on MPI_COMM_WORLD: SPAWN_EXPECT says what
 * the spawn of one more copy of this program must do: "full" (nemesis-run without room in the
 * universe), "singleton" (started without a launcher) or "foreign" (another process manager):
 * MPI_ERR_SPAWN at every rank, array_of_errcodes filled with MPI_ERR_SPAWN. With SPAWN_FATAL
 * set, the spawn runs under MPI_ERRORS_ARE_FATAL instead and must end the job (the driver checks
 * that the message gives the reason). Then, where spawning works or not, bad
 * arguments: a program that does not exist (MPI_ERR_SPAWN, only under "room"), maxprocs 0 at the
 * root (MPI_ERR_ARG), a bad root (MPI_ERR_ROOT), an intercommunicator (MPI_ERR_COMM); and the
 * port and name calls: an invalid info object (MPI_ERR_INFO, also for the spawn), closing a port never opened (MPI_ERR_PORT), accepting on it
 * (MPI_ERR_PORT), connecting to a malformed name (MPI_ERR_PORT), looking up an unknown name
 * (MPI_ERR_NAME), unpublishing one (MPI_ERR_SERVICE). Prints "OK spawn_errors <rank>". */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
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
