/* What the fault-tolerance test programs share: their start (ft_init), whether this process is a
 * restarted incarnation, the restore-or-start of their state (ft_restore), a hold at a point the
 * test chose, so that a kill lands there and never races a clock (hold_after, hold, and
 * checkpoint_then_hold for both), and the crash points of a libmpi built with the `failpoints`
 * feature (arm_failpoints). */
#ifndef FT_HOLD_H
#define FT_HOLD_H

#include "check.h"

#include <time.h>
#include <unistd.h>

/* Whether this is a restarted incarnation (read before MPI_Init takes NEMESIS_FT_RESTART out of
 * the environment of a single-threaded process). */
static int restarted;

__attribute__((constructor)) static void read_restart(void) { restarted = getenv("NEMESIS_FT_RESTART") != NULL; }

/* MPI_Init, this rank and the size of MPI_COMM_WORLD, and CHECK's rank. */
__attribute__((unused)) static void ft_init(int *argc, char ***argv, int *rank, int *size) {
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    check_rank = *rank;
}

/* MPIX_Checkpoint_restore, right after MPI_Init: on a restarted incarnation copies the state it
 * restarted from (exactly `size` bytes, or the rank fails) to `state` and returns 1; on a fresh
 * start leaves `state` alone and returns 0 (the caller makes its state). A failed restore ends the
 * job with its reason: MPI_COMM_WORLD's error handler is MPI_ERRORS_ARE_FATAL during the call
 * (the library's fatal message names why; an error string names only the class), then the one
 * the restore put back, or on a fresh start the one it had before. */
__attribute__((unused)) static int ft_restore(void *state, size_t size) {
    void *buf;
    size_t len;
    int restored;
    MPI_Errhandler eh;
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    int rc = MPIX_Checkpoint_restore(&buf, &len, &restored);
    if (rc != MPI_SUCCESS) {
        char why[MPI_MAX_ERROR_STRING];
        int n = 0;
        if (MPI_Error_string(rc, why, &n) != MPI_SUCCESS) snprintf(why, sizeof why, "error %d", rc);
        CHECK(rc == MPI_SUCCESS, "MPIX_Checkpoint_restore returned: %s", why);
    }
    /* A restored MPI_COMM_WORLD has the handler it had at the checkpoint. */
    if (!restored) OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh));
    if (eh != MPI_ERRORS_ARE_FATAL && eh != MPI_ERRORS_RETURN) OK(MPI_Errhandler_free(&eh));
    if (!restored) return 0;
    CHECK(len == size, "restored %zu bytes, want %zu", len, size);
    memcpy(state, buf, size);
    free(buf);
    return 1;
}

/* FT_TEST_HOLD=<rank>:<n>,...: the checkpoint after which this rank's first incarnation holds
 * (0: none). */
__attribute__((unused)) static long hold_after(int rank) {
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

/* Writes this process's pid to FT_TEST_DIR/<name> (a temporary file renamed into place: the test
 * never reads half a pid) and serves its endpoint (MPI_Iprobe) until the test kills it. */
__attribute__((unused, noreturn)) static void hold_as(const char *name) {
    const char *dir = getenv("FT_TEST_DIR");
    char tmp[4096], marker[4096];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir ? dir : ".", name);
    snprintf(marker, sizeof marker, "%s/%s", dir ? dir : ".", name);
    FILE *f = fopen(tmp, "w");
    CHECK(f != NULL && fprintf(f, "%ld\n", (long)getpid()) > 0 && fclose(f) == 0 && rename(tmp, marker) == 0,
          "cannot write %s", marker);
    for (;;) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 32000, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

/* Holds with the marker FT_TEST_DIR/held-<rank>. */
__attribute__((unused, noreturn)) static void hold(int rank) {
    char name[64];
    snprintf(name, sizeof name, "held-%d", rank);
    hold_as(name);
}

/* MPIX_Checkpoint of `size` bytes at `state`, then the hold FT_TEST_HOLD names for this rank's
 * first incarnation after its n-th checkpoint (hold_after). */
__attribute__((unused)) static void checkpoint_then_hold(const void *state, size_t size, int rank) {
    static long checkpoints;
    OK(MPIX_Checkpoint(state, size));
    if (++checkpoints == hold_after(rank)) hold(rank);
}

/* The hook of a libmpi built with the `failpoints` feature (mpi/src/ft/failpoint.rs): weak, so
 * null with a normal libmpi. */
extern int nemesis_failpoint_arm(const char *point, unsigned long long nth, int stop, const char *record)
    __attribute__((weak));

/* FT_TEST_FP=<rank>@<iteration>:<point>:<k|s>,...: at `iteration` (the caller's count) the first
 * incarnation of `rank` arms `point` of the library (`k`: its next hit SIGKILLs the process, `s`:
 * SIGSTOPs it), which records `hit <point> <pid>` in FT_TEST_DIR/failpoints first. A rank that is
 * to arm a point in a libmpi without the hook fails. */
__attribute__((unused)) static void arm_failpoints(int rank, int iteration) {
    const char *spec = getenv("FT_TEST_FP");
    if (spec == NULL || restarted) return;
    while (*spec != '\0') {
        char *end, point[64], action = 0;
        long r = strtol(spec, &end, 10);
        CHECK(*end == '@', "FT_TEST_FP: %s", spec);
        long it = strtol(end + 1, &end, 10);
        size_t n = *end == ':' ? strcspn(end + 1, ":") : 0;
        CHECK(n > 0 && n < sizeof point && end[1 + n] == ':', "FT_TEST_FP: %s", spec);
        memcpy(point, end + 1, n);
        point[n] = '\0';
        action = end[2 + n];
        CHECK((action == 'k' || action == 's') && (end[3 + n] == ',' || end[3 + n] == '\0'), "FT_TEST_FP: %s", spec);
        if (r == rank && it == iteration) {
            CHECK(nemesis_failpoint_arm != NULL, "FT_TEST_FP: this libmpi has no crash points (build it with "
                                                 "--features failpoints)");
            const char *dir = getenv("FT_TEST_DIR");
            char record[4096];
            snprintf(record, sizeof record, "%s/failpoints", dir ? dir : ".");
            OK(nemesis_failpoint_arm(point, 1, action == 's', record));
        }
        spec = end + 3 + n;
        if (*spec == ',') spec++;
    }
}

#endif
