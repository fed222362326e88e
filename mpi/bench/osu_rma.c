/* One-sided latency and bandwidth through the standard MPI API only, so the same source builds with any mpicc (this
 * project's mpi/bin/mpicc, Debian's mpicc.openmpi or mpicc.mpich) and the results compare like for like. The structure
 * is that of the OSU one-sided benchmarks (osu_put_latency, osu_get_bw, osu_fop_latency, ...): rank 0 is the origin,
 * rank 1 the target, one operation (latency) or a window of 64 operations (bandwidth) per synchronisation.
 *
 * Usage (2 ranks): osu_rma MODE OPS FLAVORS SYNCS [SIZES] [ITERS] [WARMUP]
 *   MODE     lat | bw
 *   OPS      comma-separated of put, get, acc (MPI_Accumulate, MPI_SUM on MPI_LONG), fop (MPI_Fetch_and_op, MPI_SUM
 *            on one MPI_LONG), cas (MPI_Compare_and_swap on one MPI_LONG); fop and cas run at 8 bytes only
 *   FLAVORS  comma-separated of allocate (MPI_Win_allocate), shared (MPI_Win_allocate_shared), create (MPI_Win_create
 *            on memory of malloc), create-allocmem (MPI_Win_create on memory of MPI_Alloc_mem, as OSU's benchmarks
 *            make it), dynamic (MPI_Win_create_dynamic + MPI_Win_attach)
 *   SYNCS    comma-separated of flush (MPI_Win_lock shared once, then op + MPI_Win_flush per iteration), lock
 *            (MPI_Win_lock shared + op + MPI_Win_unlock per iteration), fence (op + MPI_Win_fence on both ranks),
 *            pscw (origin MPI_Win_start + op + MPI_Win_complete, target MPI_Win_post + MPI_Win_wait)
 *   SIZES    comma-separated byte counts (suffix K or M), default 8 for lat, 65536,1048576 for bw; acc sizes are
 *            rounded down to whole MPI_LONGs
 *   ITERS    timed iterations per size (default lat 20000 up to 8 KiB, 2000 above; bw about 256 MiB per size);
 *            they run in 20 batches timed apart, and the figure is the median batch
 *   WARMUP   untimed iterations first (default ITERS / 10)
 * Prints one line per (op, flavor, sync, size):
 *   rma lat OP FLAVOR SYNC BYTES USEC      the median over the batches of the time per operation + synchronisation
 *   rma bw OP FLAVOR SYNC BYTES MB/S       bytes moved per second (windows of 64 operations, then one sync), median;
 *                                          as OSU's, a window's operations reach 64 consecutive blocks of the target
 *                                          (at 1 MiB, 64 MiB a window: beyond the caches, unlike a memcpy of 1 MiB)
 * and "rma skip OP FLAVOR SYNC REASON" for a combination this MPI refuses (the error string is the reason). */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCHES = 20, WINDOW = 64, MAXLIST = 16 };
enum op { PUT, GET, ACC, FOP, CAS };
enum flavor { ALLOCATE, SHARED, CREATE, CREATE_ALLOCMEM, DYNAMIC };
enum sync { FLUSH, LOCK, FENCE, PSCW };
static const char *const op_names[] = {"put", "get", "acc", "fop", "cas", NULL};
static const char *const flavor_names[] = {"allocate", "shared", "create", "create-allocmem", "dynamic", NULL};
static const char *const sync_names[] = {"flush", "lock", "fence", "pscw", NULL};

static int rank;

static void usage(const char *why) {
    if (rank == 0)
        fprintf(stderr, "osu_rma: %s\nusage: osu_rma lat|bw OPS FLAVORS SYNCS [SIZES] [ITERS] [WARMUP]\n", why);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Parses the comma-separated names of `arg` (each one of `names`) into `out`; returns how many. */
static int parse_names(const char *arg, const char *const *names, int *out) {
    int n = 0;
    const char *p = arg;
    while (*p) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int k = 0; names[k]; k++)
            if (strlen(names[k]) == len && strncmp(names[k], p, len) == 0) found = k;
        if (found < 0 || n == MAXLIST) usage("unknown or too many names in a list");
        out[n++] = found;
        p += len + (p[len] == ',');
    }
    if (n == 0) usage("an empty list");
    return n;
}

