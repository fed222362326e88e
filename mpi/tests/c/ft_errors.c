/* Fault-tolerance failures through the error handler (mpi/src/error.rs), on 4 ranks in 2 groups
 * ({0,1} and {2,3}). FT_ERRORS selects the failure:
 * - "log": under MPI_ERRORS_RETURN, rank 0 sends 1 KiB messages to rank 2 (another group: its
 *   sender log keeps each) with no checkpoint to free them, until a send fails: it must be
 *   MPIX_ERR_LOG_EXHAUSTED (the launcher passes tiny NEMESIS_FT_LOG_MAX/NEMESIS_FT_SPILL_MAX), after
 *   at least one message and before 64, and MPI_Error_string names the bounds. Rank 0 tells rank 2
 *   how many went through the other ranks (0 -> 1 within its group, 1 -> 3 with an empty log,
 *   3 -> 2 within the other group), and rank 2 receives and checks them.
 * - "determinism": a ring Sendrecv and an Allreduce per iteration, a checkpoint at iteration
 *   EVERY; rank 3 kills itself (SIGKILL) after iteration KILL_AT, once rank 0 has received its
 *   ring messages past the checkpoint. Its group restarts and re-executes them with other
 *   contents (a restarted incarnation adds 7): the program is not send-deterministic, which
 *   HydEE detects; under MPI_ERRORS_ARE_FATAL the job ends with MPIX_ERR_SEND_DETERMINISM naming
 *   the sender, the destination and the message's sequence. */
#include "ft_hold.h"

#include <signal.h>

#define MSG 1024
#define MAX_SENDS 64
#define ITERS 10
#define EVERY 4
#define KILL_AT 6

static void log_exhausted(int rank) {
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    static char buf[MSG];
    int sent = -1;
    if (rank == 0) {
        int rc = MPI_SUCCESS;
        for (sent = 0; sent < MAX_SENDS; sent++) {
            memset(buf, sent + 1, MSG);
            rc = MPI_Send(buf, MSG, MPI_CHAR, 2, 5, MPI_COMM_WORLD);
            if (rc != MPI_SUCCESS) break;
        }
        CHECK(class_of(rc) == MPIX_ERR_LOG_EXHAUSTED, "send %d returned %d (class %d)", sent, rc, class_of(rc));
        CHECK(sent > 0, "no message went through");
        char msg[MPI_MAX_ERROR_STRING];
        int len;
        OK(MPI_Error_string(rc, msg, &len));
        CHECK(strstr(msg, "MPIX_ERR_LOG_EXHAUSTED") && strstr(msg, "sender log exhausted: 4096 bytes in memory"),
              "'%s'", msg);
        fprintf(stderr, "ft_errors: rank 0: %d sends, then %s\n", sent, msg);
        OK(MPI_Send(&sent, 1, MPI_INT, 1, 6, MPI_COMM_WORLD));
    } else if (rank == 1) {
        OK(MPI_Recv(&sent, 1, MPI_INT, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Send(&sent, 1, MPI_INT, 3, 6, MPI_COMM_WORLD));
    } else if (rank == 3) {
        OK(MPI_Recv(&sent, 1, MPI_INT, 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Send(&sent, 1, MPI_INT, 2, 6, MPI_COMM_WORLD));
    } else {
        OK(MPI_Recv(&sent, 1, MPI_INT, 3, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int i = 0; i < sent; i++) {
            OK(MPI_Recv(buf, MSG, MPI_CHAR, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(buf[0] == (char)(i + 1) && buf[MSG - 1] == (char)(i + 1), "message %d holds %d", i, buf[0]);
        }
    }
}

static void not_send_deterministic(int rank, int size) {
    struct {
        int iter;
    } s = {0};
    ft_restore(&s, sizeof s);
    while (s.iter < ITERS) {
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        int mine = rank * 100 + s.iter + (restarted ? 7 : 0), got = -1;
        MPI_Sendrecv(&mine, 1, MPI_INT, next, 2, &got, 1, MPI_INT, prev, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int v = 1, w = 0;
        MPI_Allreduce(&v, &w, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        s.iter++;
        if (s.iter == EVERY) MPIX_Checkpoint(&s, sizeof s);
        if (rank == 3 && !restarted && s.iter == KILL_AT) raise(SIGKILL);
    }
}

int main(int argc, char **argv) {
    int rank, size;
    ft_init(&argc, &argv, &rank, &size);
    CHECK(size == 4, "4 ranks, not %d", size);
    const char *mode = getenv("FT_ERRORS");
    CHECK(mode != NULL, "FT_ERRORS is not set");
    if (strcmp(mode, "log") == 0) {
        log_exhausted(rank);
    } else {
        CHECK(strcmp(mode, "determinism") == 0, "FT_ERRORS=%s", mode);
        not_send_deterministic(rank, size);
        CHECK(0, "the re-executed sends with other contents were not detected");
    }
    printf("OK ft_errors %d\n", rank);
    MPI_Finalize();
    return 0;
}
