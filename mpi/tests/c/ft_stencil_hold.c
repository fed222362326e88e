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

#include "ft_hold.h"

static int hold_checkpoint(const void *buf, size_t len) {
    static long done = 0;
    int rc = MPIX_Checkpoint(buf, len);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rc != MPI_SUCCESS || ++done != hold_after(rank)) return rc;
    hold(rank);
}
