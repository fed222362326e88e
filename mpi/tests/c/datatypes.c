/* Derived datatypes: every constructor, their bounds and sizes, envelopes and contents, names, and
 * communication of non-contiguous data checked byte by byte against layouts written out here by
 * hand (not by asking the library): every byte inside the type's blocks arrives, every byte
 * outside them is untouched. Blocking, non-blocking, persistent, buffered and Sendrecv_replace
 * transfers, typed to typed, typed to bytes (the packed order is the typemap's) and bytes to typed,
 * small and past the eager limit; MPI_Pack/MPI_Unpack; MPI_Get_elements on partial messages; the
 * MINLOC pairs; MPI_BOTTOM with absolute addresses; a type freed while a send is in flight.
 * Rank 0 sends, rank 1 receives (ranks beyond 1 only take part in the barriers). */
#include <stddef.h>
#include <stdint.h>

#include "check.h"

/* A layout written out by hand: the blocks of one element (offset from the buffer, length). */
enum { MAX_BLOCKS = 64 };
struct layout {
    const char *name;
    MPI_Datatype type;
    int nblocks;
    long off[MAX_BLOCKS];
    int len[MAX_BLOCKS];
    long lb, extent, true_lb, true_extent;
    int size;
    int combiner;
};

static int rank, nranks;

static unsigned char pattern(long p, int seed) { return (unsigned char)(p * 7 + seed * 13 + (p >> 9)); }

/* The byte span `count` elements of `l` touch, and the margin before displacement 0. */
static void span_of(const struct layout *l, int count, long *margin, long *span) {
    long lo = 0, hi = 0;
    for (int k = 0; k < count; k++)
        for (int b = 0; b < l->nblocks; b++) {
            long s = k * l->extent + l->off[b], e = s + l->len[b];
            if (s < lo) lo = s;
            if (e > hi) hi = e;
        }
    *margin = -lo + 64;
    *span = hi - lo + 128;
}

/* The map of which bytes of the span are data of `count` elements of `l` (index = offset + margin). */
static unsigned char *map_of(const struct layout *l, int count, long margin, long span) {
    unsigned char *map = calloc((size_t)span, 1);
    CHECK(map != NULL, "out of memory");
    for (int k = 0; k < count; k++)
        for (int b = 0; b < l->nblocks; b++)
            memset(map + margin + k * l->extent + l->off[b], 1, (size_t)l->len[b]);
    return map;
}

static const unsigned char *cur_map; /* the map of the exchange in progress */

/* True if byte `p` (offset from the buffer's address) is data. */
static int inside(long p, long margin) { return cur_map[p + margin]; }

/* The packed bytes of `count` elements of `l` from a buffer filled with pattern(seed). */
static unsigned char *packed_of(const struct layout *l, int count, int seed, long *n) {
    unsigned char *out = xmalloc((size_t)l->size * (size_t)count + 1);
    long k = 0;
    for (int e = 0; e < count; e++)
        for (int b = 0; b < l->nblocks; b++)
            for (int i = 0; i < l->len[b]; i++) out[k++] = pattern(e * l->extent + l->off[b] + i, seed);
    *n = k;
    return out;
}

static void check_received(const struct layout *l, int count, const unsigned char *buf, long margin, long span,
                           int seed, const char *how) {
    for (long q = 0; q < span; q++) {
        long p = q - margin;
        unsigned char want = inside(p, margin) ? pattern(p, seed) : 0xee;
        CHECK(buf[q] == want, "%s %s x%d: byte at offset %ld is %#x, expected %#x", l->name, how, count, p, buf[q],
              want);
    }
}

/* After MPI_Sendrecv_replace: the peer's bytes (pattern `got`) in the blocks, this rank's own
 * (pattern `own`) outside them. */
static void check_replaced(const struct layout *l, int count, const unsigned char *buf, long margin, long span,
                           int got, int own) {
    for (long q = 0; q < span; q++) {
        long p = q - margin;
        unsigned char want = inside(p, margin) ? pattern(p, got) : pattern(p, own);
        CHECK(buf[q] == want, "%s sendrecv_replace x%d: offset %ld", l->name, count, p);
    }
}

