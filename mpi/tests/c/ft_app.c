/* An application shaped like real codes, which recovers (issue 33, mpi/tests/ft_app.rs): a Jacobi
 * relaxation on a 2-D Cartesian grid of ranks (MPI_Dims_create, MPI_Cart_create, MPI_Cart_shift),
 * each rank a block of NX x NY doubles with a one-cell halo exchanged every iteration by
 * Isend/Irecv (rows contiguous, columns through an MPI_Type_vector), a Comm_split into row
 * communicators with a row Allreduce, an Allreduce of the residual, a Bcast of the parameters
 * (once, and the relaxation factor rank 0 picks every iteration), an Allreduce with a user
 * operation (the block's minimum and maximum), and a manager/worker phase: rank 0 sends a task to
 * every other rank and takes the answers with MPI_ANY_SOURCE in arrival order, each stored by its
 * source, so nothing sent afterwards depends on that order (send-deterministic).
 *
 * Every EVERY iterations the state (iteration, grid, handles, running sums) goes to
 * MPIX_Checkpoint; a restarted incarnation calls MPIX_Checkpoint_restore right after MPI_Init and
 * resumes from the saved iteration with the saved handles. Rank 0 prints `checksum <hex> exact
 * <hex>`: hashes of every rank's block and sums, equal with and without failures.
 *
 * Each incarnation leaves FT_TEST_DIR/started-<rank>-<pid>. FT_TEST_HOLD=<rank>@<inc>:<iter>,...
 * makes that incarnation (0 the first) of the rank hold at the start of that iteration (after the
 * checkpoint of that iteration, if any), its pid in FT_TEST_DIR/held-<rank>-<inc>-<iter>, serving
 * its endpoint (MPI_Iprobe) until the test kills it. FT_TEST_FP=<rank>@<iter>:<point>:<k|s>,...
 * arms a crash point of a libmpi built with the `failpoints` feature in the first incarnation of
 * the rank at the start of that iteration, so that it dies (or stops) inside the next
 * MPIX_Checkpoint (ft_hold.h, mpi/tests/ft_app_faults.rs). FT_APP_ITERS and FT_APP_EVERY override
 * the iterations (48) and the checkpoint interval (4). */
#include "ft_hold.h"

#include <dirent.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#define NX 48
#define NY 48
#define EVERY 4
#define TASKS 3

/* The parameters rank 0 broadcasts. */
struct params {
    int iters, every;
    double omega;
};

/* What a rank checkpoints. */
struct state {
    int iter;
    struct params p;
    MPI_Comm cart, row;
    MPI_Datatype column;
    MPI_Op minmax;
    int up, down, left, right;
    double residual, lo, hi;
    long row_sum, tasks;
    double u[NX + 2][NY + 2];
};

static double unew[NX + 2][NY + 2];

/* The user operation: elementwise over (min, max) pairs of doubles. */
static void minmax(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    double *a = in, *b = inout;
    for (int i = 0; i + 1 < *len; i += 2) {
        if (a[i] < b[i]) b[i] = a[i];
        if (a[i + 1] > b[i + 1]) b[i + 1] = a[i + 1];
    }
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* This rank's earlier incarnations (their start files); leaves its own. */
static int incarnation(int rank) {
    const char *dir = getenv("FT_TEST_DIR");
    if (dir == NULL) return 0;
    char prefix[64], path[4096];
    snprintf(prefix, sizeof prefix, "started-%d-", rank);
    int n = 0;
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    snprintf(path, sizeof path, "%s/%s%ld", dir, prefix, (long)getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL && fclose(f) == 0, "cannot write %s", path);
    return n;
}

/* Whether FT_TEST_HOLD names this incarnation of the rank at iteration it. */
static int holds_at(int rank, int inc, int it) {
    const char *spec = getenv("FT_TEST_HOLD");
    char want[64];
    int n = snprintf(want, sizeof want, "%d@%d:%d", rank, inc, it);
    for (const char *s = spec; s != NULL && *s != '\0';) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len == (size_t)n && strncmp(s, want, len) == 0) return 1;
        s = end ? end + 1 : NULL;
    }
    return 0;
}

static void hold_at(int rank, int inc, int it) {
    char name[64];
    snprintf(name, sizeof name, "held-%d-%d-%d", rank, inc, it);
    hold_as(name);
}