/* Parses comma-separated sizes (suffix K or M) into `out`; returns how many. */
static int parse_sizes(const char *arg, long *out) {
    int n = 0;
    const char *p = arg;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (*end == 'K' || *end == 'k') v <<= 10, end++;
        else if (*end == 'M' || *end == 'm') v <<= 20, end++;
        if (end == p || v < 0 || v > (1L << 30) || (*end && *end != ',') || n == MAXLIST) usage("bad size list");
        out[n++] = v;
        p = end + (*end == ',');
    }
    return n;
}

/* A window of one flavour over `bytes` bytes on every rank, and where the target's bytes start. */
struct window {
    MPI_Win win;
    char *base;
    void *owned;    /* memory this program allocated (create, dynamic) */
    void *mpi_mem;  /* memory of MPI_Alloc_mem (create-allocmem) */
    MPI_Aint disp0; /* target displacement of the target's first byte */
};

/* Creates the window; on an error (the MPI's own refusal) returns its error string in `why`. */
static int open_window(enum flavor f, MPI_Aint bytes, struct window *w, char *why) {
    int rc = MPI_SUCCESS, len;
    w->owned = w->mpi_mem = NULL;
    w->disp0 = 0;
    MPI_Aint alloc = bytes > 0 ? bytes : 8;
    switch (f) {
    case ALLOCATE: rc = MPI_Win_allocate(alloc, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w->base, &w->win); break;
    case SHARED: rc = MPI_Win_allocate_shared(alloc, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w->base, &w->win); break;
    case CREATE:
        w->owned = w->base = aligned_alloc(4096, (alloc + 4095) / 4096 * 4096);
        rc = MPI_Win_create(w->base, alloc, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w->win);
        break;
    case CREATE_ALLOCMEM:
        rc = MPI_Alloc_mem(alloc, MPI_INFO_NULL, &w->mpi_mem);
        w->base = w->mpi_mem;
        if (rc == MPI_SUCCESS) rc = MPI_Win_create(w->base, alloc, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &w->win);
        break;
    case DYNAMIC:
        w->owned = w->base = aligned_alloc(4096, (alloc + 4095) / 4096 * 4096);
        rc = MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &w->win);
        if (rc == MPI_SUCCESS) rc = MPI_Win_attach(w->win, w->base, alloc);
        if (rc == MPI_SUCCESS) {
            MPI_Aint mine, all[2];
            MPI_Get_address(w->base, &mine);
            MPI_Allgather(&mine, 1, MPI_AINT, all, 1, MPI_AINT, MPI_COMM_WORLD);
            w->disp0 = all[1];
        }
        break;
    }
    if (rc != MPI_SUCCESS) {
        MPI_Error_string(rc, why, &len);
        free(w->owned);
        if (w->mpi_mem) MPI_Free_mem(w->mpi_mem);
        return rc;
    }
    MPI_Win_set_errhandler(w->win, MPI_ERRORS_RETURN);
    memset(w->base, 0, alloc);
    return MPI_SUCCESS;
}

static void close_window(enum flavor f, struct window *w) {
    if (f == DYNAMIC) MPI_Win_detach(w->win, w->base);
    MPI_Win_free(&w->win);
    free(w->owned);
    if (w->mpi_mem) MPI_Free_mem(w->mpi_mem);
}