static void check_bounds(const struct layout *l) {
    MPI_Aint lb, extent, tlb, textent;
    int size;
    OK(MPI_Type_get_extent(l->type, &lb, &extent));
    OK(MPI_Type_get_true_extent(l->type, &tlb, &textent));
    OK(MPI_Type_size(l->type, &size));
    CHECK(lb == l->lb && extent == l->extent, "%s: lb %ld extent %ld, expected %ld %ld", l->name, (long)lb,
          (long)extent, l->lb, l->extent);
    CHECK(tlb == l->true_lb && textent == l->true_extent, "%s: true lb %ld extent %ld, expected %ld %ld", l->name,
          (long)tlb, (long)textent, l->true_lb, l->true_extent);
    CHECK(size == l->size, "%s: size %d, expected %d", l->name, size, l->size);
    MPI_Count xs, xlb, xext;
    OK(MPI_Type_size_x(l->type, &xs));
    OK(MPI_Type_get_extent_x(l->type, &xlb, &xext));
    CHECK(xs == size && xlb == lb && xext == extent, "%s: the _x forms", l->name);
    int ni, na, nd, comb;
    OK(MPI_Type_get_envelope(l->type, &ni, &na, &nd, &comb));
    CHECK(comb == l->combiner, "%s: combiner %d, expected %d", l->name, comb, l->combiner);
}

