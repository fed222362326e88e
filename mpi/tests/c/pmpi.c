/* The profiling interface: this program defines its own MPI_Send, MPI_Recv, MPI_Bcast and
 * MPI_Allreduce that count their calls and forward to the PMPI_ versions. The counts must be
 * exactly the program's calls (the library's collectives must not go through MPI_Send), and the
 * data must arrive. Prints "OK pmpi <rank>". */
#include "check.h"

static int sends, recvs, bcasts, allreduces;

int MPI_Send(const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
    sends++;
    return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

int MPI_Recv(void *buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status) {
    recvs++;
    return PMPI_Recv(buf, count, datatype, source, tag, comm, status);
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    bcasts++;
    return PMPI_Bcast(buffer, count, datatype, root, comm);
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    allreduces++;
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, v = rank, w = -1;
    for (int i = 0; i < 3; i++) {
        OK(MPI_Send(&v, 1, MPI_INT, next, i, MPI_COMM_WORLD));
        OK(MPI_Recv(&w, 1, MPI_INT, prev, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(w == prev, "ring value %d", w);
    }
    int b = rank == 0 ? 99 : 0;
    OK(MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD));
    OK(MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD));
    CHECK(b == 99, "bcast %d", b);
    int sum = 0;
    OK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == size * (size - 1) / 2, "allreduce %d", sum);
    int g[64];
    OK(MPI_Gather(&v, 1, MPI_INT, g, 1, MPI_INT, 0, MPI_COMM_WORLD));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    /* Calls not wrapped go straight to the library. */
    OK(PMPI_Send(&v, 1, MPI_INT, next, 77, MPI_COMM_WORLD));
    OK(PMPI_Recv(&w, 1, MPI_INT, prev, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(sends == 3 && recvs == 3 && bcasts == 2 && allreduces == 1,
          "intercepted %d sends, %d receives, %d broadcasts, %d allreduces; expected 3, 3, 2, 1", sends, recvs, bcasts,
          allreduces);
    printf("OK pmpi %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
