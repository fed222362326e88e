/* Every one-sided operation (MPI-4.1 §12.3): Put, Get, Accumulate, Get_accumulate, Fetch_and_op,
 * Compare_and_swap, the request forms Rput, Rget, Raccumulate, Rget_accumulate (in passive target
 * epochs, where the standard allows them) and the _c forms; basic types (int, long long, double,
 * the pairs MPI_2INT and MPI_DOUBLE_INT) and derived types on either side (vector, indexed, a
 * struct of one basic type, subarray, resized); every predefined operation that applies,
 * MPI_REPLACE and MPI_NO_OP; MINLOC/MAXLOC; zero counts; MPI_PROC_NULL targets; to oneself and to
 * the next rank; on every flavour (create, allocate, allocate_shared when the job is on one node,
 * dynamic) under every synchronisation (fence, PSCW, lock per operation, lock_all).
 *
 * Each case has its own 256-byte region of every window and its own origin and result buffers,
 * so all cases share one epoch. The expected contents come from a model: data moves as
 * MPI_Pack/MPI_Unpack move it between the two layouts, and an accumulate combines as
 * MPI_Reduce_local does. Prints "OK win_ops <rank>". */
#include "check.h"

#include <stdint.h>

#define REG 256
#define MAXCASES 160

enum kind { PUT, GET, ACC, GACC, FOP, CAS };
enum flavor { F_CREATE, F_ALLOCATE, F_SHARED, F_DYNAMIC, F_COUNT };
enum sync { S_FENCE, S_PSCW, S_LOCK, S_LOCK_ALL, S_COUNT };
static const char *flavor_names[] = {"create", "allocate", "shared", "dynamic"};
static const char *sync_names[] = {"fence", "pscw", "lock", "lock_all"};

struct tcase {
    int kind;
    MPI_Datatype basic;
    MPI_Op op;
    int oc, tc, rc; /* origin, target, result counts */
    MPI_Datatype ot, tt, rt;
    int big; /* the _c form */
};

static int rank, size;
static struct tcase cases[MAXCASES];
static int ncases;
static MPI_Datatype t_vec, t_idx, t_struct, t_sub, t_res, t_dvec;

static void add(int kind, MPI_Datatype basic, MPI_Op op, int oc, MPI_Datatype ot, int tc, MPI_Datatype tt, int rc,
                MPI_Datatype rt) {
    CHECK(ncases < MAXCASES, "too many cases");
    struct tcase c = {kind, basic, op, oc, tc, rc, ot, tt, rt, ncases % 3 == 1};
    cases[ncases++] = c;
}

static MPI_Aint extent_of(MPI_Datatype t) {
    MPI_Aint lb, ext;
    OK(MPI_Type_get_extent(t, &lb, &ext));
    return ext;
}

/* Element I of basic type T for seed S, stored at P. Values are small (products stay exact). */
static void element(MPI_Datatype t, int s, int i, void *p) {
    int v = (s * 37 + i * 7) % 50 - 10;
    if (t == MPI_INT)
        *(int *)p = v;
    else if (t == MPI_LONG_LONG)
        *(long long *)p = (long long)v * 1000003LL;
    else if (t == MPI_DOUBLE)
        *(double *)p = v + 0.5;
    else if (t == MPI_2INT) {
        ((int *)p)[0] = v % 7;
        ((int *)p)[1] = s % 11 + i;
    } else {
        struct {
            double d;
            int i;
        } *q = p;
        q->d = v % 5 + 0.25;
        q->i = s % 13 + i;
    }
}

static void fill(void *buf, MPI_Aint bytes, MPI_Datatype t, int seed) {
    MPI_Aint e = extent_of(t);
    for (MPI_Aint i = 0; i + e <= bytes; i += e) element(t, seed, (int)(i / e), (char *)buf + i);
}

/* Seeds: a target region of rank R for case C, an origin buffer, a result buffer. */
static int tseed(int r, int c) { return r * 131 + c * 17 + 1; }
static int oseed(int r, int c) { return r * 71 + c * 29 + 3; }
static int rseed(int r, int c) { return r * 53 + c * 5 + 7; }