/* Sends `count` elements of `l` from rank 0 to rank 1 in every way, each checked byte by byte. */
static void exchange(const struct layout *l, int count) {
    long margin, span, npacked;
    span_of(l, count, &margin, &span);
    unsigned char *map = map_of(l, count, margin, span);
    cur_map = map;
    unsigned char *mem = xmalloc((size_t)span);
    unsigned char *buf = mem + margin;
    unsigned char *packed = packed_of(l, count, 1, &npacked);
    MPI_Status st;
    MPI_Request r;
    int n = -1;
    if (rank == 0) {
        for (long q = 0; q < span; q++) mem[q] = pattern(q - margin, 1);
        OK(MPI_Send(buf, count, l->type, 1, 1, MPI_COMM_WORLD));            /* typed -> typed */
        OK(MPI_Send(buf, count, l->type, 1, 2, MPI_COMM_WORLD));            /* typed -> bytes */
        OK(MPI_Send(packed, (int)npacked, MPI_BYTE, 1, 3, MPI_COMM_WORLD)); /* bytes -> typed */
        OK(MPI_Isend(buf, count, l->type, 1, 4, MPI_COMM_WORLD, &r));       /* non-blocking */
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        OK(MPI_Send_init(buf, count, l->type, 1, 5, MPI_COMM_WORLD, &r)); /* persistent, twice */
        for (int i = 0; i < 2; i++) {
            OK(MPI_Start(&r));
            OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        }
        OK(MPI_Request_free(&r));
        int bsize = (int)npacked + MPI_BSEND_OVERHEAD;
        void *att = xmalloc((size_t)bsize);
        OK(MPI_Buffer_attach(att, bsize)); /* buffered: packed into the attached buffer */
        OK(MPI_Bsend(buf, count, l->type, 1, 6, MPI_COMM_WORLD));
        int dsize;
        OK(MPI_Buffer_detach(&att, &dsize));
        free(att);
        OK(MPI_Ssend(buf, count, l->type, 1, 7, MPI_COMM_WORLD));
        /* Sendrecv_replace: both sides typed, the data crosses. */
        OK(MPI_Sendrecv_replace(buf, count, l->type, 1, 8, 1, 8, MPI_COMM_WORLD, &st));
        check_replaced(l, count, mem, margin, span, 2, 1);
    } else if (rank == 1) {
        for (int tag = 1; tag <= 7; tag++) {
            memset(mem, 0xee, (size_t)span);
            if (tag == 2) {
                unsigned char *got = xmalloc((size_t)npacked + 1);
                OK(MPI_Recv(got, (int)npacked, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &st));
                CHECK(memcmp(got, packed, (size_t)npacked) == 0, "%s: packed bytes in typemap order", l->name);
                free(got);
                continue;
            }
            if (tag == 4) {
                OK(MPI_Irecv(buf, count, l->type, 0, 4, MPI_COMM_WORLD, &r));
                OK(MPI_Wait(&r, &st));
            } else if (tag == 5) {
                OK(MPI_Recv_init(buf, count, l->type, 0, 5, MPI_COMM_WORLD, &r));
                for (int i = 0; i < 2; i++) {
                    memset(mem, 0xee, (size_t)span);
                    OK(MPI_Start(&r));
                    OK(MPI_Wait(&r, &st));
                    check_received(l, count, mem, margin, span, 1, "persistent");
                }
                OK(MPI_Request_free(&r));
            } else {
                OK(MPI_Recv(buf, count, l->type, 0, tag, MPI_COMM_WORLD, &st));
            }
            OK(MPI_Get_count(&st, l->type, &n));
            CHECK(n == count, "%s tag %d: count %d", l->name, tag, n);
            check_received(l, count, mem, margin, span, 1, tag == 3 ? "from bytes" : "typed");
        }
        for (long q = 0; q < span; q++) mem[q] = pattern(q - margin, 2);
        OK(MPI_Sendrecv_replace(buf, count, l->type, 0, 8, 0, 8, MPI_COMM_WORLD, &st));
        check_replaced(l, count, mem, margin, span, 1, 2);
    }
    /* MPI_Pack / MPI_Unpack round trip, with positions, locally. */
    int psize = 0;
    OK(MPI_Pack_size(count, l->type, MPI_COMM_WORLD, &psize));
    CHECK(psize == (int)npacked, "%s: pack size %d, expected %ld", l->name, psize, npacked);
    unsigned char *out = xmalloc((size_t)psize + 8);
    for (long q = 0; q < span; q++) mem[q] = pattern(q - margin, 1);
    int pos = 4;
    memset(out, 0x55, (size_t)psize + 8);
    OK(MPI_Pack(buf, count, l->type, out, psize + 8, &pos, MPI_COMM_WORLD));
    CHECK(pos == 4 + psize && memcmp(out + 4, packed, (size_t)psize) == 0 && out[0] == 0x55, "%s: MPI_Pack", l->name);
    memset(mem, 0xee, (size_t)span);
    pos = 4;
    OK(MPI_Unpack(out, psize + 8, &pos, buf, count, l->type, MPI_COMM_WORLD));
    CHECK(pos == 4 + psize, "%s: MPI_Unpack position", l->name);
    check_received(l, count, mem, margin, span, 1, "unpacked");
    pos = 5;
    FAILS_WITH(MPI_Pack(buf, count, l->type, out, psize + 4, &pos, MPI_COMM_WORLD), MPI_ERR_TRUNCATE);
    free(out);
    free(packed);
    free(mem);
    free(map);
}

