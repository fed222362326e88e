/* Non-blocking operations completed in any order: every rank posts receives from every other
 * rank (distinct tags) and sends in the reverse order; completion by MPI_Waitany, MPI_Testall,
 * MPI_Test and MPI_Wait in a shuffled order, with statuses checked; non-overtaking within a
 * (source, tag); MPI_PROC_NULL and MPI_REQUEST_NULL in the arrays; messages to oneself.
 * Prints "OK nonblocking <rank>". */
#include "check.h"

enum { K = 24 };

static int value(int from, int to, int k) { return from * 10000 + to * 100 + k; }

int main(int argc, char **argv) {
    int rank, size;
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    int n = size * K;
    int *in = xmalloc(sizeof(int) * (size_t)n), *out = xmalloc(sizeof(int) * (size_t)n);
    MPI_Request *rr = xmalloc(sizeof(MPI_Request) * (size_t)n), *sr = xmalloc(sizeof(MPI_Request) * (size_t)n);
    MPI_Status *st = xmalloc(sizeof(MPI_Status) * (size_t)n);

    for (int mode = 0; mode < 3; mode++) {
        /* Receives from everyone (oneself included), tag k. */
        for (int p = 0; p < size; p++)
            for (int k = 0; k < K; k++) {
                in[p * K + k] = -1;
                OK(MPI_Irecv(&in[p * K + k], 1, MPI_INT, p, k, MPI_COMM_WORLD, &rr[p * K + k]));
            }
        /* Sends in reverse tag order, to the peers in rotated order. */
        for (int j = 0; j < size; j++) {
            int p = (rank + j) % size;
            for (int k = K - 1; k >= 0; k--) {
                out[p * K + k] = value(rank, p, k);
                OK(MPI_Isend(&out[p * K + k], 1, MPI_INT, p, k, MPI_COMM_WORLD, &sr[p * K + k]));
            }
        }
        if (mode == 0) {
            /* Waitany until all done: each completion names its request. */
            for (int done = 0; done < n; done++) {
                int idx = -1;
                MPI_Status s;
                OK(MPI_Waitany(n, rr, &idx, &s));
                CHECK(idx >= 0 && idx < n && rr[idx] == MPI_REQUEST_NULL, "waitany index %d", idx);
                int p = idx / K, k = idx % K;
                CHECK(s.MPI_SOURCE == p && s.MPI_TAG == k, "waitany status %d/%d for %d/%d", s.MPI_SOURCE, s.MPI_TAG, p, k);
                CHECK(in[idx] == value(p, rank, k), "waitany data %d", in[idx]);
            }
            int idx = 0;
            OK(MPI_Waitany(n, rr, &idx, MPI_STATUS_IGNORE));
            CHECK(idx == MPI_UNDEFINED, "waitany on all-null requests gave %d", idx);
        } else if (mode == 1) {
            /* Testall until true; then every status. */
            int flag = 0, spins = 0;
            while (!flag) {
                OK(MPI_Testall(n, rr, &flag, st));
                spins++;
            }
            for (int i = 0; i < n; i++) {
                CHECK(rr[i] == MPI_REQUEST_NULL, "testall left request %d", i);
                CHECK(st[i].MPI_SOURCE == i / K && st[i].MPI_TAG == i % K && st[i].MPI_ERROR == MPI_SUCCESS,
                      "testall status %d", i);
                CHECK(in[i] == value(i / K, rank, i % K), "testall data %d", i);
            }
        } else {
            /* Test and Wait, in a scrambled order (a stride prime to n). */
            for (int j = 0; j < n; j++) {
                int i = (j * 7 + 3) % n;
                if (n % 7 == 0) i = n - 1 - j;
                int flag = 0;
                MPI_Status s;
                OK(MPI_Test(&rr[i], &flag, &s));
                if (!flag) OK(MPI_Wait(&rr[i], &s));
                CHECK(rr[i] == MPI_REQUEST_NULL, "test/wait left request %d", i);
                CHECK(s.MPI_SOURCE == i / K && s.MPI_TAG == i % K, "test/wait status %d", i);
                CHECK(in[i] == value(i / K, rank, i % K), "test/wait data %d", i);
            }
        }
        OK(MPI_Waitall(n, sr, MPI_STATUSES_IGNORE));
        for (int i = 0; i < n; i++) CHECK(sr[i] == MPI_REQUEST_NULL, "send request %d not nulled", i);
        OK(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* Non-overtaking: same source, same tag, received in the order sent, whatever the sizes. */
    if (size > 1) {
        int peer = rank ^ 1;
        if (peer < size) {
            enum { M = 40 };
            static int big[M][3000];
            MPI_Request reqs[M];
            for (int m = 0; m < M; m++) OK(MPI_Irecv(big[m], 3000, MPI_INT, peer, 3, MPI_COMM_WORLD, &reqs[m]));
            for (int m = 0; m < M; m++) {
                int len = m % 3 == 0 ? 3000 : m % 3 == 1 ? 1 : 100;
                int *msg = xmalloc(sizeof(int) * (size_t)len);
                for (int i = 0; i < len; i++) msg[i] = m;
                OK(MPI_Send(msg, len, MPI_INT, peer, 3, MPI_COMM_WORLD));
                free(msg);
            }
            MPI_Status ss[M];
            OK(MPI_Waitall(M, reqs, ss));
            for (int m = 0; m < M; m++) {
                int count;
                OK(MPI_Get_count(&ss[m], MPI_INT, &count));
                CHECK(count == (m % 3 == 0 ? 3000 : m % 3 == 1 ? 1 : 100), "message %d has %d ints", m, count);
                CHECK(big[m][0] == m && big[m][count - 1] == m, "message %d overtaken (holds %d)", m, big[m][0]);
            }
        }
    }

    /* MPI_PROC_NULL and MPI_REQUEST_NULL. */
    MPI_Request q[3];
    int x = 1, y = 2;
    OK(MPI_Isend(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &q[0]));
    OK(MPI_Irecv(&y, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &q[1]));
    q[2] = MPI_REQUEST_NULL;
    MPI_Status s3[3];
    OK(MPI_Waitall(3, q, s3));
    CHECK(s3[1].MPI_SOURCE == MPI_PROC_NULL && s3[1].MPI_TAG == MPI_ANY_TAG && y == 2, "proc null receive");
    CHECK(s3[2].MPI_SOURCE == MPI_ANY_SOURCE && s3[2].MPI_TAG == MPI_ANY_TAG, "null request: empty status");
    int flag = 0;
    MPI_Request none = MPI_REQUEST_NULL;
    OK(MPI_Test(&none, &flag, MPI_STATUS_IGNORE));
    CHECK(flag == 1, "test of a null request");
    OK(MPI_Wait(&none, MPI_STATUS_IGNORE));
    OK(MPI_Testall(0, NULL, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag == 1, "testall of nothing");

    free(in);
    free(out);
    free(rr);
    free(sr);
    free(st);
    printf("OK nonblocking %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
