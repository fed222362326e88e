/* MPI_THREAD_MULTIPLE: 4 threads per rank call MPI at the same time. Each thread sends to every
 * other rank and receives from MPI_ANY_SOURCE with its own tags (one per thread and iteration, so
 * that synchronous and rendezvous sends cannot wait on a receive that took a later iteration's
 * message), in its own way (thread 0: Send and Recv; 1: Isend/Irecv/Waitall, some messages past the
 * eager limit; 2: Sendrecv; 3: Issend with Mprobe/Mrecv), checking that every message comes from
 * the thread, iteration and source the status says, each source once per iteration; every
 * 25 iterations it runs an Allreduce on a communicator of its own while the others go on
 * exchanging (a collective that waited holding the library's lock would stop them); at the end all
 * threads create communicators at once (MPI_Comm_dup) and use them, which needs their contexts to
 * differ. NEMESIS_TEST_ITERS sets the iterations (default 200). Prints "OK threads <rank>". */
#include <pthread.h>
#include <stdint.h>

#include "check.h"

enum { NT = 4, BIG = 100000 };

static int rank, nranks, iters = 200;
static MPI_Comm comms[NT];

struct msg {
    int src, thread, iter;
    int pad[5];
};

/* The message rank `src`'s thread `t` sends in iteration `i`: a header, and for the large ones a
 * payload of BIG bytes whose contents depend on all three. */
static int big_iter(int t, int i) { return t == 1 && i % 10 == 3; }

static void fill(unsigned char *b, int src, int t, int i) {
    struct msg m = {src, t, i, {0}};
    memcpy(b, &m, sizeof m);
    if (big_iter(t, i))
        for (int k = sizeof m; k < BIG; k++) b[k] = (unsigned char)(src * 7 + t * 13 + i + k);
}

/* The tag of thread `t`'s messages in iteration `i`. */
static int tag_of(int t, int i) { return t + NT * i; }

static void check(const unsigned char *b, int len, int t, int i, char *seen, MPI_Status *st) {
    struct msg m;
    memcpy(&m, b, sizeof m);
    CHECK(m.thread == t && m.iter == i, "thread %d iteration %d got thread %d's iteration %d (from %d)", t, i,
          m.thread, m.iter, m.src);
    CHECK(m.src == st->MPI_SOURCE && st->MPI_TAG == tag_of(t, i), "status source %d tag %d for a message of %d",
          st->MPI_SOURCE, st->MPI_TAG, m.src);
    CHECK(m.src != rank && !seen[m.src], "thread %d iteration %d: a second message from %d", t, i, m.src);
    seen[m.src] = 1;
    int want = big_iter(t, m.iter) ? BIG : (int)sizeof m;
    CHECK(len == want, "thread %d: length %d, expected %d", t, len, want);
    if (want == BIG)
        for (int k = sizeof m; k < BIG; k++)
            CHECK(b[k] == (unsigned char)(m.src * 7 + t * 13 + m.iter + k), "payload byte %d", k);
}

