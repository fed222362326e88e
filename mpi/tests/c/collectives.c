/* Every collective against results computed locally, for several counts (0 up to past the eager
 * limit, so transfers are cut in pieces), every root class (first, middle, last), several
 * datatypes and every operation, MPI_IN_PLACE where the standard allows it; and the barrier's
 * ordering. Algorithms are chosen by the model unless NEMESIS_COLL_ALG forces them (the Rust
 * driver runs every variant). Prints "OK collectives <rank>". */
#include "check.h"
#include <stdint.h>
#include <unistd.h>

static int rank, size;
static const int counts[] = {0, 1, 7, 100, 4099, 20000};
enum { NCOUNTS = sizeof(counts) / sizeof(counts[0]) };

/* Values: small exact integers, so every reduction is exact whatever the combining order. */
static int ival(int r, int i) { return (r * 37 + i * 11) % 101 - 50; }
static double dval(int r, int i) { return (double)((r * 13 + i * 7) % 59) - 29.0; }
static uint64_t uval(int r, int i) { return (uint64_t)(r * 3 + i % 5 + 1); }
static unsigned bits(int r, int i) { return (1u << ((r + i) % 32)) | (unsigned)(i & 0xf0); }

static void roots(int *out, int *n) {
    int cand[3] = {0, size / 2, size - 1};
    *n = 0;
    for (int k = 0; k < 3; k++) {
        int dup = 0;
        for (int j = 0; j < *n; j++) dup |= out[j] == cand[k];
        if (!dup) out[(*n)++] = cand[k];
    }
}

static void test_barrier(void) {
    /* Nobody leaves the barrier before the last rank entered it (one clock on a node). */
    for (int late = 0; late < size; late += size > 2 ? size - 1 : 1) {
        double entered = 0;
        if (rank == late) {
            usleep(20000);
            entered = MPI_Wtime();
        }
        OK(MPI_Barrier(MPI_COMM_WORLD));
        double left = MPI_Wtime();
        OK(MPI_Bcast(&entered, 1, MPI_DOUBLE, late, MPI_COMM_WORLD));
        CHECK(left >= entered, "left the barrier at %f before rank %d entered at %f", left, late, entered);
    }
}

static void test_bcast(int count) {
    int rs[3], nr;
    roots(rs, &nr);
    int *ib = xmalloc(sizeof(int) * (size_t)count);
    double *db = xmalloc(sizeof(double) * (size_t)count);
    char *cb = xmalloc((size_t)count);
    for (int k = 0; k < nr; k++) {
        int root = rs[k];
        for (int i = 0; i < count; i++) {
            ib[i] = rank == root ? ival(root, i) : -999;
            db[i] = rank == root ? dval(root, i) : -999;
            cb[i] = rank == root ? (char)('a' + i % 26) : 0;
        }
        OK(MPI_Bcast(ib, count, MPI_INT, root, MPI_COMM_WORLD));
        OK(MPI_Bcast(db, count, MPI_DOUBLE, root, MPI_COMM_WORLD));
        OK(MPI_Bcast(cb, count, MPI_CHAR, root, MPI_COMM_WORLD));
        for (int i = 0; i < count; i++) {
            CHECK(ib[i] == ival(root, i), "bcast int count %d root %d [%d] = %d", count, root, i, ib[i]);
            CHECK(db[i] == dval(root, i), "bcast double count %d root %d [%d]", count, root, i);
            CHECK(cb[i] == (char)('a' + i % 26), "bcast char count %d root %d [%d]", count, root, i);
        }
    }
    free(ib);
    free(db);
    free(cb);
}

/* The expected reduction of element i over every rank, for int operations. */
static int iexpect(MPI_Op op, int i) {
    int acc = ival(0, i);
    for (int r = 1; r < size; r++) {
        int v = ival(r, i);
        if (op == MPI_SUM) acc += v;
        else if (op == MPI_MAX) acc = v > acc ? v : acc;
        else if (op == MPI_MIN) acc = v < acc ? v : acc;
        else if (op == MPI_LAND) acc = acc && v;
        else if (op == MPI_LOR) acc = acc || v;
        else if (op == MPI_LXOR) acc = !acc != !v;
    }
    if (op == MPI_LAND || op == MPI_LOR || op == MPI_LXOR) {
        /* A single rank's value is returned as is. */
        if (size == 1) return ival(0, i);
    }
    return acc;
}