/* One operation of `bytes` bytes from `src` (results into `dst`) on the target's bytes at `disp`. */
static int rma_op(enum op o, const char *src, char *dst, long bytes, MPI_Aint disp, MPI_Win win) {
    switch (o) {
    case PUT: return MPI_Put(src, (int)bytes, MPI_CHAR, 1, disp, (int)bytes, MPI_CHAR, win);
    case GET: return MPI_Get(dst, (int)bytes, MPI_CHAR, 1, disp, (int)bytes, MPI_CHAR, win);
    case ACC: {
        int n = (int)(bytes / (long)sizeof(long));
        return MPI_Accumulate(src, n, MPI_LONG, 1, disp, n, MPI_LONG, MPI_SUM, win);
    }
    case FOP: return MPI_Fetch_and_op(src, dst, MPI_LONG, 1, disp, MPI_SUM, win);
    case CAS: return MPI_Compare_and_swap(src, src + sizeof(long), dst, MPI_LONG, 1, disp, win);
    }
    return MPI_ERR_OTHER;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs `iters` timed iterations (after `warmup`) of `per_sync` operations then one synchronisation, in BATCHES
 * batches; returns the median batch's seconds per iteration on rank 0 (0 on rank 1), or -1 on an error (its string
 * in `why`). Both ranks call it: the target takes part in fence and PSCW, and waits in a barrier otherwise. */
static double measure(enum op o, enum sync s, struct window *w, long bytes, int per_sync, long iters, long warmup,
                      char *src, char *dst, MPI_Group peer, char *why) {
    double batch[BATCHES];
    long per_batch = iters / BATCHES > 0 ? iters / BATCHES : 1;
    int rc = MPI_SUCCESS, len;
    MPI_Barrier(MPI_COMM_WORLD);
    if (s == FLUSH && rank == 0) rc = MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, w->win);
    if (s == FENCE) rc = MPI_Win_fence(0, w->win);
    for (long b = -1; b < BATCHES && rc == MPI_SUCCESS; b++) {
        long n = b < 0 ? warmup : per_batch;
        double t0 = MPI_Wtime();
        for (long i = 0; i < n && rc == MPI_SUCCESS; i++) {
            if (rank == 0) {
                if (s == LOCK) rc = MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, w->win);
                if (s == PSCW) rc = MPI_Win_start(peer, 0, w->win);
                for (int k = 0; k < per_sync && rc == MPI_SUCCESS; k++) {
                    /* A window of operations goes to consecutive places (bandwidth), wrapping in the window. */
                    long at = per_sync > 1 && bytes > 0 ? (long)k * bytes % (WINDOW * bytes) : 0;
                    rc = rma_op(o, src, dst, bytes, w->disp0 + at, w->win);
                }
                if (rc != MPI_SUCCESS) break;
                switch (s) {
                case FLUSH: rc = MPI_Win_flush(1, w->win); break;
                case LOCK: rc = MPI_Win_unlock(1, w->win); break;
                case FENCE: rc = MPI_Win_fence(0, w->win); break;
                case PSCW: rc = MPI_Win_complete(w->win); break;
                }
            } else if (s == FENCE) {
                rc = MPI_Win_fence(0, w->win);
            } else if (s == PSCW) {
                rc = MPI_Win_post(peer, 0, w->win);
                if (rc == MPI_SUCCESS) rc = MPI_Win_wait(w->win);
            }
        }
        if (b >= 0) batch[b] = (MPI_Wtime() - t0) / (double)n;
    }
    if (s == FLUSH && rank == 0 && rc == MPI_SUCCESS) rc = MPI_Win_unlock(1, w->win);
    /* Both ranks learn whether either failed, so that neither waits for the other in a later epoch. */
    int failed = rc != MPI_SUCCESS, any;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, why, &len);
    else if (any) strcpy(why, "the other rank failed");
    if (any) return -1;
    if (rank != 0) return 0;
    qsort(batch, BATCHES, sizeof batch[0], cmp_double);
    return (batch[BATCHES / 2 - 1] + batch[BATCHES / 2]) / 2;
}

