/* The MPI state across a restart (mpi/src/ft/image.rs): a rank keeps MPI handles in the bytes it
 * checkpoints (a Comm_split row communicator with a name and MPI_ERRORS_RETURN, a Cart_create grid,
 * a vector datatype, a user reduction, a group), each made after objects freed since (so no handle
 * is its table's first slot), and uses them after the checkpoint: an Allreduce on the row with the
 * user operation, a send of the vector type around the ring, a halo along the grid's first
 * dimension, an Ibarrier on the grid (its tag in step with the survivors'), the name, the group,
 * an attribute of the row (its value a word, its keyval's delete callback run by the final free),
 * an info object, and a persistent send/receive pair on the grid with the rank of the other group
 * (MPI_Send_init of 3 ints, MPI_Recv_init of one vector element), started each iteration, its
 * buffers in a page mapped at a fixed address in every incarnation (the application keeps a
 * persistent request's buffer where it was: its address is saved as it is), and two persistent
 * collectives on the row made before the first checkpoint, started each iteration, their buffers
 * in that page too: MPI_Barrier_init, MPI_Allreduce_init (N ints, the user operation, freed
 * before the request), MPI_Bcast_init (one vector element from the row's rank 0) and
 * MPI_Reduce_init (MPI_SUM of N ints to the row's rank 1), MPI_Gather_init (to the row's rank 0),
 * MPI_Alltoall_init, MPI_Scan_init, MPI_Reduce_scatter_block_init, and with count and
 * displacement arrays (copied at init: local arrays then) MPI_Allgatherv_init, MPI_Alltoallv_init
 * and MPI_Gatherv_init (to the row's rank 1), and on the grid MPI_Neighbor_allgather_init and
 * MPI_Neighbor_alltoallv_init (a rank's blocks all alike: the two neighbours of the periodic
 * dimension of 2 are one rank) and MPI_Neighbor_alltoallw_init (likewise), and
 * MPI_Reduce_scatter_init (1 and 2 ints) and MPI_Alltoallw_init (an int to the row's rank 0, a
 * vector element to rank 1) on the row, whose results are checked. A restarted rank finds both handles valid (MPI_Request_get_status:
 * inactive, so complete and empty) and starts them in step with the survivors.
 * FT_TEST_HOLD=<rank>:<n> makes that rank's first incarnation hold after its n-th checkpoint,
 * its pid in FT_TEST_DIR/held-<rank>, to be killed there: its group restarts from that
 * checkpoint and goes on with the handles it reads back from it. Each rank prints a sum of
 * everything it received, the same with and without the kill. FT_STATE_EARLY=1: a restarted
 * incarnation makes a datatype before MPIX_Checkpoint_restore, under MPI_ERRORS_ARE_FATAL: it is
 * refused (MPIX_ERR_NOT_RESTORED: the handles could not keep their values) and ends the job.
 *
 * The rest of the state (checked in more(), made in make_more()): an error class and code of the
 * program's with strings (MPI_Error_class/_string, MPI_LASTUSEDCODE; a code added after the
 * checkpoint is the survivors' value), hints of the row (MPI_Comm_set_info), attached buffers of
 * buffered sends (the process's, the row's, a session's; used each iteration, detached at the end
 * with the address and size attached), a session (its info and handler, a group of its
 * mpi://WORLD and a communicator from it), a partitioned send/receive pair with the other group's
 * rank (started, its partitions marked ready out of order), and an MPI_Allreduce_init whose
 * datatype and operation the program freed (a second free of either fails after a restart too).
 * Before each checkpoint, MPIX_Checkpoint is refused (MPI_ERR_PENDING) with a generalized request
 * outstanding, and with a buffered send of 1 MiB its receiver has not matched. */
#include "ft_hold.h"

#include <stdint.h>
#include <sys/mman.h>
#include <time.h>
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#include <unistd.h>

#define ITERS 12
#define EVERY 4
#define N 4

/* The user reduction: sum modulo a prime (commutative, associative, not MPI_SUM's answer). */
#define P 1000003
static void addmod(void *in, void *inout, int *len, MPI_Datatype *dt) {
    (void)dt;
    int *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = (int)(((long)a[i] + b[i]) % P);
}

/* What a rank checkpoints: where it is, its handles, its running sum. */
struct state {
    int iter;
    MPI_Comm row, cart;
    MPI_Datatype vec;
    MPI_Op op;
    MPI_Group group;
    int key;
    MPI_Info info;
    MPI_Request psend, precv, pcoll, pred, pbcast, preduce, pmore[12];
    int eclass, ecode, elast;
    MPI_Session session;
    MPI_Group sgroup;
    MPI_Comm scomm;
    MPI_Request ppsend, pprecv, pfreed, pp6send, pp6recv;
    MPI_Datatype freed_type;
    MPI_Op freed_op;
    long sum;
};

/* The persistent requests' buffers: 3 ints sent, then 6 ints the vector element lands in (ints
 * 0, 2, 4); the allreduce's N ints in at 16, out at 24; the broadcast's 6 at 32; the reduce's N
 * in at 40, out at 48; then gather (56, 58), alltoall (60, 62), scan (64, 65), reduce_scatter_block
 * (66, 68), allgatherv (72, 74), alltoallv (76, 78), gatherv (80, 82), neighbour allgather (88,
 * 90), neighbour alltoallv (96, 100), reduce_scatter (104, 108), alltoallw (112, 120),
 * neighbour alltoallw (136, 140), the partitioned pair (160, 168), the allreduce of freed handles
 * (176, 180), each send then receive; then the attached buffers: the row's at int 1024, the
 * session's at 2048, the process's at 4096; at the same address in every incarnation. */
