/* mpi/examples/ft_stencil.c whose ranks hold where the test says, to be killed there and not at a
 * time the job may beat: FT_TEST_HOLD=<rank>:<n>,... makes that rank's first incarnation (no
 * NEMESIS_FT_RESTART at its start) stop after its n-th MPIX_Checkpoint, write its pid to
 * FT_TEST_DIR/held-<rank> and wait to be killed, serving its endpoint (MPI_Iprobe of a tag nobody
 * sends) but computing nothing. Every MPIX_Checkpoint of the example goes through hold_checkpoint
 * below. */
#include <mpi.h>
#include <stddef.h>

static int hold_checkpoint(const void *buf, size_t len);

#define MPIX_Checkpoint hold_checkpoint
#include "../../examples/ft_stencil.c"
#undef MPIX_Checkpoint

#include <time.h>
#include <unistd.h>

/* Whether this is a restarted incarnation: read before MPI_Init, which takes NEMESIS_FT_RESTART
 * out of the environment of a single-threaded process. */
static int restarted;

__attribute__((constructor)) static void read_restart(void) { restarted = getenv("NEMESIS_FT_RESTART") != NULL; }

/* The checkpoint after which this rank holds (0: none). */
static long hold_after(int rank) {
    const char *spec = getenv("FT_TEST_HOLD");
    if (spec == NULL || restarted) return 0;
    while (*spec != '\0') {
        char *end;
        long r = strtol(spec, &end, 10);
        if (*end != ':') return 0;
        long n = strtol(end + 1, &end, 10);
        if (r == rank) return n;
        if (*end != ',') return 0;
        spec = end + 1;
    }
    return 0;
}

static int hold_checkpoint(const void *buf, size_t len) {
    static long done = 0;
    int rc = MPIX_Checkpoint(buf, len);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rc != MPI_SUCCESS || ++done != hold_after(rank)) return rc;
    const char *dir = getenv("FT_TEST_DIR");
    char tmp[4096], marker[4096];
    snprintf(tmp, sizeof tmp, "%s/held-%d.tmp", dir ? dir : ".", rank);
    snprintf(marker, sizeof marker, "%s/held-%d", dir ? dir : ".", rank);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0 || rename(tmp, marker) != 0) {
        fprintf(stderr, "ft_stencil_hold: cannot write %s\n", marker);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (;;) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 32000, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}
