/* MPI_Comm_spawn_multiple with two commands (this program with the arguments "a" and "b"), 1
 * and 2 processes (SPAWN_FIRST, SPAWN_SECOND), from root 0 of MPI_COMM_WORLD under nemesis-run
 * --universe-size: the children form one world of 3, in command order; MPI_APPNUM is the
 * command's number and matches the argument; each child sends (appnum, argv) to parent 0, which
 * checks them all; every parent gets the children's world size through a Bcast over the
 * intercommunicator. Prints "OK spawn_multiple <rank>" in the parents, "CHILD spawn_multiple
 * <rank>" in the children. */
#include "check.h"

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    MPI_Comm parent;
    OK(MPI_Comm_get_parent(&parent));
    int *app, flag;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &app, &flag));
    CHECK(flag, "MPI_APPNUM unset");
    if (parent == MPI_COMM_NULL) {
        int n1 = env_int("SPAWN_FIRST", 1), n2 = env_int("SPAWN_SECOND", 2);
        char *cmds[2] = {argv[0], argv[0]};
        char *a1[] = {"a", NULL}, *a2[] = {"b", NULL};
        char **argvs[2] = {a1, a2};
        int maxprocs[2] = {n1, n2};
        MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
        int codes[16];
        MPI_Comm ic;
        OK(MPI_Comm_spawn_multiple(2, cmds, argvs, maxprocs, infos, 0, MPI_COMM_WORLD, &ic, codes));
        for (int i = 0; i < n1 + n2; i++) CHECK(codes[i] == MPI_SUCCESS, "errcode %d: %d", i, codes[i]);
        int rsize;
        OK(MPI_Comm_remote_size(ic, &rsize));
        CHECK(rsize == n1 + n2, "remote size %d", rsize);
        if (rank == 0) {
            for (int r = 0; r < rsize; r++) {
                int got[2];
                OK(MPI_Recv(got, 2, MPI_INT, r, 3, ic, MPI_STATUS_IGNORE));
                int want = r < n1 ? 0 : 1;
                CHECK(got[0] == want && got[1] == 'a' + want, "child %d: appnum %d arg %c", r, got[0], got[1]);
            }
        }
        int wsize = 0;
        OK(MPI_Bcast(&wsize, 1, MPI_INT, 0, ic));
        CHECK(wsize == n1 + n2, "children's world %d", wsize);
        OK(MPI_Comm_disconnect(&ic));
        printf("OK spawn_multiple %d\n", rank);
    } else {
        CHECK(argc == 2, "argc %d", argc);
        int mine[2] = {*app, argv[1][0]};
        OK(MPI_Send(mine, 2, MPI_INT, 0, 3, parent));
        OK(MPI_Bcast(&size, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, parent));
        OK(MPI_Comm_disconnect(&parent));
        printf("CHILD spawn_multiple %d\n", rank);
    }
    fflush(stdout);
    OK(MPI_Finalize());
    return 0;
}