static void pack(const void *buf, int count, MPI_Datatype t, char *out, int *len) {
    *len = 0;
    OK(MPI_Pack(buf, count, t, out, 4 * REG, len, MPI_COMM_SELF));
}

static void unpack(const char *in, int len, void *buf, int count, MPI_Datatype t) {
    int pos = 0;
    OK(MPI_Unpack(in, len, &pos, buf, count, t, MPI_COMM_SELF));
}

/* Region REG of target T, case C, before any operation. */
static void target_initial(int t, int c, char *reg) {
    memset(reg, 0, REG);
    fill(reg, REG, cases[c].basic, tseed(t, c));
}

/* What case C leaves in target T's region when rank O is its origin (O < 0: none). */
static void expect_target(int t, int o, int c, char *reg) {
    const struct tcase *k = &cases[c];
    target_initial(t, c, reg);
    if (o < 0 || k->kind == GET || k->op == MPI_NO_OP) return;
    char src[REG], p[4 * REG], q[4 * REG];
    int plen, qlen;
    memset(src, 0, REG);
    fill(src, REG, k->basic, oseed(o, c));
    if (k->kind == CAS) {
        char cmp[REG];
        memset(cmp, 0, REG);
        fill(cmp, REG, k->basic, c % 2 == 0 ? tseed(t, c) : oseed(o, c) + 1); /* as run() */
        if (memcmp(cmp, reg, (size_t)extent_of(k->basic)) == 0) memcpy(reg, src, (size_t)extent_of(k->basic));
        return;
    }
    pack(src, k->oc, k->ot, p, &plen);
    if (k->kind == PUT || k->op == MPI_REPLACE) {
        unpack(p, plen, reg, k->tc, k->tt);
        return;
    }
    pack(reg, k->tc, k->tt, q, &qlen);
    CHECK(plen == qlen, "case %d: packed sizes %d and %d", c, plen, qlen);
    int n = 0, bsz;
    OK(MPI_Type_size(k->basic, &bsz));
    n = bsz ? plen / bsz : 0;
    /* The packed form of the pairs is their packed elements: unpack both into arrays. */
    MPI_Aint be = extent_of(k->basic);
    char *a = xmalloc((size_t)(be * (n + 1))), *b = xmalloc((size_t)(be * (n + 1)));
    unpack(p, plen, a, n, k->basic);
    unpack(q, qlen, b, n, k->basic);
    if (n) OK(MPI_Reduce_local(a, b, n, k->basic, k->op));
    pack(b, n, k->basic, q, &qlen);
    unpack(q, qlen, reg, k->tc, k->tt);
    free(a);
    free(b);
}

/* What the origin's destination holds after case C at target T (PROC_NULL: unchanged). */
static void expect_result(int t, int c, char *res) {
    const struct tcase *k = &cases[c];
    memset(res, 0, REG);
    fill(res, REG, k->basic, rseed(rank, c));
    if (t == MPI_PROC_NULL || k->kind == PUT || k->kind == ACC) return;
    char reg[REG], q[4 * REG];
    int qlen;
    target_initial(t, c, reg);
    if (k->kind == GET) {
        pack(reg, k->tc, k->tt, q, &qlen);
        unpack(q, qlen, res, k->oc, k->ot);
    } else {
        pack(reg, k->tc, k->tt, q, &qlen);
        unpack(q, qlen, res, k->rc, k->rt);
    }
}

