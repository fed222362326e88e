/* A token around the ring, several laps, with blocking send/receive, then with
 * MPI_Isend/MPI_Irecv, then with MPI_Sendrecv; a message to oneself on MPI_COMM_SELF and on
 * MPI_COMM_WORLD. Works from 1 rank up. Prints "OK ring <rank>". */
#include "check.h"

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    enum { LAPS = 5 };
    /* Blocking: rank 0 starts, everyone adds its rank. */
    long token = 0;
    for (int lap = 0; lap < LAPS; lap++) {
        MPI_Status st;
        if (rank == 0) {
            token += 1;
            OK(MPI_Send(&token, 1, MPI_LONG, next, lap, MPI_COMM_WORLD));
            OK(MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, &st));
        } else {
            OK(MPI_Recv(&token, 1, MPI_LONG, prev, lap, MPI_COMM_WORLD, &st));
            token += rank + 1;
            OK(MPI_Send(&token, 1, MPI_LONG, next, lap, MPI_COMM_WORLD));
        }
        CHECK(st.MPI_SOURCE == prev && st.MPI_TAG == lap, "status source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
    }
    if (rank == 0) {
        long want = (long)LAPS * size * (size + 1) / 2;
        CHECK(token == want, "token %ld, expected %ld", token, want);
    }
    /* Non-blocking: everyone passes its value to the next, size - 1 times: all values seen. */
    long mine = rank * 1000 + 7, carry = mine, sum = mine;
    for (int step = 0; step < size - 1; step++) {
        long in = -1;
        MPI_Request r[2];
        OK(MPI_Irecv(&in, 1, MPI_LONG, prev, 50, MPI_COMM_WORLD, &r[0]));
        OK(MPI_Isend(&carry, 1, MPI_LONG, next, 50, MPI_COMM_WORLD, &r[1]));
        OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
        CHECK(r[0] == MPI_REQUEST_NULL && r[1] == MPI_REQUEST_NULL, "requests not nulled");
        carry = in;
        sum += in;
    }
    long all = 0;
    for (int r = 0; r < size; r++) all += r * 1000 + 7;
    CHECK(sum == all, "ring sum %ld, expected %ld", sum, all);
    /* Sendrecv around the ring (with ANY_SOURCE). */
    int got = -1;
    MPI_Status st;
    OK(MPI_Sendrecv(&rank, 1, MPI_INT, next, 60, &got, 1, MPI_INT, MPI_ANY_SOURCE, 60, MPI_COMM_WORLD, &st));
    CHECK(got == prev && st.MPI_SOURCE == prev, "sendrecv got %d from %d", got, st.MPI_SOURCE);
    /* To oneself. */
    int self_in = 0, self_out = 42 + rank;
    OK(MPI_Send(&self_out, 1, MPI_INT, 0, 3, MPI_COMM_SELF));
    OK(MPI_Recv(&self_in, 1, MPI_INT, 0, 3, MPI_COMM_SELF, &st));
    CHECK(self_in == self_out && st.MPI_SOURCE == 0, "self: %d from %d", self_in, st.MPI_SOURCE);
    OK(MPI_Sendrecv(&self_out, 1, MPI_INT, rank, 4, &self_in, 1, MPI_INT, rank, 4, MPI_COMM_WORLD, &st));
    CHECK(self_in == self_out && st.MPI_SOURCE == rank, "world self: %d from %d", self_in, st.MPI_SOURCE);
    printf("OK ring %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
