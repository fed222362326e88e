/* Non-blocking collectives against results computed locally: every MPI_I* collective at counts 1
 * and 3000 (past the eager limit), every root class, in place where allowed; several in flight at
 * once completed in reverse order with MPI_Waitall and by MPI_Test loops; a non-blocking barrier
 * interleaved with point-to-point messages the way only a real non-blocking one survives (rank 0
 * starts it, then sends to rank 1, which receives before starting it); a non-commutative user
 * operation in MPI_Ireduce and MPI_Iscan (rank order); a broadcast that advances while its rank
 * tests another request, and while it waits in each blocking call; MPI_Cancel of one is an error.
 * Prints "OK nbc <rank>". */
#include <unistd.h>

#include "affine.h"

static int rank, size;

static int v(int r, int i) { return r * 1000 + i % 997; }

/* Completes `r` by MPI_Test in a loop (the schedule advances at each call). */
static void test_until_done(MPI_Request *r) {
    int flag = 0;
    long spins = 0;
    while (!flag) {
        OK(MPI_Test(r, &flag, MPI_STATUS_IGNORE));
        CHECK(++spins < 2000000000L, "MPI_Test never completed");
    }
    CHECK(*r == MPI_REQUEST_NULL, "a completed request is not freed");
}

static void test_all(int n) {
    MPI_Request r;
    size_t cap = (size_t)n * (size_t)size + (size_t)size * (size_t)size + 16;
    int *a = xmalloc(sizeof(int) * cap), *b = xmalloc(sizeof(int) * cap);
    int *cnt = xmalloc(sizeof(int) * (size_t)size), *dsp = xmalloc(sizeof(int) * (size_t)size);
    for (int root = 0; root < size; root += size > 2 ? size - 1 : 1) {
        /* Ibcast. */
        for (int i = 0; i < n; i++) a[i] = rank == root ? v(root, i) : -1;
        OK(MPI_Ibcast(a, n, MPI_INT, root, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int i = 0; i < n; i++) CHECK(a[i] == v(root, i), "ibcast root %d [%d] = %d", root, i, a[i]);
        /* Ireduce, in place at the root on alternate roots. */
        int in_place = root % 2 == 1;
        for (int i = 0; i < n; i++) a[i] = v(rank, i);
        if (rank == root && in_place) memcpy(b, a, sizeof(int) * (size_t)n);
        OK(MPI_Ireduce(rank == root && in_place ? MPI_IN_PLACE : a, b, n, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD, &r));
        test_until_done(&r);
        if (rank == root)
            for (int i = 0; i < n; i++) {
                int want = 0;
                for (int q = 0; q < size; q++) want += v(q, i);
                CHECK(b[i] == want, "ireduce root %d [%d] = %d, want %d", root, i, b[i], want);
            }
        /* Igather / Iscatter. */
        for (int i = 0; i < n; i++) a[i] = v(rank, i);
        OK(MPI_Igather(a, n, MPI_INT, b, n, MPI_INT, root, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        if (rank == root)
            for (int q = 0; q < size; q++)
                for (int i = 0; i < n; i++) CHECK(b[q * n + i] == v(q, i), "igather block %d [%d]", q, i);
        if (rank == root)
            for (int q = 0; q < size; q++)
                for (int i = 0; i < n; i++) a[q * n + i] = v(q + 5, i);
        for (int i = 0; i < n; i++) b[i] = -1;
        OK(MPI_Iscatter(a, n, MPI_INT, b, n, MPI_INT, root, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int i = 0; i < n; i++) CHECK(b[i] == v(rank + 5, i), "iscatter [%d] = %d", i, b[i]);
        /* Igatherv / Iscatterv with counts growing by rank. */
        for (int q = 0, at = 0; q < size; q++) {
            cnt[q] = n / (q + 1) + q;
            dsp[q] = at;
            at += cnt[q];
        }
        for (int i = 0; i < cnt[rank]; i++) a[i] = v(rank, i);
        OK(MPI_Igatherv(a, cnt[rank], MPI_INT, b, cnt, dsp, MPI_INT, root, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        if (rank == root)
            for (int q = 0; q < size; q++)
                for (int i = 0; i < cnt[q]; i++) CHECK(b[dsp[q] + i] == v(q, i), "igatherv block %d [%d]", q, i);
        OK(MPI_Iscatterv(b, cnt, dsp, MPI_INT, a, cnt[rank], MPI_INT, root, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int i = 0; i < cnt[rank]; i++) CHECK(a[i] == v(rank, i), "iscatterv [%d]", i);
    }
    /* Iallreduce (in place too), Iallgather(v), Ialltoall(v/w), Ireduce_scatter(_block), Iscan, Iexscan. */
    for (int in_place = 0; in_place < 2; in_place++) {
        for (int i = 0; i < n; i++) (in_place ? b : a)[i] = v(rank, i);
        OK(MPI_Iallreduce(in_place ? MPI_IN_PLACE : a, b, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int i = 0; i < n; i++) CHECK(b[i] == v(size - 1, i), "iallreduce (in place %d) [%d]", in_place, i);
        for (int i = 0; i < n; i++) (in_place ? b + rank * n : a)[i] = v(rank, i);
        OK(MPI_Iallgather(in_place ? MPI_IN_PLACE : a, n, MPI_INT, b, n, MPI_INT, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int q = 0; q < size; q++)
            for (int i = 0; i < n; i++) CHECK(b[q * n + i] == v(q, i), "iallgather (in place %d)", in_place);
        int *src = in_place ? b : a;
        for (int q = 0; q < size; q++)
            for (int i = 0; i < n; i++) src[q * n + i] = v(rank * 10 + q, i);
        OK(MPI_Ialltoall(in_place ? MPI_IN_PLACE : a, n, MPI_INT, b, n, MPI_INT, MPI_COMM_WORLD, &r));
        test_until_done(&r);
        for (int q = 0; q < size; q++)
            for (int i = 0; i < n; i++) CHECK(b[q * n + i] == v(q * 10 + rank, i), "ialltoall (in place %d)", in_place);
    }
    for (int q = 0, at = 0; q < size; q++) {
        cnt[q] = (q + rank) % 3 == 0 ? 0 : n / 2 + 1; /* symmetric in (q, rank); zero included */
        dsp[q] = at;
        at += cnt[q];
    }
    for (int q = 0; q < size; q++)
        for (int i = 0; i < cnt[q]; i++) a[dsp[q] + i] = v(rank * 10 + q, i);
    OK(MPI_Ialltoallv(a, cnt, dsp, MPI_INT, b, cnt, dsp, MPI_INT, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int q = 0; q < size; q++)
        for (int i = 0; i < cnt[q]; i++) CHECK(b[dsp[q] + i] == v(q * 10 + rank, i), "ialltoallv from %d [%d]", q, i);
    {
        MPI_Datatype *ty = xmalloc(sizeof(MPI_Datatype) * (size_t)size);
        int *bd = xmalloc(sizeof(int) * (size_t)size);
        for (int q = 0; q < size; q++) {
            ty[q] = MPI_INT;
            bd[q] = dsp[q] * (int)sizeof(int);
        }
        OK(MPI_Ialltoallw(a, cnt, bd, ty, b, cnt, bd, ty, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int q = 0; q < size; q++)
            for (int i = 0; i < cnt[q]; i++) CHECK(b[dsp[q] + i] == v(q * 10 + rank, i), "ialltoallw from %d", q);
        free(ty);
        free(bd);
    }
    for (int q = 0; q < size; q++) cnt[q] = n / 2 + q;
    int total = 0;
    for (int q = 0; q < size; q++) total += cnt[q];
    int *big = xmalloc(sizeof(int) * (size_t)total);
    for (int i = 0; i < total; i++) big[i] = rank + i;
    OK(MPI_Ireduce_scatter(big, b, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    int start = 0;
    for (int q = 0; q < rank; q++) start += cnt[q];
    for (int i = 0; i < cnt[rank]; i++)
        CHECK(b[i] == size * (size - 1) / 2 + size * (start + i), "ireduce_scatter [%d] = %d", i, b[i]);
    free(big);
    for (int i = 0; i < n * size; i++) a[i] = rank + i;
    OK(MPI_Ireduce_scatter_block(a, b, n, MPI_INT, MPI_MIN, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) CHECK(b[i] == rank * n + i, "ireduce_scatter_block [%d]", i);
    for (int i = 0; i < n; i++) a[i] = rank + 1;
    OK(MPI_Iscan(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) CHECK(b[i] == (rank + 1) * (rank + 2) / 2, "iscan [%d] = %d", i, b[i]);
    OK(MPI_Iexscan(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    if (rank > 0)
        for (int i = 0; i < n; i++) CHECK(b[i] == rank * (rank + 1) / 2, "iexscan [%d] = %d", i, b[i]);
    free(a);
    free(b);
    free(cnt);
    free(dsp);
}

static void test_in_flight(int n) {
    /* Four at once, completed in reverse order. */
    MPI_Request r[4];
    int *x = xmalloc(sizeof(int) * (size_t)n), *y = xmalloc(sizeof(int) * (size_t)n);
    int *z = xmalloc(sizeof(int) * (size_t)n * (size_t)size), *w = xmalloc(sizeof(int) * (size_t)n * (size_t)size);
    for (int i = 0; i < n; i++) x[i] = v(rank, i);
    for (int i = 0; i < n * size; i++) z[i] = v(rank, i);
    int bc = rank == size - 1 ? 42 : 0;
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &r[0]));
    OK(MPI_Iallreduce(x, y, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Ibcast(&bc, 1, MPI_INT, size - 1, MPI_COMM_WORLD, &r[2]));
    OK(MPI_Ialltoall(z, n, MPI_INT, w, n, MPI_INT, MPI_COMM_WORLD, &r[3]));
    MPI_Request rev[4] = {r[3], r[2], r[1], r[0]};
    OK(MPI_Waitall(4, rev, MPI_STATUSES_IGNORE));
    for (int k = 0; k < 4; k++) CHECK(rev[k] == MPI_REQUEST_NULL, "waitall left request %d", k);
    CHECK(bc == 42, "ibcast in flight gave %d", bc);
    for (int i = 0; i < n; i++) {
        int want = 0;
        for (int q = 0; q < size; q++) want += v(q, i);
        CHECK(y[i] == want, "iallreduce in flight [%d]", i);
    }
    for (int q = 0; q < size; q++)
        for (int i = 0; i < n; i++) CHECK(w[q * n + i] == v(q, rank * n + i), "ialltoall in flight");
    free(x);
    free(y);
    free(z);
    free(w);
}

static void test_overlap_with_p2p(void) {
    if (size < 2) return;
    MPI_Request r;
    int token = 7;
    if (rank == 0) {
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
        OK(MPI_Send(&token, 1, MPI_INT, 1, 99, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else if (rank == 1) {
        token = 0;
        OK(MPI_Recv(&token, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(token == 7, "token %d", token);
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else {
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    }
}


/* A schedule moves while the program tests something else: in a 4-rank binomial broadcast from
 * rank 0, rank 2 forwards to rank 3 in its second round; rank 2 only tests a receive that rank 3
 * sends once its broadcast is complete, so rank 2's broadcast must advance inside MPI_Test. */
static void test_progress_elsewhere(void) {
    if (size < 4) return;
    MPI_Request b, rr;
    int data = rank == 0 ? 1234 : -1, token = 0;
    OK(MPI_Ibcast(&data, 1, MPI_INT, 0, MPI_COMM_WORLD, &b));
    if (rank == 2) {
        OK(MPI_Irecv(&token, 1, MPI_INT, 3, 77, MPI_COMM_WORLD, &rr));
        int flag = 0;
        while (!flag) OK(MPI_Test(&rr, &flag, MPI_STATUS_IGNORE));
        CHECK(token == 1234, "token %d", token);
    }
    OK(MPI_Wait(&b, MPI_STATUS_IGNORE));
    CHECK(data == 1234, "ibcast gave %d", data);
    if (rank == 3) OK(MPI_Send(&data, 1, MPI_INT, 2, 77, MPI_COMM_WORLD));
}

/* MPI's progress rule in the blocking calls: as above, but rank 2 waits in a blocking call
 * (MPI_Recv, MPI_Probe, MPI_Mprobe, MPI_Wait, MPI_Waitany, MPI_Ssend, a blocking barrier on a
 * communicator of ranks 2 and 3) that completes only once rank 3's broadcast is complete, which
 * needs rank 2 to forward it: each blocking call must advance the schedules in flight. */
static void test_progress_in_blocking_calls(MPI_Comm pair) {
    if (size < 4) return;
    for (int how = 0; how < 8; how++) {
        MPI_Request b, rr;
        int data = rank == 0 ? 4321 + how : -1, token = 0, idx = -1;
        MPI_Status st;
        MPI_Message m;
        /* Rank 0 starts late, so that rank 2's first round is still in flight when it enters
         * the blocking call (else its forwarding round could start inside MPI_Ibcast). */
        if (rank == 0) usleep(20000);
        OK(MPI_Ibcast(&data, 1, MPI_INT, 0, MPI_COMM_WORLD, &b));
        if (rank == 2) {
            switch (how) {
            case 0: OK(MPI_Recv(&token, 1, MPI_INT, 3, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE)); break;
            case 1:
                OK(MPI_Probe(3, 78, MPI_COMM_WORLD, &st));
                OK(MPI_Recv(&token, 1, MPI_INT, 3, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                break;
            case 2:
                OK(MPI_Mprobe(MPI_ANY_SOURCE, 78, MPI_COMM_WORLD, &m, &st));
                OK(MPI_Mrecv(&token, 1, MPI_INT, &m, MPI_STATUS_IGNORE));
                break;
            case 3:
                OK(MPI_Irecv(&token, 1, MPI_INT, 3, 78, MPI_COMM_WORLD, &rr));
                OK(MPI_Wait(&rr, MPI_STATUS_IGNORE));
                break;
            case 4:
                OK(MPI_Irecv(&token, 1, MPI_INT, MPI_ANY_SOURCE, 78, MPI_COMM_WORLD, &rr));
                OK(MPI_Waitany(1, &rr, &idx, MPI_STATUS_IGNORE));
                break;
            case 5: OK(MPI_Recv(&token, 1, MPI_INT, MPI_ANY_SOURCE, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE)); break;
            case 6:
                token = 4321 + how;
                OK(MPI_Ssend(&token, 1, MPI_INT, 3, 78, MPI_COMM_WORLD));
                break;
            case 7:
                OK(MPI_Barrier(pair));
                token = 4321 + how;
                break;
            }
            CHECK(token == 4321 + how, "blocking call %d: token %d", how, token);
        }
        OK(MPI_Wait(&b, MPI_STATUS_IGNORE));
        CHECK(data == 4321 + how, "ibcast %d gave %d", how, data);
        if (rank == 3) {
            if (how == 6) {
                OK(MPI_Recv(&token, 1, MPI_INT, 2, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                CHECK(token == data, "ssend token %d", token);
            } else if (how == 7) {
                OK(MPI_Barrier(pair));
            } else {
                OK(MPI_Send(&data, 1, MPI_INT, 2, 78, MPI_COMM_WORLD));
            }
        }
    }
}

static void test_noncommutative(int n, MPI_Op comp) {
    affine *m = xmalloc(sizeof(affine) * (size_t)n), *res = xmalloc(sizeof(affine) * (size_t)n);
    for (int i = 0; i < n; i++) m[i] = map_of(rank, i);
    MPI_Request r;
    int root = size - 1;
    OK(MPI_Ireduce(m, res, n, MPI_2INT, comp, root, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    if (rank == root)
        for (int i = 0; i < n; i++) {
            affine want = composed(size, i);
            CHECK(res[i].a == want.a && res[i].b == want.b, "non-commutative ireduce [%d]", i);
        }
    OK(MPI_Iscan(m, res, n, MPI_2INT, comp, MPI_COMM_WORLD, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    for (int i = 0; i < n; i++) {
        affine want = composed(rank + 1, i);
        CHECK(res[i].a == want.a && res[i].b == want.b, "non-commutative iscan [%d]", i);
    }
    free(m);
    free(res);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    MPI_Op comp;
    OK(MPI_Op_create(compose, 0, &comp));
    int ns[] = {1, 3000};
    for (int k = 0; k < 2; k++) {
        test_all(ns[k]);
        test_in_flight(ns[k]);
        test_noncommutative(ns[k], comp);
    }
    test_overlap_with_p2p();
    test_progress_elsewhere();
    MPI_Comm pair;
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair));
    test_progress_in_blocking_calls(pair);
    OK(MPI_Comm_free(&pair));
    /* A duplicate communicator numbers its own: collectives on both in flight. */
    MPI_Comm dup;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_Request r[2];
    int s1 = rank, s2 = 2 * rank, t1, t2;
    OK(MPI_Iallreduce(&s1, &t1, 1, MPI_INT, MPI_SUM, dup, &r[0]));
    OK(MPI_Iallreduce(&s2, &t2, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r[1]));
    OK(MPI_Waitall(2, r, MPI_STATUSES_IGNORE));
    CHECK(t1 == size * (size - 1) / 2 && t2 == size * (size - 1), "two communicators: %d %d", t1, t2);
    OK(MPI_Comm_free(&dup));
    /* MPI_Cancel of a non-blocking collective is an error. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &r[0]));
    FAILS_WITH(MPI_Cancel(&r[0]), MPI_ERR_REQUEST);
    OK(MPI_Wait(&r[0], MPI_STATUS_IGNORE));
    OK(MPI_Op_free(&comp));
    printf("OK nbc %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