/* Issues case C to target T at displacement DISP; a request form if REQ is not NULL. */
static void issue(int c, int t, MPI_Aint disp, MPI_Win win, char *src, char *res, char *cmp, MPI_Request *req) {
    const struct tcase *k = &cases[c];
    switch (k->kind) {
    case PUT:
        if (req && k->big)
            OK(MPI_Rput_c(src, k->oc, k->ot, t, disp, k->tc, k->tt, win, req));
        else if (req)
            OK(MPI_Rput(src, k->oc, k->ot, t, disp, k->tc, k->tt, win, req));
        else if (k->big)
            OK(MPI_Put_c(src, k->oc, k->ot, t, disp, k->tc, k->tt, win));
        else
            OK(MPI_Put(src, k->oc, k->ot, t, disp, k->tc, k->tt, win));
        break;
    case GET:
        if (req && k->big)
            OK(MPI_Rget_c(res, k->oc, k->ot, t, disp, k->tc, k->tt, win, req));
        else if (req)
            OK(MPI_Rget(res, k->oc, k->ot, t, disp, k->tc, k->tt, win, req));
        else if (k->big)
            OK(MPI_Get_c(res, k->oc, k->ot, t, disp, k->tc, k->tt, win));
        else
            OK(MPI_Get(res, k->oc, k->ot, t, disp, k->tc, k->tt, win));
        break;
    case ACC:
        if (req && k->big)
            OK(MPI_Raccumulate_c(src, k->oc, k->ot, t, disp, k->tc, k->tt, k->op, win, req));
        else if (req)
            OK(MPI_Raccumulate(src, k->oc, k->ot, t, disp, k->tc, k->tt, k->op, win, req));
        else if (k->big)
            OK(MPI_Accumulate_c(src, k->oc, k->ot, t, disp, k->tc, k->tt, k->op, win));
        else
            OK(MPI_Accumulate(src, k->oc, k->ot, t, disp, k->tc, k->tt, k->op, win));
        break;
    case GACC:
        if (req && k->big)
            OK(MPI_Rget_accumulate_c(src, k->oc, k->ot, res, k->rc, k->rt, t, disp, k->tc, k->tt, k->op, win, req));
        else if (req)
            OK(MPI_Rget_accumulate(src, k->oc, k->ot, res, k->rc, k->rt, t, disp, k->tc, k->tt, k->op, win, req));
        else if (k->big)
            OK(MPI_Get_accumulate_c(src, k->oc, k->ot, res, k->rc, k->rt, t, disp, k->tc, k->tt, k->op, win));
        else
            OK(MPI_Get_accumulate(src, k->oc, k->ot, res, k->rc, k->rt, t, disp, k->tc, k->tt, k->op, win));
        break;
    case FOP:
        OK(MPI_Fetch_and_op(src, res, k->basic, t, disp, k->op, win));
        break;
    default:
        OK(MPI_Compare_and_swap(src, cmp, res, k->basic, t, disp, win));
    }
    if (req && (k->kind == FOP || k->kind == CAS)) *req = MPI_REQUEST_NULL;
}