#define AREA ((int *)(uintptr_t)0x3e0000000000ull)
#define ROW_BUF (AREA + 1024)
#define SESSION_BUF (AREA + 2048)
#define SMALL_BUF 4096
#define PROC_BUF (AREA + 4096)
#define BIG (1 << 20)
#define PROC_BUF_SIZE (BIG + 65536)
#define AREA_BYTES (4096 * sizeof(int) + PROC_BUF_SIZE)
static void map_area(void) {
    void *p = mmap(AREA, AREA_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(p == (void *)AREA, "mmap at %p: %p", (void *)AREA, p);
}

/* The row attribute's delete callback: adds the value it is given. */
static long deleted;
static int on_delete(MPI_Comm c, int key, void *value, void *extra) {
    (void)c;
    (void)key;
    CHECK(extra == (void *)(intptr_t)7, "extra_state %p", extra);
    deleted += (long)(intptr_t)value;
    return MPI_SUCCESS;
}

static void make(struct state *s, int rank, int size) {
    MPI_Comm tmp;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &tmp));
    OK(MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &s->row));
    OK(MPI_Comm_free(&tmp));
    OK(MPI_Comm_set_name(s->row, "row"));
    OK(MPI_Comm_set_errhandler(s->row, MPI_ERRORS_RETURN));
    int dims[2] = {size / 2, 2}, periods[2] = {1, 0};
    OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &s->cart));
    MPI_Datatype pair;
    OK(MPI_Type_contiguous(2, MPI_INT, &pair));
    OK(MPI_Type_vector(3, 1, 2, MPI_INT, &s->vec));
    OK(MPI_Type_commit(&s->vec));
    OK(MPI_Type_free(&pair));
    MPI_Op unused;
    OK(MPI_Op_create(addmod, 0, &unused));
    OK(MPI_Op_create(addmod, 1, &s->op));
    OK(MPI_Op_free(&unused));
    OK(MPI_Comm_group(s->row, &s->group));
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, on_delete, &s->key, (void *)(intptr_t)7));
    OK(MPI_Comm_set_attr(s->row, s->key, (void *)(intptr_t)(100 + rank)));
    OK(MPI_Info_create(&s->info));
    OK(MPI_Info_set(s->info, "layout", "rows"));
    int other = (rank + 2) % size; /* the grid is not reordered: its ranks are the world's */
    OK(MPI_Send_init(AREA, 3, MPI_INT, other, 9, s->cart, &s->psend));
    OK(MPI_Recv_init(AREA + 8, 1, s->vec, other, 9, s->cart, &s->precv));
    OK(MPI_Barrier_init(s->row, MPI_INFO_NULL, &s->pcoll));
    OK(MPI_Allreduce_init(AREA + 16, AREA + 24, N, MPI_INT, s->op, s->row, MPI_INFO_NULL, &s->pred));
    OK(MPI_Bcast_init(AREA + 32, 1, s->vec, 0, s->row, MPI_INFO_NULL, &s->pbcast));
    OK(MPI_Reduce_init(AREA + 40, AREA + 48, N, MPI_INT, MPI_SUM, 1, s->row, MPI_INFO_NULL, &s->preduce));
    OK(MPI_Gather_init(AREA + 56, 1, MPI_INT, AREA + 58, 1, MPI_INT, 0, s->row, MPI_INFO_NULL, &s->pmore[0]));
    OK(MPI_Alltoall_init(AREA + 60, 1, MPI_INT, AREA + 62, 1, MPI_INT, s->row, MPI_INFO_NULL, &s->pmore[1]));
    OK(MPI_Scan_init(AREA + 64, AREA + 65, 1, MPI_INT, MPI_SUM, s->row, MPI_INFO_NULL, &s->pmore[2]));
    OK(MPI_Reduce_scatter_block_init(AREA + 66, AREA + 68, 1, MPI_INT, MPI_SUM, s->row, MPI_INFO_NULL,
                                     &s->pmore[3]));
    int ones[2] = {1, 1}, rev[2] = {1, 0}, fwd[2] = {0, 1}, apart[2] = {2, 0};
    OK(MPI_Allgatherv_init(AREA + 72, 1, MPI_INT, AREA + 74, ones, rev, MPI_INT, s->row, MPI_INFO_NULL, &s->pmore[4]));
    OK(MPI_Alltoallv_init(AREA + 76, ones, rev, MPI_INT, AREA + 78, ones, fwd, MPI_INT, s->row, MPI_INFO_NULL,
                          &s->pmore[5]));
    OK(MPI_Gatherv_init(AREA + 80, 1, MPI_INT, AREA + 82, ones, apart, MPI_INT, 1, s->row, MPI_INFO_NULL,
                        &s->pmore[6]));
    int four[4] = {1, 1, 1, 1}, at[4] = {0, 1, 2, 3}, back[4] = {3, 2, 1, 0};
    OK(MPI_Neighbor_allgather_init(AREA + 88, 1, MPI_INT, AREA + 90, 1, MPI_INT, s->cart, MPI_INFO_NULL,
                                   &s->pmore[7]));
    OK(MPI_Neighbor_alltoallv_init(AREA + 96, four, back, MPI_INT, AREA + 100, four, at, MPI_INT, s->cart,
                                   MPI_INFO_NULL, &s->pmore[8]));
    int split[2] = {1, 2};
    OK(MPI_Reduce_scatter_init(AREA + 104, AREA + 108, split, MPI_INT, MPI_SUM, s->row, MPI_INFO_NULL,
                               &s->pmore[9]));
    /* Alltoallw on the row: an int (112) to rank 0, a vector element (113, 115, 117) to rank 1;
     * received as the same type at 120 and 128 from ranks 0 and 1. */
    int wcounts[2] = {1, 1}, sbytes[2] = {0, 4}, rbytes[2] = {0, 32};
    MPI_Datatype stypes[2] = {MPI_INT, s->vec}, rtypes[2] = {MPI_INT, MPI_INT}, ints4[4];
    if (rank % 2 == 1) rtypes[0] = rtypes[1] = s->vec;
    OK(MPI_Alltoallw_init(AREA + 112, wcounts, sbytes, stypes, AREA + 120, wcounts, rbytes, rtypes, s->row,
                          MPI_INFO_NULL, &s->pmore[10]));
    MPI_Aint nbytes[4] = {0, 4, 8, 12};
    for (int k = 0; k < 4; k++) ints4[k] = MPI_INT;
    OK(MPI_Neighbor_alltoallw_init(AREA + 136, four, nbytes, ints4, AREA + 140, four, nbytes, ints4, s->cart,
                                   MPI_INFO_NULL, &s->pmore[11]));
    /* All copied at init. */
    rev[0] = fwd[1] = apart[0] = ones[1] = four[0] = at[1] = back[2] = split[1] = wcounts[0] = sbytes[1] = -7;
    nbytes[1] = 1000;
    stypes[1] = rtypes[0] = ints4[2] = MPI_DATATYPE_NULL;
    s->iter = 0;
    s->sum = 0;
}