/* A message shorter than the receive: counts and elements. */
static void partial(void) {
    /* 3 ints then a gap of 1, as a vector element: 3 basic elements per 12 data bytes. */
    MPI_Datatype v;
    OK(MPI_Type_vector(2, 3, 4, MPI_INT, &v));
    OK(MPI_Type_commit(&v));
    int data[40];
    for (int i = 0; i < 40; i++) data[i] = i;
    MPI_Status st;
    if (rank == 0) {
        OK(MPI_Send(data, 9, MPI_INT, 1, 20, MPI_COMM_WORLD)); /* 1.5 elements of v */
        OK(MPI_Send(data, 7, MPI_SHORT, 1, 21, MPI_COMM_WORLD)); /* ends inside an int */
    } else if (rank == 1) {
        int got[40];
        memset(got, 0, sizeof got);
        OK(MPI_Recv(got, 4, v, 0, 20, MPI_COMM_WORLD, &st));
        int n = -2, e = -2;
        MPI_Count ex = -2;
        OK(MPI_Get_count(&st, v, &n));
        OK(MPI_Get_elements(&st, v, &e));
        OK(MPI_Get_elements_x(&st, v, &ex));
        CHECK(n == MPI_UNDEFINED && e == 9 && ex == 9, "partial: count %d elements %d", n, e);
        int want[] = {0, 1, 2, 0, 3, 4, 5, 6, 7, 8, 0, 0};
        CHECK(memcmp(got, want, sizeof want) == 0, "partial: data");
        OK(MPI_Recv(got, 2, v, 0, 21, MPI_COMM_WORLD, &st));
        OK(MPI_Get_elements(&st, v, &e));
        CHECK(e == MPI_UNDEFINED, "elements of 14 bytes of ints: %d", e);
        OK(MPI_Get_elements(&st, MPI_SHORT, &e));
        CHECK(e == 7, "as shorts: %d", e);
        /* Status_set_elements: 4 elements of v's basic type are 16 bytes. */
        OK(MPI_Status_set_elements(&st, v, 4));
        OK(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(n == 4, "set_elements: %d ints", n);
        OK(MPI_Status_set_cancelled(&st, 1));
        int c = 0;
        OK(MPI_Test_cancelled(&st, &c));
        CHECK(c == 1, "set_cancelled");
    }
    OK(MPI_Type_free(&v));
    CHECK(v == MPI_DATATYPE_NULL, "freed");
}

/* Envelopes and contents of every combiner; names. */
static void decode(MPI_Datatype t, int combiner, int ni, int na, int nd, const int *ints, const MPI_Aint *aints,
                   const MPI_Datatype *types, const char *name) {
    int gi, ga, gd, gc;
    OK(MPI_Type_get_envelope(t, &gi, &ga, &gd, &gc));
    CHECK(gc == combiner && gi == ni && ga == na && gd == nd, "%s: envelope %d %d %d %d", name, gi, ga, gd, gc);
    int ri[64];
    MPI_Aint ra[64];
    MPI_Datatype rd[64];
    OK(MPI_Type_get_contents(t, 64, 64, 64, ri, ra, rd));
    for (int i = 0; i < ni; i++) CHECK(ri[i] == ints[i], "%s: integer %d is %d, expected %d", name, i, ri[i], ints[i]);
    for (int i = 0; i < na; i++) CHECK(ra[i] == aints[i], "%s: address %d", name, i);
    for (int i = 0; i < nd; i++) {
        int ci, ca, cd, cc;
        OK(MPI_Type_get_envelope(rd[i], &ci, &ca, &cd, &cc));
        if (cc == MPI_COMBINER_NAMED)
            CHECK(rd[i] == types[i], "%s: type %d is not the predefined one", name, i);
        else
            OK(MPI_Type_free(&rd[i])); /* a derived component comes back as a new handle */
    }
}

static void envelopes(void) {
    MPI_Datatype t, inner;
    int gi, ga, gd, gc;
    OK(MPI_Type_get_envelope(MPI_INT, &gi, &ga, &gd, &gc));
    CHECK(gc == MPI_COMBINER_NAMED && gi == 0 && ga == 0 && gd == 0, "named");
    int ri[1];
    MPI_Aint ra[1];
    MPI_Datatype rd[1];
    FAILS_WITH(MPI_Type_get_contents(MPI_INT, 1, 1, 1, ri, ra, rd), MPI_ERR_TYPE);
    OK(MPI_Type_contiguous(3, MPI_DOUBLE, &inner));
    decode(inner, MPI_COMBINER_CONTIGUOUS, 1, 0, 1, (int[]){3}, NULL, (MPI_Datatype[]){MPI_DOUBLE}, "contiguous");
    OK(MPI_Type_vector(4, 2, 5, inner, &t));
    decode(t, MPI_COMBINER_VECTOR, 3, 0, 1, (int[]){4, 2, 5}, NULL, NULL, "vector");
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_hvector(4, 2, 100, MPI_INT, &t));
    decode(t, MPI_COMBINER_HVECTOR, 2, 1, 1, (int[]){4, 2}, (MPI_Aint[]){100}, (MPI_Datatype[]){MPI_INT}, "hvector");
    OK(MPI_Type_free(&t));
    OK(MPI_Type_indexed(2, (int[]){1, 3}, (int[]){0, 7}, MPI_INT, &t));
    decode(t, MPI_COMBINER_INDEXED, 5, 0, 1, (int[]){2, 1, 3, 0, 7}, NULL, (MPI_Datatype[]){MPI_INT}, "indexed");
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_hindexed(2, (int[]){1, 3}, (MPI_Aint[]){0, 70}, MPI_INT, &t));
    decode(t, MPI_COMBINER_HINDEXED, 3, 2, 1, (int[]){2, 1, 3}, (MPI_Aint[]){0, 70}, (MPI_Datatype[]){MPI_INT},
           "hindexed");
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_indexed_block(3, 2, (int[]){0, 4, 9}, MPI_INT, &t));
    decode(t, MPI_COMBINER_INDEXED_BLOCK, 5, 0, 1, (int[]){3, 2, 0, 4, 9}, NULL, (MPI_Datatype[]){MPI_INT},
           "indexed_block");
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_hindexed_block(3, 2, (MPI_Aint[]){0, 40, 90}, MPI_INT, &t));
    decode(t, MPI_COMBINER_HINDEXED_BLOCK, 2, 3, 1, (int[]){3, 2}, (MPI_Aint[]){0, 40, 90},
           (MPI_Datatype[]){MPI_INT}, "hindexed_block");
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_struct(2, (int[]){1, 2}, (MPI_Aint[]){0, 16}, (MPI_Datatype[]){MPI_CHAR, inner}, &t));
    decode(t, MPI_COMBINER_STRUCT, 3, 2, 2, (int[]){2, 1, 2}, (MPI_Aint[]){0, 16},
           (MPI_Datatype[]){MPI_CHAR, MPI_DATATYPE_NULL}, "struct");
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_subarray(2, (int[]){4, 5}, (int[]){2, 3}, (int[]){1, 2}, MPI_ORDER_C, MPI_INT, &t));
    decode(t, MPI_COMBINER_SUBARRAY, 8, 0, 1, (int[]){2, 4, 5, 2, 3, 1, 2, MPI_ORDER_C}, NULL,
           (MPI_Datatype[]){MPI_INT}, "subarray");
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_resized(MPI_INT, -4, 16, &t));
    decode(t, MPI_COMBINER_RESIZED, 0, 2, 1, NULL, (MPI_Aint[]){-4, 16}, (MPI_Datatype[]){MPI_INT}, "resized");
    OK(MPI_Type_free(&t));
    OK(MPI_Type_dup(inner, &t));
    decode(t, MPI_COMBINER_DUP, 0, 0, 1, NULL, NULL, NULL, "dup");
    /* Names: predefined ones have theirs; a new type none until it is given one. */
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    OK(MPI_Type_get_name(MPI_INT, name, &len));
    CHECK(strcmp(name, "MPI_INT") == 0 && len == 7, "name of MPI_INT: %s", name);
    OK(MPI_Type_get_name(MPI_DOUBLE_INT, name, &len));
    CHECK(strcmp(name, "MPI_DOUBLE_INT") == 0, "name of MPI_DOUBLE_INT: %s", name);
    OK(MPI_Type_get_name(t, name, &len));
    CHECK(len == 0 && name[0] == 0, "a new type has no name");
    OK(MPI_Type_set_name(t, "three doubles"));
    OK(MPI_Type_get_name(t, name, &len));
    CHECK(strcmp(name, "three doubles") == 0 && len == 13, "set name: %s", name);
    OK(MPI_Type_free(&t));
    OK(MPI_Type_free(&inner));
    /* Errors: an uncommitted type, a freed one, a predefined one freed. */
    OK(MPI_Type_contiguous(2, MPI_INT, &t));
    int x[2] = {0, 0};
    FAILS_WITH(MPI_Send(x, 1, t, MPI_PROC_NULL, 0, MPI_COMM_WORLD), MPI_ERR_TYPE);
    MPI_Datatype gone = t;
    OK(MPI_Type_free(&t));
    FAILS_WITH(MPI_Type_commit(&gone), MPI_ERR_TYPE);
    MPI_Datatype pre = MPI_INT;
    FAILS_WITH(MPI_Type_free(&pre), MPI_ERR_TYPE);
    FAILS_WITH(MPI_Type_vector(-1, 1, 1, MPI_INT, &t), MPI_ERR_COUNT);
    FAILS_WITH(MPI_Type_create_subarray(1, (int[]){4}, (int[]){5}, (int[]){0}, MPI_ORDER_C, MPI_INT, &t), MPI_ERR_ARG);
}