static void make_cases(void) {
    int lens[3] = {1, 3, 2}, displs[3] = {0, 2, 7};
    OK(MPI_Type_vector(4, 2, 3, MPI_INT, &t_vec)); /* 8 ints over 11 */
    OK(MPI_Type_indexed(3, lens, displs, MPI_INT, &t_idx)); /* 6 ints over 9 */
    int slens[2] = {2, 1};
    MPI_Aint sdispls[2] = {0, 16};
    MPI_Datatype stypes[2] = {MPI_INT, MPI_INT};
    OK(MPI_Type_create_struct(2, slens, sdispls, stypes, &t_struct)); /* 3 ints over 5 */
    int sizes[2] = {4, 5}, subs[2] = {2, 3}, starts[2] = {1, 1};
    OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &t_sub)); /* 6 of 20 */
    OK(MPI_Type_create_resized(MPI_INT, 0, 8, &t_res)); /* every other int */
    OK(MPI_Type_vector(3, 1, 2, MPI_DOUBLE, &t_dvec));
    MPI_Datatype all[] = {t_vec, t_idx, t_struct, t_sub, t_res, t_dvec};
    for (int i = 0; i < 6; i++) OK(MPI_Type_commit(&all[i]));
    t_vec = all[0], t_idx = all[1], t_struct = all[2], t_sub = all[3], t_res = all[4], t_dvec = all[5];

    MPI_Datatype I = MPI_INT, D = MPI_DOUBLE, L = MPI_LONG_LONG;
    /* Put and Get: contiguous and derived on either side. */
    for (int kind = PUT; kind <= GET; kind++) {
        add(kind, I, MPI_OP_NULL, 10, I, 10, I, 0, I);
        add(kind, I, MPI_OP_NULL, 1, t_vec, 8, I, 0, I);
        add(kind, I, MPI_OP_NULL, 8, I, 1, t_vec, 0, I);
        add(kind, I, MPI_OP_NULL, 1, t_idx, 1, t_sub, 0, I);
        add(kind, I, MPI_OP_NULL, 1, t_sub, 2, t_struct, 0, I);
        add(kind, I, MPI_OP_NULL, 6, t_res, 1, t_idx, 0, I);
        add(kind, D, MPI_OP_NULL, 3, D, 1, t_dvec, 0, I);
        add(kind, L, MPI_OP_NULL, 7, L, 7, L, 0, I);
        add(kind, MPI_DOUBLE_INT, MPI_OP_NULL, 3, MPI_DOUBLE_INT, 3, MPI_DOUBLE_INT, 0, I);
        add(kind, I, MPI_OP_NULL, 0, I, 0, I, 0, I); /* zero counts */
        add(kind, I, MPI_OP_NULL, 0, t_vec, 0, t_sub, 0, I);
    }
    /* Accumulate and Get_accumulate with every operation that applies. */
    MPI_Op int_ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_BAND, MPI_BOR, MPI_BXOR,
                        MPI_LAND, MPI_LOR, MPI_LXOR, MPI_REPLACE};
    MPI_Op real_ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_REPLACE};
    MPI_Op ll_ops[] = {MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN, MPI_BAND, MPI_BOR, MPI_BXOR, MPI_REPLACE};
    for (int kind = ACC; kind <= GACC; kind++) {
        for (int i = 0; i < 11; i++) add(kind, I, int_ops[i], 6, I, 6, I, 6, I);
        for (int i = 0; i < 5; i++) add(kind, D, real_ops[i], 4, D, 4, D, 4, D);
        for (int i = 0; i < 8; i++) add(kind, L, ll_ops[i], 3, L, 3, L, 3, L);
        add(kind, MPI_2INT, MPI_MINLOC, 5, MPI_2INT, 5, MPI_2INT, 5, MPI_2INT);
        add(kind, MPI_2INT, MPI_MAXLOC, 5, MPI_2INT, 5, MPI_2INT, 5, MPI_2INT);
        add(kind, MPI_DOUBLE_INT, MPI_MINLOC, 4, MPI_DOUBLE_INT, 4, MPI_DOUBLE_INT, 4, MPI_DOUBLE_INT);
        add(kind, MPI_DOUBLE_INT, MPI_MAXLOC, 4, MPI_DOUBLE_INT, 4, MPI_DOUBLE_INT, 4, MPI_DOUBLE_INT);
        add(kind, I, MPI_SUM, 1, t_vec, 1, t_vec, 8, I);
        add(kind, I, MPI_MAX, 6, I, 1, t_sub, 1, t_idx);
        add(kind, I, MPI_BXOR, 1, t_struct, 3, t_res, 3, I);
        add(kind, I, MPI_REPLACE, 1, t_idx, 6, I, 2, t_struct);
        add(kind, D, MPI_SUM, 1, t_dvec, 3, D, 1, t_dvec);
        add(kind, I, MPI_SUM, 0, I, 0, I, 0, I);
        if (kind == GACC) {
            add(kind, I, MPI_NO_OP, 0, I, 6, I, 6, I);
            add(kind, D, MPI_NO_OP, 0, D, 1, t_dvec, 3, D);
        }
    }
    MPI_Op fops[] = {MPI_SUM, MPI_NO_OP, MPI_REPLACE, MPI_MAX, MPI_BXOR};
    for (int i = 0; i < 5; i++) {
        add(FOP, I, fops[i], 1, I, 1, I, 1, I);
        add(FOP, L, fops[i], 1, L, 1, L, 1, L);
        if (fops[i] != MPI_BXOR) add(FOP, D, fops[i], 1, D, 1, D, 1, D);
    }
    /* Compare_and_swap: even cases compare equal (the origin's seed is the target's), odd not. */
    for (int i = 0; i < 2; i++) {
        add(CAS, I, MPI_OP_NULL, 1, I, 1, I, 1, I);
        add(CAS, L, MPI_OP_NULL, 1, L, 1, L, 1, L);
    }
}

