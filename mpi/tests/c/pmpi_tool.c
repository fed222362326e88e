/* A profiling tool as a shared library (built with mpicc -shared -fPIC, loaded with LD_PRELOAD):
 * counts MPI_Send and MPI_Recv calls and reports them from its MPI_Finalize, as
 * "tool: rank R: S MPI_Send, V MPI_Recv". */
#include <mpi.h>
#include <stdio.h>

static int sends, recvs;

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    sends++;
    return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status) {
    recvs++;
    return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
}

int MPI_Finalize(void) {
    int rank = -1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("tool: rank %d: %d MPI_Send, %d MPI_Recv\n", rank, sends, recvs);
    fflush(stdout);
    return PMPI_Finalize();
}