/* The MINLOC/MAXLOC pairs move as C structs. */
static void pairs(void) {
    struct di {
        double d;
        int i;
    } a[5];
    struct si {
        short s;
        int i;
    } b[5];
    int size;
    MPI_Aint lb, ext;
    OK(MPI_Type_size(MPI_DOUBLE_INT, &size));
    OK(MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &ext));
    CHECK(size == 12 && lb == 0 && ext == (MPI_Aint)sizeof(struct di), "DOUBLE_INT: size %d extent %ld", size,
          (long)ext);
    OK(MPI_Type_get_extent(MPI_SHORT_INT, &lb, &ext));
    CHECK(ext == (MPI_Aint)sizeof(struct si), "SHORT_INT extent %ld", (long)ext);
    OK(MPI_Type_get_extent(MPI_LONG_DOUBLE_INT, &lb, &ext));
    CHECK(ext == (MPI_Aint)sizeof(struct {
              long double d;
              int i;
          }),
          "LONG_DOUBLE_INT extent %ld", (long)ext);
    if (rank == 0) {
        for (int k = 0; k < 5; k++) {
            a[k].d = k + 0.25;
            a[k].i = 10 * k;
            b[k].s = (short)(k - 2);
            b[k].i = -k;
        }
        OK(MPI_Send(a, 5, MPI_DOUBLE_INT, 1, 30, MPI_COMM_WORLD));
        OK(MPI_Send(b, 5, MPI_SHORT_INT, 1, 31, MPI_COMM_WORLD));
    } else if (rank == 1) {
        OK(MPI_Recv(a, 5, MPI_DOUBLE_INT, 0, 30, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Recv(b, 5, MPI_SHORT_INT, 0, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        for (int k = 0; k < 5; k++)
            CHECK(a[k].d == k + 0.25 && a[k].i == 10 * k && b[k].s == k - 2 && b[k].i == -k, "pair %d", k);
    }
}

/* MPI_BOTTOM with a struct of absolute addresses; a type freed while its send is in flight. */
static void absolute(void) {
    static double d[3];
    static int i[2];
    static char c[5];
    MPI_Aint addr[3];
    OK(MPI_Get_address(d, &addr[0]));
    OK(MPI_Get_address(i, &addr[1]));
    OK(MPI_Get_address(c, &addr[2]));
    CHECK(MPI_Aint_diff(addr[1], addr[0]) == (char *)i - (char *)d, "MPI_Aint_diff");
    CHECK(MPI_Aint_add(addr[0], 8) == addr[0] + 8, "MPI_Aint_add");
    MPI_Datatype t;
    OK(MPI_Type_create_struct(3, (int[]){3, 2, 5}, addr, (MPI_Datatype[]){MPI_DOUBLE, MPI_INT, MPI_CHAR}, &t));
    OK(MPI_Type_commit(&t));
    if (rank == 0) {
        d[0] = 1.5, d[1] = -2, d[2] = 1e300;
        i[0] = 7, i[1] = -9;
        memcpy(c, "nemo", 5);
        MPI_Request r;
        OK(MPI_Isend(MPI_BOTTOM, 1, t, 1, 40, MPI_COMM_WORLD, &r));
        OK(MPI_Type_free(&t)); /* the send in flight keeps its layout */
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else if (rank == 1) {
        OK(MPI_Recv(MPI_BOTTOM, 1, t, 0, 40, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(d[0] == 1.5 && d[1] == -2 && d[2] == 1e300 && i[0] == 7 && i[1] == -9 && strcmp(c, "nemo") == 0,
              "absolute addresses");
        OK(MPI_Type_free(&t));
    } else {
        OK(MPI_Type_free(&t));
    }
}

static void commit_all(struct layout *ls, int n) {
    for (int k = 0; k < n; k++) OK(MPI_Type_commit(&ls[k].type));
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &nranks));
    check_rank = rank;
    CHECK(nranks >= 2, "needs 2 ranks");
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    struct layout L[20];
    int n = 0;
    /* contiguous(5, int): one block. */
    L[n] = (struct layout){"contiguous", 0, 1, {0}, {20}, 0, 20, 0, 20, 20, MPI_COMBINER_CONTIGUOUS};
    OK(MPI_Type_contiguous(5, MPI_INT, &L[n++].type));
    /* vector(3, 2, 4) of double: blocks of 16 every 32; extent (2*4+2)*8. */
    L[n] = (struct layout){"vector", 0, 3, {0, 32, 64}, {16, 16, 16}, 0, 80, 0, 80, 48, MPI_COMBINER_VECTOR};
    OK(MPI_Type_vector(3, 2, 4, MPI_DOUBLE, &L[n++].type));
    /* vector with a negative stride: blocks at 0, -12, -24. */
    L[n] = (struct layout){"vector<0", 0, 3, {0, -12, -24}, {4, 4, 4}, -24, 28, -24, 28, 12, MPI_COMBINER_VECTOR};
    OK(MPI_Type_vector(3, 1, -3, MPI_INT, &L[n++].type));
    /* hvector(4, 1, 6 bytes) of short: blocks of 2 every 6. */
    L[n] = (struct layout){"hvector", 0, 4, {0, 6, 12, 18}, {2, 2, 2, 2}, 0, 20, 0, 20, 8, MPI_COMBINER_HVECTOR};
    OK(MPI_Type_create_hvector(4, 1, 6, MPI_SHORT, &L[n++].type));
    /* indexed {2 at 5, 1 at 0, 3 at 9} of int: typemap order, not address order. */
    L[n] = (struct layout){"indexed", 0, 3, {20, 0, 36}, {8, 4, 12}, 0, 48, 0, 48, 24, MPI_COMBINER_INDEXED};
    OK(MPI_Type_indexed(3, (int[]){2, 1, 3}, (int[]){5, 0, 9}, MPI_INT, &L[n++].type));
    /* hindexed {1 double at 3 bytes, 2 at 40}. */
    L[n] = (struct layout){"hindexed", 0, 2, {3, 40}, {8, 16}, 3, 53, 3, 53, 24, MPI_COMBINER_HINDEXED};
    OK(MPI_Type_create_hindexed(2, (int[]){1, 2}, (MPI_Aint[]){3, 40}, MPI_DOUBLE, &L[n++].type));
    /* indexed_block 2 ints at 1, 6, 3. */
    L[n] = (struct layout){"indexed_block", 0, 3, {4, 24, 12}, {8, 8, 8}, 4, 28, 4, 28, 24, MPI_COMBINER_INDEXED_BLOCK};
    OK(MPI_Type_create_indexed_block(3, 2, (int[]){1, 6, 3}, MPI_INT, &L[n++].type));
    /* hindexed_block 1 int at 0, 100, 50 bytes. */
    L[n] = (struct layout){"hindexed_block", 0, 3,  {0, 100, 50}, {4, 4, 4}, 0, 104, 0, 104, 12,
                           MPI_COMBINER_HINDEXED_BLOCK};
    OK(MPI_Type_create_hindexed_block(3, 1, (MPI_Aint[]){0, 100, 50}, MPI_INT, &L[n++].type));
    /* struct { char c; double d[2]; short s; } as C lays it out: 0, 8, 24; sizeof 32. */
    struct cs {
        char c;
        double d[2];
        short s;
    };
    L[n] = (struct layout){"struct", 0, 3, {0, 8, 24}, {1, 16, 2}, 0, sizeof(struct cs), 0, 26, 19,
                           MPI_COMBINER_STRUCT};
    OK(MPI_Type_create_struct(3, (int[]){1, 2, 1},
                              (MPI_Aint[]){offsetof(struct cs, c), offsetof(struct cs, d), offsetof(struct cs, s)},
                              (MPI_Datatype[]){MPI_CHAR, MPI_DOUBLE, MPI_SHORT}, &L[n++].type));
    /* subarray 2x3 at (1,2) of a 4x5 int array, C order: rows at 28 and 48. */
    L[n] = (struct layout){"subarray C", 0, 2, {28, 48}, {12, 12}, 0, 80, 28, 32, 24, MPI_COMBINER_SUBARRAY};
    OK(MPI_Type_create_subarray(2, (int[]){4, 5}, (int[]){2, 3}, (int[]){1, 2}, MPI_ORDER_C, MPI_INT,
                                &L[n++].type));
    /* The same in Fortran order: columns of 2 at 36, 52, 68. */
    L[n] = (struct layout){"subarray F", 0, 3, {36, 52, 68}, {8, 8, 8}, 0, 80, 36, 40, 24, MPI_COMBINER_SUBARRAY};
    OK(MPI_Type_create_subarray(2, (int[]){4, 5}, (int[]){2, 3}, (int[]){1, 2}, MPI_ORDER_FORTRAN, MPI_INT,
                                &L[n++].type));
    /* 3-D: a 2x2x2 block at (1,1,1) of 3x4x5 chars. */
    L[n] = (struct layout){"subarray 3D", 0, 4, {26, 31, 46, 51}, {2, 2, 2, 2}, 0, 60, 26, 27, 8, MPI_COMBINER_SUBARRAY};
    OK(MPI_Type_create_subarray(3, (int[]){3, 4, 5}, (int[]){2, 2, 2}, (int[]){1, 1, 1}, MPI_ORDER_C, MPI_CHAR,
                                &L[n++].type));
    /* resized int: lb -4, extent 12 (elements 12 apart, data at 0). */
    L[n] = (struct layout){"resized", 0, 1, {0}, {4}, -4, 12, 0, 4, 4, MPI_COMBINER_RESIZED};
    OK(MPI_Type_create_resized(MPI_INT, -4, 12, &L[n++].type));
    /* A vector of structs of vectors: nesting. inner = vector(2,1,2) of int (blocks 0, 8; extent
     * 12); s = struct {inner at 0, char at 14} extent 16 (int alignment); outer = vector(2, 1, 2) of
     * s: elements at 0 and 32. */
    MPI_Datatype inner, s;
    OK(MPI_Type_vector(2, 1, 2, MPI_INT, &inner));
    OK(MPI_Type_create_struct(2, (int[]){1, 1}, (MPI_Aint[]){0, 14}, (MPI_Datatype[]){inner, MPI_CHAR}, &s));
    L[n] = (struct layout){"nested", 0, 6, {0, 8, 14, 32, 40, 46}, {4, 4, 1, 4, 4, 1}, 0, 48, 0, 47, 18,
                           MPI_COMBINER_VECTOR};
    OK(MPI_Type_vector(2, 1, 2, s, &L[n++].type));
    OK(MPI_Type_free(&inner)); /* freeing the parts leaves the whole intact */
    OK(MPI_Type_free(&s));
    /* vector(3, 256, 320) of int: blocks of 1 KiB (the Endpoint reads long pieces by single copy). */
    L[n] = (struct layout){"vector 1K", 0, 3, {0, 1280, 2560}, {1024, 1024, 1024}, 0, 3584, 0, 3584, 3072,
                           MPI_COMBINER_VECTOR};
    OK(MPI_Type_vector(3, 256, 320, MPI_INT, &L[n++].type));
    /* dup of the vector above. */
    L[n] = L[1];
    L[n].type = MPI_DATATYPE_NULL;
    L[n].name = "dup";
    L[n].combiner = MPI_COMBINER_DUP;
    OK(MPI_Type_dup(L[1].type, &L[n++].type));

    commit_all(L, n);
    int counts[] = {1, 3, 1000}; /* 1000 elements: past the eager limit for most */
    for (int k = 0; k < n; k++) {
        check_bounds(&L[k]);
        for (int c = 0; c < 3; c++) exchange(&L[k], counts[c]);
        OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    for (int k = 0; k < n; k++) OK(MPI_Type_free(&L[k].type));
    partial();
    envelopes();
    pairs();
    absolute();
    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK datatypes %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