/* The generalized request's callbacks (it is completed before the checkpoint that counts). */
static int gq_query(void *extra, MPI_Status *st) {
    (void)extra;
    MPI_Status_set_elements(st, MPI_BYTE, 0);
    MPI_Status_set_cancelled(st, 0);
    return MPI_SUCCESS;
}
static int gq_free(void *extra) {
    (void)extra;
    return MPI_SUCCESS;
}
static int gq_cancel(void *extra, int complete) {
    (void)extra;
    (void)complete;
    return MPI_SUCCESS;
}

/* The rest of the state (the header comment), made once after make(). */
static void make_more(struct state *s, int rank, int size) {
    OK(MPI_Add_error_class(&s->eclass));
    OK(MPI_Add_error_code(s->eclass, &s->ecode));
    OK(MPI_Add_error_string(s->eclass, "ft_state class"));
    OK(MPI_Add_error_string(s->ecode, "ft_state code"));
    s->elast = s->ecode;
    MPI_Info info;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    OK(MPI_Comm_set_info(s->row, info));
    OK(MPI_Info_free(&info));
    OK(MPI_Buffer_attach(PROC_BUF, PROC_BUF_SIZE));
    OK(MPI_Comm_attach_buffer(s->row, ROW_BUF, SMALL_BUF));
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "ft_state", "kept"));
    OK(MPI_Session_init(info, MPI_ERRORS_RETURN, &s->session));
    OK(MPI_Info_free(&info));
    OK(MPI_Group_from_session_pset(s->session, "mpi://WORLD", &s->sgroup));
    OK(MPI_Comm_create_from_group(s->sgroup, "ft_state", MPI_INFO_NULL, MPI_ERRORS_RETURN, &s->scomm));
    OK(MPI_Session_attach_buffer(s->session, SESSION_BUF, SMALL_BUF));
    int other = (rank + 2) % size;
    OK(MPI_Psend_init(AREA + 184, 1, 1, MPI_INT, rank ^ 1, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &s->pp6send));
    OK(MPI_Precv_init(AREA + 185, 1, 1, MPI_INT, rank ^ 1, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &s->pp6recv));
    OK(MPI_Psend_init(AREA + 160, 2, 2, MPI_INT, other, 11, s->cart, MPI_INFO_NULL, &s->ppsend));
    OK(MPI_Precv_init(AREA + 168, 2, 2, MPI_INT, other, 11, s->cart, MPI_INFO_NULL, &s->pprecv));
    OK(MPI_Type_contiguous(1, MPI_INT, &s->freed_type)); /* addmod's len counts ints */
    OK(MPI_Type_commit(&s->freed_type));
    OK(MPI_Op_create(addmod, 1, &s->freed_op));
    OK(MPI_Allreduce_init(AREA + 176, AREA + 180, 2, s->freed_type, s->freed_op, s->row, MPI_INFO_NULL, &s->pfreed));
    MPI_Datatype t = s->freed_type;
    MPI_Op o = s->freed_op;
    OK(MPI_Type_free(&t));
    OK(MPI_Op_free(&o));
}