static void make(struct state *s, int rank, int size) {
    s->p = (struct params){.iters = 48, .every = EVERY, .omega = 0.8};
    const char *iters = getenv("FT_APP_ITERS"), *every = getenv("FT_APP_EVERY");
    if (rank == 0 && iters != NULL) s->p.iters = atoi(iters);
    if (rank == 0 && every != NULL) s->p.every = atoi(every);
    OK(MPI_Bcast(&s->p, (int)sizeof s->p, MPI_BYTE, 0, MPI_COMM_WORLD));
    int dims[2] = {0, 0}, periods[2] = {0, 1}, coords[2];
    OK(MPI_Dims_create(size, 2, dims));
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &s->cart));
    OK(MPI_Cart_shift(s->cart, 0, 1, &s->up, &s->down));
    OK(MPI_Cart_shift(s->cart, 1, 1, &s->left, &s->right));
    int me;
    OK(MPI_Comm_rank(s->cart, &me));
    OK(MPI_Cart_coords(s->cart, me, 2, coords));
    OK(MPI_Comm_split(s->cart, coords[0], coords[1], &s->row));
    OK(MPI_Type_vector(NX, 1, NY + 2, MPI_DOUBLE, &s->column));
    OK(MPI_Type_commit(&s->column));
    OK(MPI_Op_create(minmax, 1, &s->minmax));
    s->iter = 0;
    s->residual = s->lo = s->hi = 0;
    s->row_sum = s->tasks = 0;
    for (int i = 0; i < NX + 2; i++)
        for (int j = 0; j < NY + 2; j++) s->u[i][j] = (double)((rank * 7919 + i * 31 + j * 17) % 1000) / 1000.0;
}

/* Halos: rows up and down (contiguous), columns left and right (the vector type). */
static void halos(struct state *s) {
    MPI_Request r[8];
    OK(MPI_Irecv(&s->u[0][1], NY, MPI_DOUBLE, s->up, 1, s->cart, &r[0]));
    OK(MPI_Irecv(&s->u[NX + 1][1], NY, MPI_DOUBLE, s->down, 2, s->cart, &r[1]));
    OK(MPI_Irecv(&s->u[1][0], 1, s->column, s->left, 3, s->cart, &r[2]));
    OK(MPI_Irecv(&s->u[1][NY + 1], 1, s->column, s->right, 4, s->cart, &r[3]));
    OK(MPI_Isend(&s->u[NX][1], NY, MPI_DOUBLE, s->down, 1, s->cart, &r[4]));
    OK(MPI_Isend(&s->u[1][1], NY, MPI_DOUBLE, s->up, 2, s->cart, &r[5]));
    OK(MPI_Isend(&s->u[1][NY], 1, s->column, s->right, 3, s->cart, &r[6]));
    OK(MPI_Isend(&s->u[1][1], 1, s->column, s->left, 4, s->cart, &r[7]));
    OK(MPI_Waitall(8, r, MPI_STATUSES_IGNORE));
}