static void wait_all(int n, MPI_Request *reqs) {
    for (int i = 0; i < n; i++) OK(MPI_Wait(&reqs[i], MPI_STATUS_IGNORE));
}

/* One flavour, one synchronisation, target SHIFT ranks on. */
static void run(MPI_Win win, char *mem, const MPI_Aint *bases, int unit, int flavor, int sync, int shift) {
    int t = (rank + shift) % size, o = (rank + size - shift) % size;
    char *src = xmalloc((size_t)ncases * REG), *res = xmalloc((size_t)ncases * REG);
    char *cmp = xmalloc((size_t)ncases * REG), *nres = xmalloc((size_t)ncases * REG);
    MPI_Request *reqs = xmalloc(sizeof(MPI_Request) * (size_t)ncases * 2);
    int local_lock = sync == S_LOCK || sync == S_LOCK_ALL;

    for (int c = 0; c < ncases; c++) {
        memset(src + c * REG, 0, REG);
        fill(src + c * REG, REG, cases[c].basic, oseed(rank, c));
        memset(res + c * REG, 0, REG);
        fill(res + c * REG, REG, cases[c].basic, rseed(rank, c));
        memcpy(nres + c * REG, res + c * REG, REG);
        memset(cmp + c * REG, 0, REG);
        /* CAS: even cases compare with the target's value, odd ones with another. */
        if (cases[c].kind == CAS) {
            if (c % 2 == 0)
                fill(cmp + c * REG, REG, cases[c].basic, tseed(t, c));
            else
                fill(cmp + c * REG, REG, cases[c].basic, oseed(rank, c) + 1);
        }
    }
    if (local_lock) OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (int c = 0; c < ncases; c++) target_initial(rank, c, mem + c * REG);
    if (local_lock) OK(MPI_Win_unlock(rank, win));

    MPI_Group world, tg, og;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    OK(MPI_Group_incl(world, 1, &t, &tg));
    OK(MPI_Group_incl(world, 1, &o, &og));
    switch (sync) {
    case S_FENCE: OK(MPI_Win_fence(0, win)); break;
    case S_PSCW:
        OK(MPI_Win_post(og, 0, win));
        OK(MPI_Win_start(tg, 0, win));
        break;
    case S_LOCK: OK(MPI_Barrier(MPI_COMM_WORLD)); break;
    default:
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Win_lock_all(0, win));
    }
    int nreq = 0;
    for (int c = 0; c < ncases; c++) {
        MPI_Aint disp = (bases ? bases[t] : 0) + (MPI_Aint)c * REG / unit;
        int use_req = local_lock && c % 2 == 0;
        if (sync == S_LOCK) OK(MPI_Win_lock(c % 4 == 1 ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, t, 0, win));
        issue(c, t, disp, win, src + c * REG, res + c * REG, cmp + c * REG, use_req ? &reqs[nreq] : NULL);
        if (use_req) nreq++;
        /* The same to MPI_PROC_NULL: nothing happens, the result buffer is untouched. */
        issue(c, MPI_PROC_NULL, disp, win, src + c * REG, nres + c * REG, cmp + c * REG, use_req ? &reqs[nreq] : NULL);
        if (use_req) nreq++;
        if (sync == S_LOCK) {
            if (use_req) wait_all(2, &reqs[nreq - 2]);
            if (c % 5 == 0) OK(MPI_Win_flush(t, win));
            OK(MPI_Win_unlock(t, win));
        }
    }
    if (sync == S_LOCK_ALL) {
        wait_all(nreq, reqs);
        OK(MPI_Win_flush_all(win));
    }
    switch (sync) {
    case S_FENCE: OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win)); break;
    case S_PSCW:
        OK(MPI_Win_complete(win));
        OK(MPI_Win_wait(win));
        break;
    case S_LOCK: OK(MPI_Barrier(MPI_COMM_WORLD)); break;
    default:
        OK(MPI_Win_unlock_all(win));
        OK(MPI_Barrier(MPI_COMM_WORLD));
    }

    char want[REG];
    if (local_lock) OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (int c = 0; c < ncases; c++) {
        expect_target(rank, o, c, want);
        for (int b = 0; b < REG; b++)
            CHECK(mem[c * REG + b] == want[b], "%s/%s/shift %d: case %d (kind %d) target byte %d: %d, expected %d",
                  flavor_names[flavor], sync_names[sync], shift, c, cases[c].kind, b, mem[c * REG + b], want[b]);
        expect_result(t, c, want);
        for (int b = 0; b < REG; b++)
            CHECK(res[c * REG + b] == want[b], "%s/%s/shift %d: case %d (kind %d) result byte %d: %d, expected %d",
                  flavor_names[flavor], sync_names[sync], shift, c, cases[c].kind, b, res[c * REG + b], want[b]);
        expect_result(MPI_PROC_NULL, c, want);
        CHECK(memcmp(nres + c * REG, want, REG) == 0, "%s/%s: case %d: MPI_PROC_NULL wrote the result",
              flavor_names[flavor], sync_names[sync], c);
    }
    if (local_lock) OK(MPI_Win_unlock(rank, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Group_free(&world));
    OK(MPI_Group_free(&tg));
    OK(MPI_Group_free(&og));
    free(src);
    free(res);
    free(cmp);
    free(nres);
    free(reqs);
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    make_cases();
    MPI_Aint bytes = (MPI_Aint)ncases * REG;
    MPI_Comm node;
    int nsize;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    OK(MPI_Comm_size(node, &nsize));

    for (int flavor = 0; flavor < F_COUNT; flavor++) {
        if (flavor == F_SHARED && nsize != size) continue; /* over nodes: no shared window of WORLD */
        MPI_Win win;
        char *mem = NULL;
        MPI_Aint *bases = NULL;
        int unit = 1;
        switch (flavor) {
        case F_CREATE:
            mem = xmalloc((size_t)bytes);
            OK(MPI_Win_create(mem, bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
            break;
        case F_ALLOCATE:
            unit = 4;
            OK(MPI_Win_allocate(bytes, unit, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
            break;
        case F_SHARED:
            unit = 8;
            OK(MPI_Win_allocate_shared(bytes, unit, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
            break;
        default: {
            OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
            OK(MPI_Alloc_mem(bytes, MPI_INFO_NULL, &mem));
            OK(MPI_Win_attach(win, mem, bytes));
            MPI_Aint a;
            OK(MPI_Get_address(mem, &a));
            bases = xmalloc(sizeof(MPI_Aint) * (size_t)size);
            OK(MPI_Allgather(&a, 1, MPI_AINT, bases, 1, MPI_AINT, MPI_COMM_WORLD));
        }
        }
        for (int sync = 0; sync < S_COUNT; sync++)
            for (int shift = 0; shift < 2 && shift < size; shift++) run(win, mem, bases, unit, flavor, sync, shift);
        if (flavor == F_DYNAMIC) OK(MPI_Win_detach(win, mem));
        OK(MPI_Win_free(&win));
        if (flavor == F_CREATE) free(mem);
        if (flavor == F_DYNAMIC) {
            OK(MPI_Free_mem(mem));
            free(bases);
        }
    }
    MPI_Datatype all[] = {t_vec, t_idx, t_struct, t_sub, t_res, t_dvec};
    for (int i = 0; i < 6; i++) OK(MPI_Type_free(&all[i]));
    OK(MPI_Comm_free(&node));
    OK(MPI_Finalize());
    printf("OK win_ops %d\n", rank);
    return 0;
}