static void *worker(void *arg) {
    int t = (int)(intptr_t)arg;
    int flag = -1;
    OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 0, "thread %d is not the main thread", t);
    int peers = nranks - 1;
    unsigned char *out = xmalloc(BIG), *in = xmalloc((size_t)BIG * (size_t)nranks);
    char *seen = calloc((size_t)nranks, 1);
    MPI_Request *reqs = xmalloc(sizeof(MPI_Request) * (size_t)(2 * nranks));
    MPI_Status *sts = xmalloc(sizeof(MPI_Status) * (size_t)(2 * nranks));
    for (int i = 0; i < iters; i++) {
        fill(out, rank, t, i);
        int len = big_iter(t, i) ? BIG : (int)sizeof(struct msg);
        int k = 0, tag = tag_of(t, i);
        memset(seen, 0, (size_t)nranks);
        switch (t) {
        case 0: /* blocking: small messages only (they complete without the receiver) */
            for (int p = 0; p < nranks; p++)
                if (p != rank) OK(MPI_Send(out, len, MPI_BYTE, p, tag, MPI_COMM_WORLD));
            for (int j = 0; j < peers; j++) {
                int n = 0;
                OK(MPI_Recv(in, BIG, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &sts[0]));
                OK(MPI_Get_count(&sts[0], MPI_BYTE, &n));
                check(in, n, t, i, seen, &sts[0]);
            }
            break;
        case 1: /* non-blocking, large messages among them */
            for (int j = 0; j < peers; j++)
                OK(MPI_Irecv(in + (size_t)j * BIG, BIG, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &reqs[k++]));
            for (int p = 0; p < nranks; p++)
                if (p != rank) OK(MPI_Isend(out, len, MPI_BYTE, p, tag, MPI_COMM_WORLD, &reqs[k++]));
            OK(MPI_Waitall(k, reqs, sts));
            for (int j = 0; j < peers; j++) {
                int n = 0;
                OK(MPI_Get_count(&sts[j], MPI_BYTE, &n));
                check(in + (size_t)j * BIG, n, t, i, seen, &sts[j]);
            }
            break;
        case 2: /* Sendrecv: to the next rank, from any */
            for (int j = 0; j < peers; j++) {
                int to = (rank + 1 + j) % nranks, n = 0;
                OK(MPI_Sendrecv(out, len, MPI_BYTE, to, tag, in, BIG, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD,
                                &sts[0]));
                OK(MPI_Get_count(&sts[0], MPI_BYTE, &n));
                check(in, n, t, i, seen, &sts[0]);
            }
            break;
        default: /* synchronous sends; matched probes take exactly the probed message */
            for (int p = 0; p < nranks; p++)
                if (p != rank) OK(MPI_Issend(out, len, MPI_BYTE, p, tag, MPI_COMM_WORLD, &reqs[k++]));
            for (int j = 0; j < peers; j++) {
                MPI_Message m;
                int n = 0;
                OK(MPI_Mprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &m, &sts[0]));
                OK(MPI_Get_count(&sts[0], MPI_BYTE, &n));
                OK(MPI_Mrecv(in, n, MPI_BYTE, &m, &sts[0]));
                check(in, n, t, i, seen, &sts[0]);
            }
            OK(MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE));
            break;
        }
        if (i % 25 == 24) {
            /* A collective on this thread's communicator while the other threads exchange. */
            int v = i + rank, sum = -1;
            OK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, comms[t]));
            CHECK(sum == i * nranks + nranks * (nranks - 1) / 2, "thread %d allreduce %d", t, sum);
        }
    }
    /* Every thread creates a communicator at once; each must get its own context. */
    MPI_Comm mine;
    OK(MPI_Comm_dup(comms[t], &mine));
    int key = t;
    MPI_Comm split;
    OK(MPI_Comm_split(mine, rank % 2, rank, &split));
    for (int round = 0; round < 20; round++) {
        struct msg m = {rank, t, round, {0}}, got;
        MPI_Status st;
        OK(MPI_Sendrecv(&m, sizeof m, MPI_BYTE, (rank + 1) % nranks, key, &got, sizeof got, MPI_BYTE, MPI_ANY_SOURCE,
                        MPI_ANY_TAG, mine, &st));
        CHECK(got.thread == t && st.MPI_TAG == t && got.iter == round, "thread %d: a message of thread %d crossed",
              t, got.thread);
        int one = 1, n = 0, size = 0;
        OK(MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, split));
        OK(MPI_Comm_size(split, &size));
        CHECK(n == size, "thread %d: split allreduce %d of %d", t, n, size);
    }
    OK(MPI_Comm_free(&split));
    OK(MPI_Comm_free(&mine));
    free(out);
    free(in);
    free(seen);
    free(reqs);
    free(sts);
    return NULL;
}

int main(int argc, char **argv) {
    int provided = -1;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    check_rank = rank;
    CHECK(nranks >= 2, "needs 2 ranks");
    const char *e = getenv("NEMESIS_TEST_ITERS");
    if (e) iters = atoi(e);
    for (int t = 0; t < NT; t++) OK(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]));
    pthread_t th[NT];
    for (int t = 0; t < NT; t++) CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
    for (int t = 0; t < NT; t++) OK(MPI_Comm_free(&comms[t]));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK threads %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