int main(int argc, char **argv) {
    int nprocs;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (nprocs != 2) usage("needs exactly 2 ranks");
    /* A flavour the MPI refuses (shared memory across nodes, a missing feature) is reported, not fatal. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (argc < 5 || argc > 8) usage("wrong number of arguments");
    int bw = strcmp(argv[1], "bw") == 0;
    if (!bw && strcmp(argv[1], "lat") != 0) usage("MODE is lat or bw");
    int ops[MAXLIST], flavors[MAXLIST], syncs[MAXLIST];
    long sizes[MAXLIST];
    int nops = parse_names(argv[2], op_names, ops);
    int nflavors = parse_names(argv[3], flavor_names, flavors);
    int nsyncs = parse_names(argv[4], sync_names, syncs);
    int nsizes = argc > 5 ? parse_sizes(argv[5], sizes) : 0;
    if (nsizes == 0 && bw) sizes[nsizes++] = 65536, sizes[nsizes++] = 1048576;
    if (nsizes == 0) sizes[nsizes++] = 8;
    long iters_arg = argc > 6 ? atol(argv[6]) : 0, warmup_arg = argc > 7 ? atol(argv[7]) : -1;
    if (argc > 6 && iters_arg <= 0) usage("ITERS must be positive");

    long max = 8;
    for (int j = 0; j < nsizes; j++) max = sizes[j] > max ? sizes[j] : max;
    /* Bandwidth windows write WINDOW consecutive blocks; the origin's buffers hold one block (and CAS's pair). */
    MPI_Aint win_bytes = bw ? (MPI_Aint)max * WINDOW : max;
    char *src = aligned_alloc(4096, (max + 4095) / 4096 * 4096), *dst = aligned_alloc(4096, (max + 4095) / 4096 * 4096);
    memset(src, 1, max);
    memset(dst, 0, max);
    MPI_Group world, peer;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int other = 1 - rank;
    MPI_Group_incl(world, 1, &other, &peer);
    char why[MPI_MAX_ERROR_STRING + 1];

    for (int fi = 0; fi < nflavors; fi++) {
        enum flavor f = flavors[fi];
        struct window w;
        int rc = open_window(f, win_bytes, &w, why), any, failed = rc != MPI_SUCCESS;
        MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            if (rank == 0)
                for (int oi = 0; oi < nops; oi++)
                    for (int si = 0; si < nsyncs; si++)
                        printf("rma skip %s %s %s %s\n", op_names[ops[oi]], flavor_names[f], sync_names[syncs[si]],
                               failed ? why : "the other rank could not create the window");
            if (!failed) close_window(f, &w);
            continue;
        }
        for (int oi = 0; oi < nops; oi++) {
            enum op o = ops[oi];
            for (int si = 0; si < nsyncs; si++) {
                enum sync s = syncs[si];
                for (int j = 0; j < nsizes; j++) {
                    long bytes = o == FOP || o == CAS ? 8 : o == ACC ? sizes[j] / 8 * 8 : sizes[j];
                    if ((o == FOP || o == CAS) && j > 0) break;
                    long iters = iters_arg;
                    if (iters == 0 && bw) {
                        iters = (256L << 20) / (WINDOW * (bytes > 0 ? bytes : 1));
                        iters = iters < 2 * BATCHES ? 2 * BATCHES : iters > 20000 ? 20000 : iters;
                    } else if (iters == 0) {
                        iters = bytes > 8192 ? 2000 : 20000;
                    }
                    long warmup = warmup_arg >= 0 ? warmup_arg : iters / 10;
                    double t = measure(o, s, &w, bytes, bw ? WINDOW : 1, iters, warmup, src, dst, peer, why);
                    if (rank != 0) continue;
                    if (t < 0)
                        printf("rma skip %s %s %s %s\n", op_names[o], flavor_names[f], sync_names[s], why);
                    else if (bw)
                        printf("rma bw %s %s %s %ld %.1f\n", op_names[o], flavor_names[f], sync_names[s], bytes,
                               (double)bytes * WINDOW / t / 1e6);
                    else
                        printf("rma lat %s %s %s %ld %.4f\n", op_names[o], flavor_names[f], sync_names[s], bytes,
                               t * 1e6);
                    fflush(stdout);
                }
            }
        }
        close_window(f, &w);
    }
    MPI_Group_free(&peer);
    MPI_Group_free(&world);
    free(src);
    free(dst);
    MPI_Finalize();
    return 0;
}