/* Rank 0 hands a task to every other rank and takes the answers in any order. */
static void manager_worker(struct state *s, int rank, int size) {
    long answer[64] = {0};
    CHECK(size <= 64, "at most 64 ranks");
    if (rank == 0) {
        for (int k = 0; k < TASKS; k++)
            for (int w = 1; w < size; w++) {
                long task = (long)s->iter * 1000 + k * 100 + w;
                OK(MPI_Send(&task, 1, MPI_LONG, w, 10 + k, MPI_COMM_WORLD));
            }
        for (int n = 0; n < TASKS * (size - 1); n++) {
            long v;
            MPI_Status st;
            OK(MPI_Recv(&v, 1, MPI_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
            CHECK(st.MPI_SOURCE > 0 && st.MPI_SOURCE < size && st.MPI_TAG >= 20 && st.MPI_TAG < 20 + TASKS,
                  "answer from %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
            long want = ((long)s->iter * 1000 + (st.MPI_TAG - 20) * 100 + st.MPI_SOURCE) * 3 + st.MPI_SOURCE;
            CHECK(v == want, "answer %ld from %d, want %ld", v, st.MPI_SOURCE, want);
            answer[st.MPI_SOURCE] += v;
        }
        for (int w = 1; w < size; w++) s->tasks = (s->tasks * 31 + answer[w]) % 1000000007L;
    } else {
        for (int k = 0; k < TASKS; k++) {
            long task;
            OK(MPI_Recv(&task, 1, MPI_LONG, 0, 10 + k, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            long v = task * 3 + rank;
            OK(MPI_Send(&v, 1, MPI_LONG, 0, 20 + k, MPI_COMM_WORLD));
        }
    }
}

static void step(struct state *s, int rank, int size) {
    /* Rank 0 picks this iteration's relaxation factor from the last residual. */
    double omega = rank == 0 ? s->p.omega * (1.0 + 0.1 * (s->residual > 1.0)) : 0;
    OK(MPI_Bcast(&omega, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    halos(s);
    double local = 0, mm[2] = {1e300, -1e300};
    for (int i = 1; i <= NX; i++)
        for (int j = 1; j <= NY; j++) {
            double v = 0.25 * (s->u[i - 1][j] + s->u[i + 1][j] + s->u[i][j - 1] + s->u[i][j + 1]);
            unew[i][j] = s->u[i][j] + omega * (v - s->u[i][j]);
            double d = unew[i][j] - s->u[i][j];
            local += d * d;
            if (unew[i][j] < mm[0]) mm[0] = unew[i][j];
            if (unew[i][j] > mm[1]) mm[1] = unew[i][j];
        }
    for (int i = 1; i <= NX; i++) memcpy(&s->u[i][1], &unew[i][1], NY * sizeof(double));
    OK(MPI_Allreduce(&local, &s->residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    double all[2];
    OK(MPI_Allreduce(mm, all, 2, MPI_DOUBLE, s->minmax, s->cart));
    CHECK(all[0] <= mm[0] && all[1] >= mm[1], "min/max %g %g beside mine %g %g", all[0], all[1], mm[0], mm[1]);
    s->lo += all[0];
    s->hi += all[1];
    long cells = (long)(s->u[1][1] * 1e6), row;
    OK(MPI_Allreduce(&cells, &row, 1, MPI_LONG, MPI_SUM, s->row));
    s->row_sum = (s->row_sum * 31 + row) % 1000000007L;
    manager_worker(s, rank, size);
}

int main(int argc, char **argv) {
    int rank, size;
    ft_init(&argc, &argv, &rank, &size);
    int inc = incarnation(rank);

    static struct state s;
    if (ft_restore(&s, sizeof s))
        fprintf(stderr, "ft_app: rank %d incarnation %d resumes at iteration %d\n", rank, inc, s.iter);
    else
        make(&s, rank, size);
    while (s.iter < s.p.iters) {
        if (holds_at(rank, inc, s.iter)) hold_at(rank, inc, s.iter);
        arm_failpoints(rank, s.iter);
        step(&s, rank, size);
        s.iter++;
        if (s.iter % s.p.every == 0 && s.iter < s.p.iters) OK(MPIX_Checkpoint(&s, sizeof s));
    }

    /* The residual's last bits depend on the order of the sum, which the library may choose by
     * its configuration (fault tolerance, nodes): `exact` has them, `checksum` the residual to 9
     * digits. */
    uint64_t h[2];
    h[0] = fnv(0xcbf29ce484222325ULL, s.u, sizeof s.u);
    h[0] = fnv(h[0], &s.lo, sizeof s.lo);
    h[0] = fnv(h[0], &s.hi, sizeof s.hi);
    h[0] = fnv(h[0], &s.row_sum, sizeof s.row_sum);
    h[0] = fnv(h[0], &s.tasks, sizeof s.tasks);
    char res[32];
    snprintf(res, sizeof res, "%.9e", s.residual);
    h[1] = fnv(h[0], &s.residual, sizeof s.residual);
    h[0] = fnv(h[0], res, strlen(res));
    uint64_t *all = rank == 0 ? malloc(sizeof h * (size_t)size) : NULL;
    OK(MPI_Gather(h, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD));
    if (rank == 0) {
        uint64_t sum[2] = {0xcbf29ce484222325ULL, 0xcbf29ce484222325ULL};
        for (int r = 0; r < size; r++)
            for (int k = 0; k < 2; k++) sum[k] = fnv(sum[k], &all[2 * r + k], sizeof all[0]);
        printf("checksum %016llx exact %016llx\n", (unsigned long long)sum[0], (unsigned long long)sum[1]);
        free(all);
    }
    OK(MPI_Comm_free(&s.row));
    OK(MPI_Comm_free(&s.cart));
    OK(MPI_Type_free(&s.column));
    OK(MPI_Op_free(&s.minmax));
    printf("OK ft_app %d\n", rank);
    MPI_Finalize();
    return 0;
}