/* Uses and checks the rest of the state (the header comment), each iteration. */
static void more(struct state *s, int rank, int size) {
    int it = s->iter, first = rank / 2 * 2, flag, cls, len;
    /* The program's error class, code and strings, MPI_LASTUSEDCODE; a code made after the
     * checkpoint has the survivors' value. */
    OK(MPI_Error_class(s->ecode, &cls));
    CHECK(cls == s->eclass, "class of %#x: %#x, want %#x", s->ecode, cls, s->eclass);
    char es[MPI_MAX_ERROR_STRING];
    OK(MPI_Error_string(s->ecode, es, &len));
    CHECK(strcmp(es, "ft_state code") == 0, "code's string '%s'", es);
    OK(MPI_Error_string(s->eclass, es, &len));
    CHECK(strcmp(es, "ft_state class") == 0, "class's string '%s'", es);
    if (it == 6) {
        int c, both[2], most[2];
        OK(MPI_Add_error_code(s->eclass, &c));
        CHECK(c == s->elast + 1, "new code %#x after %#x", c, s->elast);
        both[0] = c;
        both[1] = -c;
        OK(MPI_Allreduce(both, most, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        CHECK(most[0] == c && most[1] == -c, "new codes differ: %#x..%#x", -most[1], most[0]);
        s->elast = c;
    }
    int *last;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
    CHECK(flag && *last == s->elast, "MPI_LASTUSEDCODE %#x, want %#x", flag ? *last : -1, s->elast);

    /* The row's hints. */
    MPI_Info got;
    char v[16];
    OK(MPI_Comm_get_info(s->row, &got));
    OK(MPI_Info_get(got, "mpi_assert_no_any_tag", sizeof v - 1, v, &flag));
    CHECK(flag && strcmp(v, "true") == 0, "row's hint: %d '%s'", flag, flag ? v : "");
    OK(MPI_Info_free(&got));

    /* The session: its info and handler, its group, its communicator. */
    OK(MPI_Session_get_info(s->session, &got));
    OK(MPI_Info_get(got, "ft_state", sizeof v - 1, v, &flag));
    CHECK(flag && strcmp(v, "kept") == 0, "session's info: %d '%s'", flag, flag ? v : "");
    OK(MPI_Info_free(&got));
    MPI_Errhandler eh;
    OK(MPI_Session_get_errhandler(s->session, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "session's handler %#x", (unsigned)eh);
    int n;
    OK(MPI_Group_size(s->sgroup, &n));
    CHECK(n == size, "session group of %d", n);
    int one = rank + it, total;
    OK(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, s->scomm));
    CHECK(total == size * (size - 1) / 2 + size * it, "session communicator's sum %d", total);
    s->sum += total;

    /* The session's communicators, and one made from its group now, belong to it: a buffered send
     * on them takes the session's buffer, too small for this message (the process's is not). */
    MPI_Comm made = MPI_COMM_NULL;
    if (it == 6) OK(MPI_Comm_create_from_group(s->sgroup, "ft_state 6", MPI_INFO_NULL, MPI_ERRORS_RETURN, &made));
    MPI_Comm of_session[2] = {s->scomm, made};
    for (int k = 0; k < 2 && of_session[k] != MPI_COMM_NULL; k++) {
        MPI_Error_class(MPI_Bsend(PROC_BUF, 2 * SMALL_BUF, MPI_BYTE, (rank + 1) % size, 25, of_session[k]), &cls);
        CHECK(cls == MPI_ERR_BUFFER, "a buffered send larger than the session's buffer on %d: class %d", k, cls);
    }
    if (made != MPI_COMM_NULL) OK(MPI_Comm_free(&made));

    /* A partitioned send made after the checkpoint takes the operation id it took before (not
     * one of a restored request's): with the restored pair to the partner (started first now,
     * the same tag), each receive gets its own sender's partition. */
    if (it == 6) {
        MPI_Request ps, pr;
        int po = rank * 7 + 2, pi[2] = {-1, -1}, partner = rank ^ 1;
        AREA[184] = rank * 5 + 1;
        AREA[185] = -1;
        OK(MPI_Psend_init(&po, 1, 1, MPI_INT, partner, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &ps));
        OK(MPI_Precv_init(pi, 1, 1, MPI_INT, partner, 13, MPI_COMM_WORLD, MPI_INFO_NULL, &pr));
        MPI_Request all[4] = {s->pp6recv, pr, s->pp6send, ps};
        OK(MPI_Startall(4, all));
        OK(MPI_Pready(0, ps));
        OK(MPI_Pready(0, s->pp6send));
        OK(MPI_Waitall(4, all, MPI_STATUSES_IGNORE));
        CHECK(AREA[185] == partner * 5 + 1 && pi[0] == partner * 7 + 2 && pi[1] == -1,
              "partitioned receives from the partner: %d %d %d", AREA[185], pi[0], pi[1]);
        OK(MPI_Request_free(&ps));
        OK(MPI_Request_free(&pr));
    }

    /* Buffered sends from the process's buffer (world), the row's, the session's (its
     * communicator). */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, partner = 1 - rank % 2, out = rank * 31 + it;
    int in[3] = {-1, -1, -1};
    OK(MPI_Bsend(&out, 1, MPI_INT, next, 21, MPI_COMM_WORLD));
    OK(MPI_Recv(&in[0], 1, MPI_INT, prev, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_Bsend(&out, 1, MPI_INT, partner, 22, s->row));
    OK(MPI_Recv(&in[1], 1, MPI_INT, partner, 22, s->row, MPI_STATUS_IGNORE));
    OK(MPI_Bsend(&out, 1, MPI_INT, next, 23, s->scomm));
    OK(MPI_Recv(&in[2], 1, MPI_INT, prev, 23, s->scomm, MPI_STATUS_IGNORE));
    int want[3] = {prev * 31 + it, (first + partner) * 31 + it, prev * 31 + it};
    for (int k = 0; k < 3; k++) {
        CHECK(in[k] == want[k], "buffered send %d: %d, want %d", k, in[k], want[k]);
        s->sum += in[k];
    }

    /* The partitioned pair with the other group's rank, partitions ready out of order. */
    int other = (rank + 2) % size;
    for (int j = 0; j < 4; j++) {
        AREA[160 + j] = rank * 61 + it * 4 + j;
        AREA[168 + j] = -1;
    }
    OK(MPI_Start(&s->pprecv));
    OK(MPI_Start(&s->ppsend));
    OK(MPI_Pready(1, s->ppsend));
    OK(MPI_Pready(0, s->ppsend));
    MPI_Request pp[2] = {s->pprecv, s->ppsend};
    OK(MPI_Waitall(2, pp, MPI_STATUSES_IGNORE));
    CHECK(pp[0] == s->pprecv && pp[1] == s->ppsend, "partitioned requests stay");
    for (int j = 0; j < 4; j++) {
        CHECK(AREA[168 + j] == other * 61 + it * 4 + j, "partitioned[%d] = %d", j, AREA[168 + j]);
        s->sum += AREA[168 + j];
    }

    /* The allreduce of a freed type and operation, which stay freed. */
    AREA[176] = rank + it;
    AREA[177] = rank * 2 + it;
    AREA[180] = AREA[181] = -1;
    OK(MPI_Start(&s->pfreed));
    OK(MPI_Wait(&s->pfreed, MPI_STATUS_IGNORE));
    CHECK(AREA[180] == 2 * first + 1 + 2 * it && AREA[181] == 2 * (2 * first + 1) + 2 * it,
          "freed handles' allreduce %d %d", AREA[180], AREA[181]);
    s->sum += AREA[180] + AREA[181];
    MPI_Datatype t = s->freed_type;
    MPI_Op o = s->freed_op;
    CHECK(MPI_Type_free(&t) != MPI_SUCCESS, "the freed datatype %#x freed again", (unsigned)s->freed_type);
    CHECK(MPI_Op_free(&o) != MPI_SUCCESS, "the freed operation %#x freed again", (unsigned)s->freed_op);
}

/* MPIX_Checkpoint: refused with a buffered send of BIG bytes to the row partner (in this group)
 * not yet received, and with a generalized request outstanding; then taken right after a small
 * buffered send to the partner (its message gone: the checkpoint reclaims its space). */
static void checkpoint(struct state *s, int rank) {
    static char big[BIG], got[BIG];
    int cls, partner = rank ^ 1;
    memset(big, rank + 1, sizeof big);
    OK(MPI_Bsend(big, BIG, MPI_BYTE, partner, 24, MPI_COMM_WORLD));
    MPI_Error_class(MPIX_Checkpoint(s, sizeof *s), &cls);
    CHECK(cls == MPI_ERR_PENDING, "checkpoint with a buffered send in flight: class %d", cls);
    OK(MPI_Recv(got, BIG, MPI_BYTE, partner, 24, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(got[0] == (char)(partner + 1) && got[BIG - 1] == got[0], "big buffered send");
    OK(MPI_Buffer_flush());
    int small = rank, from = -1;
    OK(MPI_Bsend(&small, 1, MPI_INT, partner, 26, MPI_COMM_WORLD));
    OK(MPI_Recv(&from, 1, MPI_INT, partner, 26, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(from == partner, "small buffered send from %d", from);
    /* The partner has received this rank's small message (it receives before it answers): the
     * buffered send has left, though it may have waited in the Endpoint on a loaded machine. */
    OK(MPI_Sendrecv(NULL, 0, MPI_BYTE, partner, 27, NULL, 0, MPI_BYTE, partner, 27, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    MPI_Request g;
    OK(MPI_Grequest_start(gq_query, gq_free, gq_cancel, NULL, &g));
    MPI_Error_class(MPIX_Checkpoint(s, sizeof *s), &cls);
    CHECK(cls == MPI_ERR_PENDING, "checkpoint with a generalized request: class %d", cls);
    OK(MPI_Grequest_complete(g));
    OK(MPI_Wait(&g, MPI_STATUS_IGNORE));
    int rc = MPIX_Checkpoint(s, sizeof *s);
    char why[MPI_MAX_ERROR_STRING] = "";
    int n = 0;
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, why, &n);
    CHECK(rc == MPI_SUCCESS, "checkpoint after the buffered sends left: %s", why);
}

/* Detaches the buffers (checking the address and size attached), frees the rest. */
static void unmake_more(struct state *s) {
    void *addr;
    int n;
    OK(MPI_Comm_detach_buffer(s->row, &addr, &n));
    CHECK(addr == ROW_BUF && n == SMALL_BUF, "row's buffer %p, %d bytes", addr, n);
    OK(MPI_Session_detach_buffer(s->session, &addr, &n));
    CHECK(addr == SESSION_BUF && n == SMALL_BUF, "session's buffer %p, %d bytes", addr, n);
    OK(MPI_Buffer_detach(&addr, &n));
    CHECK(addr == PROC_BUF && n == PROC_BUF_SIZE, "process's buffer %p, %d bytes", addr, n);
    OK(MPI_Request_free(&s->ppsend));
    OK(MPI_Request_free(&s->pprecv));
    OK(MPI_Request_free(&s->pfreed));
    OK(MPI_Request_free(&s->pp6send));
    OK(MPI_Request_free(&s->pp6recv));
    OK(MPI_Comm_free(&s->scomm));
    OK(MPI_Group_free(&s->sgroup));
    OK(MPI_Session_finalize(&s->session));
}

static void step(struct state *s, int rank, int size) {
    int it = s->iter;
    /* The handles are the objects made: name, group, type, topology. */
    char name[MPI_MAX_OBJECT_NAME];
    int len, n, tsize, topo;
    OK(MPI_Comm_get_name(s->row, name, &len));
    CHECK(strcmp(name, "row") == 0, "row's name is '%s'", name);
    OK(MPI_Group_size(s->group, &n));
    CHECK(n == 2, "group of %d", n);
    OK(MPI_Type_size(s->vec, &tsize));
    CHECK(tsize == 3 * (int)sizeof(int), "vector of %d bytes", tsize);
    OK(MPI_Topo_test(s->cart, &topo));
    CHECK(topo == MPI_CART, "topology %d", topo);
    MPI_Errhandler eh;
    OK(MPI_Comm_get_errhandler(s->row, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "row's handler %#x", (unsigned)eh);
    void *value;
    int flag;
    OK(MPI_Comm_get_attr(s->row, s->key, &value, &flag));
    CHECK(flag && value == (void *)(intptr_t)(100 + rank), "row's attribute %d %p", flag, value);

    char layout[16];
    OK(MPI_Info_get(s->info, "layout", sizeof layout - 1, layout, &flag));
    CHECK(flag && strcmp(layout, "rows") == 0, "info: %d '%s'", flag, flag ? layout : "");

    /* Allreduce on the row with the user operation. */
    int in[N], out[N];
    for (int j = 0; j < N; j++) in[j] = rank * 1000 + it * 10 + j;
    OK(MPI_Allreduce(in, out, N, MPI_INT, s->op, s->row));
    int first = rank / 2 * 2;
    for (int j = 0; j < N; j++) {
        int want = (first * 1000 + it * 10 + j) + ((first + 1) * 1000 + it * 10 + j);
        CHECK(out[j] == want % P, "allreduce[%d] = %d, want %d", j, out[j], want);
        s->sum += out[j];
    }

    /* One vector element (ints 0, 2, 4 of six) to the next rank, three ints from the previous. */
    int six[6], three[3];
    for (int j = 0; j < 6; j++) six[j] = rank * 100 + it + j;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    OK(MPI_Sendrecv(six, 1, s->vec, next, 7, three, 3, MPI_INT, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    for (int j = 0; j < 3; j++) {
        CHECK(three[j] == prev * 100 + it + 2 * j, "vector[%d] = %d", j, three[j]);
        s->sum += three[j];
    }

    /* A halo along the grid's periodic first dimension, then an Ibarrier on the grid. */
    int src, dst, halo = -1, mine = rank * 7 + it;
    OK(MPI_Cart_shift(s->cart, 0, 1, &src, &dst));
    OK(MPI_Sendrecv(&mine, 1, MPI_INT, dst, 8, &halo, 1, MPI_INT, src, 8, s->cart, MPI_STATUS_IGNORE));
    int src_world;
    MPI_Group cg, wg;
    OK(MPI_Comm_group(s->cart, &cg));
    OK(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    OK(MPI_Group_translate_ranks(cg, 1, &src, wg, &src_world));
    OK(MPI_Group_free(&cg));
    OK(MPI_Group_free(&wg));
    CHECK(halo == src_world * 7 + it, "halo %d from %d", halo, src_world);
    s->sum += halo;
    MPI_Request r;
    OK(MPI_Ibarrier(s->cart, &r));
    OK(MPI_Wait(&r, MPI_STATUS_IGNORE));

    /* The persistent pair with the other group's rank. */
    int other = (rank + 2) % size;
    for (int j = 0; j < 3; j++) AREA[j] = rank * 10000 + it * 10 + j;
    for (int j = 0; j < 6; j++) AREA[8 + j] = -1;
    OK(MPI_Start(&s->precv));
    OK(MPI_Start(&s->psend));
    MPI_Request both[2] = {s->precv, s->psend};
    MPI_Status st[2];
    OK(MPI_Waitall(2, both, st));
    CHECK(both[0] == s->precv && both[1] == s->psend, "persistent requests stay");
    CHECK(st[0].MPI_SOURCE == other && st[0].MPI_TAG == 9, "persistent receive from %d tag %d", st[0].MPI_SOURCE,
          st[0].MPI_TAG);
    for (int j = 0; j < 3; j++) {
        CHECK(AREA[8 + 2 * j] == other * 10000 + it * 10 + j, "persistent[%d] = %d", j, AREA[8 + 2 * j]);
        CHECK(AREA[8 + 2 * j + 1] == -1, "persistent gap %d written", j);
        s->sum += AREA[8 + 2 * j];
    }

    /* The persistent collectives on the row: a barrier, a sum, a broadcast, a reduce. */
    int root = rank % 2 == 0;
    for (int j = 0; j < N; j++) {
        AREA[16 + j] = rank * 300 + it * 3 + j;
        AREA[24 + j] = -1;
        AREA[40 + j] = rank * 50 + it + j;
        AREA[48 + j] = -1;
    }
    for (int j = 0; j < 6; j++) AREA[32 + j] = root ? rank * 20 + it + j : -1;
    OK(MPI_Start(&s->pcoll));
    OK(MPI_Wait(&s->pcoll, MPI_STATUS_IGNORE));
    MPI_Request colls[3] = {s->pred, s->pbcast, s->preduce};
    OK(MPI_Startall(3, colls));
    OK(MPI_Waitall(3, colls, MPI_STATUSES_IGNORE));
    CHECK(colls[0] == s->pred && colls[1] == s->pbcast && colls[2] == s->preduce && s->pcoll != MPI_REQUEST_NULL,
          "persistent collectives stay");
    for (int j = 0; j < N; j++) {
        int want = (first * 300 + it * 3 + j) + ((first + 1) * 300 + it * 3 + j);
        CHECK(AREA[24 + j] == want % P, "persistent allreduce[%d] = %d, want %d", j, AREA[24 + j], want);
        s->sum += AREA[24 + j];
        want = rank % 2 == 1 ? (first * 50 + it + j) + ((first + 1) * 50 + it + j) : -1;
        CHECK(AREA[48 + j] == want, "persistent reduce[%d] = %d, want %d", j, AREA[48 + j], want);
        s->sum += AREA[48 + j];
    }
    for (int j = 0; j < 6; j++) {
        int want = j % 2 == 0 ? first * 20 + it + j : root ? first * 20 + it + j : -1;
        CHECK(AREA[32 + j] == want, "persistent bcast[%d] = %d, want %d", j, AREA[32 + j], want);
        s->sum += AREA[32 + j];
    }

    /* Gather to the row's rank 0, alltoall, scan, reduce_scatter_block on the row. */
    int rr = rank % 2;
    AREA[56] = rank * 7 + it;
    AREA[64] = rank + it;
    for (int k = 0; k < 2; k++) {
        AREA[58 + k] = AREA[62 + k] = -1;
        AREA[60 + k] = rank * 100 + k * 10 + it;
        AREA[66 + k] = rank * 3 + k + it;
    }
    AREA[65] = AREA[68] = -1;
    AREA[72] = rank * 11 + it;
    AREA[80] = rank * 13 + it;
    for (int k = 0; k < 2; k++) AREA[76 + k] = rank * 100 + k * 10 + it;
    AREA[74] = AREA[75] = AREA[78] = AREA[79] = -1;
    for (int k = 82; k < 85; k++) AREA[k] = -1;
    AREA[88] = rank * 19 + it;
    for (int k = 0; k < 4; k++) {
        AREA[96 + k] = rank * 23 + it;
        AREA[90 + k] = AREA[100 + k] = -1;
    }
    for (int k = 0; k < 3; k++) AREA[104 + k] = rank * 5 + k + it;
    AREA[108] = AREA[109] = -1;
    for (int k = 0; k < 6; k++) AREA[112 + k] = rank * 41 + k + it;
    for (int k = 120; k < 144; k++) AREA[k] = -1;
    for (int k = 0; k < 4; k++) AREA[136 + k] = rank * 29 + it;
    OK(MPI_Startall(12, s->pmore));
    OK(MPI_Waitall(12, s->pmore, MPI_STATUSES_IGNORE));
    int scan = 0, rsb = 0;
    for (int k = 0; k < 2; k++) {
        int want = rr == 0 ? (first + k) * 7 + it : -1;
        CHECK(AREA[58 + k] == want, "persistent gather[%d] = %d, want %d", k, AREA[58 + k], want);
        want = (first + k) * 100 + rr * 10 + it;
        CHECK(AREA[62 + k] == want, "persistent alltoall[%d] = %d, want %d", k, AREA[62 + k], want);
        s->sum += AREA[58 + k] + AREA[62 + k];
        scan += k <= rr ? first + k + it : 0;
        rsb += (first + k) * 3 + rr + it;
    }
    CHECK(AREA[65] == scan, "persistent scan = %d, want %d", AREA[65], scan);
    CHECK(AREA[68] == rsb, "persistent reduce_scatter_block = %d, want %d", AREA[68], rsb);
    s->sum += AREA[65] + AREA[68];
    for (int k = 0; k < 2; k++) {
        int want = (first + 1 - k) * 11 + it;
        CHECK(AREA[74 + k] == want, "persistent allgatherv[%d] = %d, want %d", k, AREA[74 + k], want);
        want = (first + k) * 100 + (1 - rr) * 10 + it;
        CHECK(AREA[78 + k] == want, "persistent alltoallv[%d] = %d, want %d", k, AREA[78 + k], want);
        s->sum += AREA[74 + k] + AREA[78 + k];
    }
    int gv[3] = {rr ? (first + 1) * 13 + it : -1, -1, rr ? first * 13 + it : -1};
    for (int k = 0; k < 3; k++) {
        CHECK(AREA[82 + k] == gv[k], "persistent gatherv[%d] = %d, want %d", k, AREA[82 + k], gv[k]);
        s->sum += AREA[82 + k];
    }
    for (int d = 0; d < 2; d++) {
        int nb[2];
        OK(MPI_Cart_shift(s->cart, d, 1, &nb[0], &nb[1]));
        for (int k = 0; k < 2; k++) {
            int j = 2 * d + k, ag = nb[k] == MPI_PROC_NULL ? -1 : nb[k] * 19 + it;
            int av = nb[k] == MPI_PROC_NULL ? -1 : nb[k] * 23 + it;
            CHECK(AREA[90 + j] == ag, "persistent neighbour allgather[%d] = %d, want %d", j, AREA[90 + j], ag);
            CHECK(AREA[100 + j] == av, "persistent neighbour alltoallv[%d] = %d, want %d", j, AREA[100 + j], av);
            int aw = nb[k] == MPI_PROC_NULL ? -1 : nb[k] * 29 + it;
            CHECK(AREA[140 + j] == aw, "persistent neighbour alltoallw[%d] = %d, want %d", j, AREA[140 + j], aw);
            s->sum += AREA[90 + j] + AREA[100 + j] + AREA[140 + j];
        }
    }
    for (int j = 0; j < 2; j++) /* from row rank j, at 120 + 8 j */
        for (int m = 0; m < 5; m++) {
            int want = rr == 0 ? (m == 0 ? (first + j) * 41 + it : -1) : m % 2 ? -1 : (first + j) * 41 + 1 + m + it;
            CHECK(AREA[120 + 8 * j + m] == want, "persistent alltoallw[%d][%d] = %d, want %d", j, m,
                  AREA[120 + 8 * j + m], want);
            s->sum += AREA[120 + 8 * j + m];
        }
    for (int k = 0; k < 2; k++) {
        int idx = rr + k, want = k > rr ? -1 : (first * 5 + idx + it) + ((first + 1) * 5 + idx + it);
        CHECK(AREA[108 + k] == want, "persistent reduce_scatter[%d] = %d, want %d", k, AREA[108 + k], want);
        s->sum += AREA[108 + k];
    }
    more(s, rank, size);
}

int main(int argc, char **argv) {
    int rank, size;
    ft_init(&argc, &argv, &rank, &size);
    CHECK(size % 2 == 0, "an even number of ranks");
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    struct state s;
    if (restarted && getenv("FT_STATE_EARLY") != NULL) {
        MPI_Datatype early;
        OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
        MPI_Type_contiguous(2, MPI_INT, &early);
        CHECK(0, "MPI_Type_contiguous before the restore was not refused");
    }
    map_area();
    if (ft_restore(&s, sizeof s)) {
        fprintf(stderr,
                "ft_state: rank %d resumes at iteration %d (row %#x, cart %#x, type %#x, op %#x, requests %#x %#x)\n",
                rank, s.iter, (unsigned)s.row, (unsigned)s.cart, (unsigned)s.vec, (unsigned)s.op, (unsigned)s.psend,
                (unsigned)s.precv);
        MPI_Request coll[16] = {s.pcoll, s.pred, s.pbcast, s.preduce};
        for (int k = 0; k < 12; k++) coll[4 + k] = s.pmore[k];
        for (int k = 0; k < 16; k++) {
            int flag = 0, class, rc = MPI_Request_get_status(coll[k], &flag, MPI_STATUS_IGNORE);
            MPI_Error_class(rc, &class);
            CHECK(rc == MPI_SUCCESS && flag, "persistent collective %d after the restart: class %d flag %d", k, class,
                  flag);
        }
    } else {
        make(&s, rank, size);
        make_more(&s, rank, size);
    }
    long checkpoints = 0, stop = hold_after(rank);
    while (s.iter < ITERS) {
        step(&s, rank, size);
        s.iter++;
        if (s.iter % EVERY == 0 && s.iter < ITERS) {
            checkpoint(&s, rank);
            if (++checkpoints == stop) hold(rank);
        }
    }
    printf("sum %d %ld\n", rank, s.sum);
    unmake_more(&s);
    OK(MPI_Comm_free(&s.row));
    CHECK(deleted == 100 + rank, "the attribute's delete callback added %ld", deleted);
    OK(MPI_Comm_free_keyval(&s.key));
    OK(MPI_Comm_free(&s.cart));
    OK(MPI_Type_free(&s.vec));
    OK(MPI_Op_free(&s.op));
    OK(MPI_Group_free(&s.group));
    OK(MPI_Info_free(&s.info));
    OK(MPI_Request_free(&s.psend));
    OK(MPI_Request_free(&s.precv));
    OK(MPI_Request_free(&s.pcoll));
    OK(MPI_Request_free(&s.pred));
    OK(MPI_Request_free(&s.pbcast));
    OK(MPI_Request_free(&s.preduce));
    for (int k = 0; k < 12; k++) {
        OK(MPI_Request_free(&s.pmore[k]));
        CHECK(s.pmore[k] == MPI_REQUEST_NULL, "freed request %d", k);
    }
    CHECK(s.psend == MPI_REQUEST_NULL && s.precv == MPI_REQUEST_NULL && s.pcoll == MPI_REQUEST_NULL &&
              s.pred == MPI_REQUEST_NULL && s.pbcast == MPI_REQUEST_NULL && s.preduce == MPI_REQUEST_NULL,
          "freed requests");
    printf("OK ft_state %d\n", rank);
    MPI_Finalize();
    return 0;
}