static void test_reduce(int count) {
    int rs[3], nr;
    roots(rs, &nr);
    int *isend = xmalloc(sizeof(int) * (size_t)count), *irecv = xmalloc(sizeof(int) * (size_t)count);
    double *dsend = xmalloc(sizeof(double) * (size_t)count), *drecv = xmalloc(sizeof(double) * (size_t)count);
    uint64_t *usend = xmalloc(8 * (size_t)count), *urecv = xmalloc(8 * (size_t)count);
    unsigned *bsend = xmalloc(sizeof(unsigned) * (size_t)count), *brecv = xmalloc(sizeof(unsigned) * (size_t)count);
    for (int i = 0; i < count; i++) {
        isend[i] = ival(rank, i);
        dsend[i] = dval(rank, i);
        usend[i] = uval(rank, i);
        bsend[i] = bits(rank, i);
    }
    MPI_Op iops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_LAND, MPI_LOR, MPI_LXOR};
    for (int k = 0; k < nr; k++) {
        int root = rs[k];
        for (unsigned o = 0; o < sizeof(iops) / sizeof(iops[0]); o++) {
            for (int i = 0; i < count; i++) irecv[i] = -12345;
            OK(MPI_Reduce(isend, irecv, count, MPI_INT, iops[o], root, MPI_COMM_WORLD));
            if (rank == root)
                for (int i = 0; i < count; i++)
                    CHECK(irecv[i] == iexpect(iops[o], i), "reduce int op %u count %d root %d [%d] = %d, expected %d",
                          o, count, root, i, irecv[i], iexpect(iops[o], i));
            else
                for (int i = 0; i < count; i++) CHECK(irecv[i] == -12345, "reduce wrote a non-root's buffer");
            /* Allreduce of the same. */
            OK(MPI_Allreduce(isend, irecv, count, MPI_INT, iops[o], MPI_COMM_WORLD));
            for (int i = 0; i < count; i++)
                CHECK(irecv[i] == iexpect(iops[o], i), "allreduce int op %u count %d [%d] = %d, expected %d", o, count, i,
                      irecv[i], iexpect(iops[o], i));
        }
        /* Doubles: SUM, MAX, MIN; in place at the root. */
        for (int i = 0; i < count; i++) drecv[i] = dsend[i];
        OK(MPI_Reduce(rank == root ? MPI_IN_PLACE : dsend, drecv, count, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int i = 0; i < count; i++) {
                double want = 0;
                for (int r = 0; r < size; r++) want += dval(r, i);
                CHECK(drecv[i] == want, "reduce double in place count %d root %d [%d]", count, root, i);
            }
        /* Unsigned 64-bit product (wraps, as C's unsigned arithmetic does). */
        OK(MPI_Reduce(usend, urecv, count, MPI_UINT64_T, MPI_PROD, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int i = 0; i < count; i++) {
                uint64_t want = 1;
                for (int r = 0; r < size; r++) want *= uval(r, i);
                CHECK(urecv[i] == want, "reduce u64 prod count %d [%d]", count, i);
            }
    }
    /* Allreduce in place, doubles MAX and MIN, bitwise on unsigned. */
    MPI_Op dops[] = {MPI_MAX, MPI_MIN, MPI_SUM};
    for (unsigned o = 0; o < 3; o++) {
        for (int i = 0; i < count; i++) drecv[i] = dsend[i];
        OK(MPI_Allreduce(MPI_IN_PLACE, drecv, count, MPI_DOUBLE, dops[o], MPI_COMM_WORLD));
        for (int i = 0; i < count; i++) {
            double want = dval(0, i);
            for (int r = 1; r < size; r++) {
                double v = dval(r, i);
                want = o == 0 ? (v > want ? v : want) : o == 1 ? (v < want ? v : want) : want + v;
            }
            CHECK(drecv[i] == want, "allreduce double op %u count %d [%d]", o, count, i);
        }
    }
    MPI_Op bops[] = {MPI_BAND, MPI_BOR, MPI_BXOR};
    for (unsigned o = 0; o < 3; o++) {
        OK(MPI_Allreduce(bsend, brecv, count, MPI_UNSIGNED, bops[o], MPI_COMM_WORLD));
        for (int i = 0; i < count; i++) {
            unsigned want = bits(0, i);
            for (int r = 1; r < size; r++)
                want = o == 0 ? (want & bits(r, i)) : o == 1 ? (want | bits(r, i)) : (want ^ bits(r, i));
            CHECK(brecv[i] == want, "allreduce unsigned op %u count %d [%d]", o, count, i);
        }
    }
    /* Small types: int8 sum (wraps), unsigned char max, short min, float sum, long sum, byte bor. */
    if (count > 0) {
        int8_t a8 = (int8_t)(rank * 5 + 1), r8 = 0;
        OK(MPI_Allreduce(&a8, &r8, 1, MPI_INT8_T, MPI_SUM, MPI_COMM_WORLD));
        int8_t w8 = 0;
        for (int r = 0; r < size; r++) w8 = (int8_t)(w8 + (int8_t)(r * 5 + 1));
        CHECK(r8 == w8, "int8 sum %d, expected %d", r8, w8);
        unsigned char uc = (unsigned char)(200 + rank), ucr = 0;
        OK(MPI_Allreduce(&uc, &ucr, 1, MPI_UNSIGNED_CHAR, MPI_MAX, MPI_COMM_WORLD));
        CHECK(ucr == (unsigned char)(200 + size - 1), "uchar max %d", ucr);
        short sh = (short)(-rank), shr = 0;
        OK(MPI_Allreduce(&sh, &shr, 1, MPI_SHORT, MPI_MIN, MPI_COMM_WORLD));
        CHECK(shr == -(size - 1), "short min %d", shr);
        float f = (float)rank + 0.5f, fr = 0;
        OK(MPI_Allreduce(&f, &fr, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(fr == (float)size * ((float)size - 1) / 2 + 0.5f * (float)size, "float sum %f", (double)fr);
        long l = 1L << 40, lr = 0;
        OK(MPI_Allreduce(&l, &lr, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        CHECK(lr == (1L << 40) * size, "long sum %ld", lr);
        unsigned char byte = (unsigned char)(1u << (rank % 8)), byter = 0;
        OK(MPI_Allreduce(&byte, &byter, 1, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD));
        unsigned char wb = 0;
        for (int r = 0; r < size; r++) wb |= (unsigned char)(1u << (r % 8));
        CHECK(byter == wb, "byte bor %x", byter);
    }
    free(isend);
    free(irecv);
    free(dsend);
    free(drecv);
    free(usend);
    free(urecv);
    free(bsend);
    free(brecv);
}

static int gval(int r, int i) { return r * 100003 + i; }

static void test_gather_scatter(int count) {
    int rs[3], nr;
    roots(rs, &nr);
    size_t all = (size_t)count * (size_t)size;
    int *mine = xmalloc(sizeof(int) * (size_t)count), *big = xmalloc(sizeof(int) * all);
    for (int k = 0; k < nr; k++) {
        int root = rs[k];
        /* Gather, then gather in place. */
        for (int i = 0; i < count; i++) mine[i] = gval(rank, i);
        for (size_t i = 0; i < all; i++) big[i] = -1;
        OK(MPI_Gather(mine, count, MPI_INT, big, count, MPI_INT, root, MPI_COMM_WORLD));
        if (rank == root)
            for (int r = 0; r < size; r++)
                for (int i = 0; i < count; i++)
                    CHECK(big[r * count + i] == gval(r, i), "gather count %d root %d block %d [%d]", count, root, r, i);
        for (size_t i = 0; i < all; i++) big[i] = -1;
        if (rank == root) {
            for (int i = 0; i < count; i++) big[root * count + i] = gval(root, i);
            OK(MPI_Gather(MPI_IN_PLACE, count, MPI_INT, big, count, MPI_INT, root, MPI_COMM_WORLD));
            for (int r = 0; r < size; r++)
                for (int i = 0; i < count; i++)
                    CHECK(big[r * count + i] == gval(r, i), "gather in place count %d block %d [%d]", count, r, i);
        } else {
            /* Receive arguments are not significant on non-roots. */
            OK(MPI_Gather(mine, count, MPI_INT, NULL, 0, MPI_DATATYPE_NULL, root, MPI_COMM_WORLD));
        }
        /* Scatter, then scatter in place. */
        if (rank == root)
            for (int r = 0; r < size; r++)
                for (int i = 0; i < count; i++) big[r * count + i] = gval(r, i) + 7;
        for (int i = 0; i < count; i++) mine[i] = -1;
        if (rank == root) {
            OK(MPI_Scatter(big, count, MPI_INT, mine, count, MPI_INT, root, MPI_COMM_WORLD));
        } else {
            OK(MPI_Scatter(NULL, 0, MPI_DATATYPE_NULL, mine, count, MPI_INT, root, MPI_COMM_WORLD));
        }
        for (int i = 0; i < count; i++) CHECK(mine[i] == gval(rank, i) + 7, "scatter count %d root %d [%d]", count, root, i);
        for (int i = 0; i < count; i++) mine[i] = -1;
        if (rank == root) {
            OK(MPI_Scatter(big, count, MPI_INT, MPI_IN_PLACE, count, MPI_INT, root, MPI_COMM_WORLD));
            for (int i = 0; i < count; i++) CHECK(big[root * count + i] == gval(root, i) + 7, "scatter in place kept the root's block");
        } else {
            OK(MPI_Scatter(NULL, 0, MPI_INT, mine, count, MPI_INT, root, MPI_COMM_WORLD));
            for (int i = 0; i < count; i++) CHECK(mine[i] == gval(rank, i) + 7, "scatter (root in place) count %d [%d]", count, i);
        }
    }
    free(mine);
    free(big);
}

static void test_allgather_alltoall(int count) {
    size_t all = (size_t)count * (size_t)size;
    int *mine = xmalloc(sizeof(int) * (size_t)count), *big = xmalloc(sizeof(int) * all), *out = xmalloc(sizeof(int) * all);
    for (int i = 0; i < count; i++) mine[i] = gval(rank, i);
    for (size_t i = 0; i < all; i++) big[i] = -1;
    OK(MPI_Allgather(mine, count, MPI_INT, big, count, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < count; i++) CHECK(big[r * count + i] == gval(r, i), "allgather count %d block %d [%d]", count, r, i);
    for (size_t i = 0; i < all; i++) big[i] = -1;
    for (int i = 0; i < count; i++) big[rank * count + i] = gval(rank, i);
    OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, big, count, MPI_INT, MPI_COMM_WORLD));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < count; i++) CHECK(big[r * count + i] == gval(r, i), "allgather in place count %d block %d [%d]", count, r, i);
    /* Alltoall: block j of rank r goes to rank j. */
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++) big[j * count + i] = rank * 1000000 + j * 1000 + i % 1000;
    for (size_t i = 0; i < all; i++) out[i] = -1;
    OK(MPI_Alltoall(big, count, MPI_INT, out, count, MPI_INT, MPI_COMM_WORLD));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++)
            CHECK(out[j * count + i] == j * 1000000 + rank * 1000 + i % 1000, "alltoall count %d from %d [%d]", count, j, i);
    OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, big, count, MPI_INT, MPI_COMM_WORLD));
    for (int j = 0; j < size; j++)
        for (int i = 0; i < count; i++)
            CHECK(big[j * count + i] == j * 1000000 + rank * 1000 + i % 1000, "alltoall in place count %d from %d [%d]", count, j, i);
    free(mine);
    free(big);
    free(out);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    test_barrier();
    for (int c = 0; c < NCOUNTS; c++) {
        test_bcast(counts[c]);
        test_reduce(counts[c]);
        test_gather_scatter(counts[c]);
        test_allgather_alltoall(counts[c]);
        OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    printf("OK collectives %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
