/* Attributes, info objects and the rest: the predefined attributes of MPI_COMM_WORLD; keyvals
 * with copy callbacks (MPI_COMM_DUP_FN, MPI_COMM_NULL_COPY_FN, one of the program's that
 * refuses, one that counts) and delete callbacks (on set over a value, delete, free, and freed
 * keyvals whose attributes live on); keyvals on datatypes (copied by MPI_Type_dup, deleted by
 * MPI_Type_free, kinds not mixed); MPI_Info_* and MPI_INFO_ENV; MPI_Alloc_mem/MPI_Free_mem;
 * MPI_Pcontrol. Prints "OK attrs <rank>". */
#include "check.h"

static int rank, size;
static int copies, deletes, last_deleted;

static int counting_copy(MPI_Comm old, int keyval, void *extra, void *in, void *out, int *flag) {
    (void)old;
    (void)keyval;
    CHECK(extra == &copies, "extra_state not passed to the copy callback");
    copies++;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}

static int counting_delete(MPI_Comm comm, int keyval, void *val, void *extra) {
    (void)comm;
    (void)keyval;
    CHECK(extra == &deletes, "extra_state not passed to the delete callback");
    deletes++;
    last_deleted = (int)(long)val;
    return MPI_SUCCESS;
}

static int refusing_copy(MPI_Comm old, int keyval, void *extra, void *in, void *out, int *flag) {
    (void)old, (void)keyval, (void)extra, (void)in, (void)out, (void)flag;
    return MPI_ERR_OTHER;
}

static void predefined(void) {
    int *v, flag;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    CHECK(flag && *v >= 32767, "MPI_TAG_UB: flag %d value %d", flag, flag ? *v : 0);
    int big = *v;
    OK(MPI_Send(&rank, 1, MPI_INT, 0, big, MPI_COMM_SELF));
    int got;
    OK(MPI_Recv(&got, 1, MPI_INT, 0, big, MPI_COMM_SELF, MPI_STATUS_IGNORE));
    CHECK(got == rank, "a message tagged MPI_TAG_UB");
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &v, &flag));
    CHECK(flag && (*v == MPI_PROC_NULL || (*v >= 0 && *v < size)), "MPI_HOST %d", *v);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &v, &flag));
    CHECK(flag && (*v == MPI_ANY_SOURCE || *v == MPI_PROC_NULL || (*v >= 0 && *v < size)), "MPI_IO %d", *v);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &v, &flag));
    CHECK(flag && (*v == 0 || *v == 1), "MPI_WTIME_IS_GLOBAL %d", *v);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &v, &flag));
    CHECK(flag && *v >= size, "MPI_UNIVERSE_SIZE %d", *v);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_APPNUM, &v, &flag));
    CHECK(!flag || *v == 0, "MPI_APPNUM %d", *v);
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &v, &flag));
    CHECK(flag && *v >= MPI_ERR_LASTCODE - MPI_ERR_LASTCODE, "MPI_LASTUSEDCODE");
}

static void keyvals(void) {
    int dup_key, null_key, count_key, flag;
    void *v;
    OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &dup_key, NULL));
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &null_key, NULL));
    OK(MPI_Comm_create_keyval(counting_copy, counting_delete, &count_key, &deletes));
    /* The copy callback checks its extra state against &copies: give it the right one. */
    OK(MPI_Comm_free_keyval(&count_key));
    CHECK(count_key == MPI_KEYVAL_INVALID, "freed keyval not MPI_KEYVAL_INVALID");
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    int ck;
    OK(MPI_Comm_create_keyval(counting_copy, MPI_COMM_NULL_DELETE_FN, &ck, &copies));
    int dk;
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, counting_delete, &dk, &deletes));

    OK(MPI_Comm_set_attr(c, dup_key, (void *)100));
    OK(MPI_Comm_set_attr(c, null_key, (void *)200));
    OK(MPI_Comm_set_attr(c, ck, (void *)300));
    OK(MPI_Comm_set_attr(c, dk, (void *)400));
    OK(MPI_Comm_get_attr(c, dup_key, &v, &flag));
    CHECK(flag && v == (void *)100, "get after set: %p", v);
    /* Setting over a value deletes it first. */
    OK(MPI_Comm_set_attr(c, dk, (void *)401));
    CHECK(deletes == 1 && last_deleted == 400, "set over a value: %d deletes, last %d", deletes, last_deleted);

    /* Dup: MPI_COMM_DUP_FN copies, the null copy does not, the counting one adds 1. */
    MPI_Comm d;
    OK(MPI_Comm_dup(c, &d));
    CHECK(copies == 1, "copy callback ran %d times", copies);
    OK(MPI_Comm_get_attr(d, dup_key, &v, &flag));
    CHECK(flag && v == (void *)100, "MPI_COMM_DUP_FN: %d %p", flag, v);
    OK(MPI_Comm_get_attr(d, null_key, &v, &flag));
    CHECK(!flag, "MPI_COMM_NULL_COPY_FN copied");
    OK(MPI_Comm_get_attr(d, ck, &v, &flag));
    CHECK(flag && v == (void *)301, "the program's copy: %p", v);
    OK(MPI_Comm_get_attr(d, dk, &v, &flag));
    CHECK(!flag, "a null copy callback copied");

    /* delete_attr runs the delete callback; a missing one is an error. */
    OK(MPI_Comm_delete_attr(c, dk));
    CHECK(deletes == 2 && last_deleted == 401, "delete_attr: %d deletes", deletes);
    OK(MPI_Comm_get_attr(c, dk, &v, &flag));
    CHECK(!flag, "deleted attribute still there");
    OK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Comm_delete_attr(c, dk), MPI_ERR_KEYVAL);
    FAILS_WITH(MPI_Comm_set_attr(c, count_key, NULL), MPI_ERR_KEYVAL);

    /* A freed keyval's attribute lives on until freed with its communicator. */
    OK(MPI_Comm_set_attr(c, dk, (void *)402));
    OK(MPI_Comm_free_keyval(&dk));
    OK(MPI_Comm_free(&c));
    CHECK(deletes == 3 && last_deleted == 402, "free ran %d deletes (last %d)", deletes, last_deleted);

    /* A refusing copy callback makes the dup fail, and the program goes on. */
    int rk;
    OK(MPI_Comm_create_keyval(refusing_copy, MPI_COMM_NULL_DELETE_FN, &rk, NULL));
    OK(MPI_Comm_set_attr(d, rk, (void *)1));
    OK(MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN));
    MPI_Comm e = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(d, &e);
    CHECK(rc != MPI_SUCCESS, "dup with a refusing copy callback succeeded");
    OK(MPI_Comm_delete_attr(d, rk));
    OK(MPI_Comm_dup(d, &e));
    OK(MPI_Comm_free(&e));
    OK(MPI_Comm_free(&d));
    OK(MPI_Comm_free_keyval(&rk));
    OK(MPI_Comm_free_keyval(&ck));
    OK(MPI_Comm_free_keyval(&dup_key));
    OK(MPI_Comm_free_keyval(&null_key));
}

static void infos(void) {
    MPI_Info info, dup;
    OK(MPI_Info_create(&info));
    int n, flag, len;
    OK(MPI_Info_get_nkeys(info, &n));
    CHECK(n == 0, "new info has %d keys", n);
    OK(MPI_Info_set(info, "alpha", "1"));
    OK(MPI_Info_set(info, "beta", "a longer value"));
    OK(MPI_Info_set(info, "alpha", "one"));
    OK(MPI_Info_get_nkeys(info, &n));
    CHECK(n == 2, "%d keys", n);
    char key[MPI_MAX_INFO_KEY + 1], val[64];
    OK(MPI_Info_get_nthkey(info, 0, key));
    CHECK(strcmp(key, "alpha") == 0, "key 0: %s", key);
    OK(MPI_Info_get_nthkey(info, 1, key));
    CHECK(strcmp(key, "beta") == 0, "key 1: %s", key);
    OK(MPI_Info_get(info, "alpha", sizeof val - 1, val, &flag));
    CHECK(flag && strcmp(val, "one") == 0, "alpha: %s", val);
    OK(MPI_Info_get_valuelen(info, "beta", &len, &flag));
    CHECK(flag && len == 14, "beta's length %d", len);
    OK(MPI_Info_get(info, "beta", 5, val, &flag));
    CHECK(flag && strcmp(val, "a lon") == 0, "beta cut at 5: %s", val);
    OK(MPI_Info_get(info, "gamma", sizeof val - 1, val, &flag));
    CHECK(!flag, "gamma found");
    OK(MPI_Info_dup(info, &dup));
    OK(MPI_Info_delete(info, "alpha"));
    OK(MPI_Info_get_nkeys(info, &n));
    CHECK(n == 1, "%d keys after delete", n);
    OK(MPI_Info_get(dup, "alpha", sizeof val - 1, val, &flag));
    CHECK(flag && strcmp(val, "one") == 0, "the dup lost alpha");
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Info_delete(info, "alpha"), MPI_ERR_INFO_NOKEY);
    FAILS_WITH(MPI_Info_set(info, "", "x"), MPI_ERR_INFO_KEY);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    OK(MPI_Info_free(&info));
    CHECK(info == MPI_INFO_NULL, "freed info not MPI_INFO_NULL");
    OK(MPI_Info_free(&dup));

    /* MPI_INFO_ENV: the command and the job size. */
    OK(MPI_Info_get(MPI_INFO_ENV, "command", sizeof val - 1, val, &flag));
    CHECK(flag && strstr(val, "attrs") != NULL, "MPI_INFO_ENV command: %s", flag ? val : "(none)");
    OK(MPI_Info_get(MPI_INFO_ENV, "maxprocs", sizeof val - 1, val, &flag));
    CHECK(flag && atoi(val) == size, "MPI_INFO_ENV maxprocs: %s", val);
}

static void memory(void) {
    double *p = NULL;
    OK(MPI_Alloc_mem(1000 * sizeof(double), MPI_INFO_NULL, &p));
    CHECK(p != NULL && ((size_t)p % 8) == 0, "MPI_Alloc_mem gave %p", (void *)p);
    for (int i = 0; i < 1000; i++) p[i] = i;
    /* Use it as a message buffer. */
    int peer = (rank + 1) % size, from = (rank + size - 1) % size;
    double *q;
    OK(MPI_Alloc_mem(1000 * sizeof(double), MPI_INFO_NULL, &q));
    OK(MPI_Sendrecv(p, 1000, MPI_DOUBLE, peer, 1, q, 1000, MPI_DOUBLE, from, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(q[999] == 999.0, "data through MPI_Alloc_mem buffers");
    OK(MPI_Free_mem(p));
    OK(MPI_Free_mem(q));
    OK(MPI_Pcontrol(1));
    OK(MPI_Pcontrol(0, "ignored"));
}


static int type_copies, type_deletes, other_deletes;

static int type_copy(MPI_Datatype old, int keyval, void *extra, void *in, void *out, int *flag) {
    (void)keyval;
    CHECK(extra == &type_copies, "extra_state not passed to the datatype copy callback");
    CHECK(old != MPI_DATATYPE_NULL, "no datatype given to the copy callback");
    type_copies++;
    *(void **)out = (char *)in + 10;
    *flag = 1;
    return MPI_SUCCESS;
}

static int type_delete(MPI_Datatype dt, int keyval, void *val, void *extra) {
    (void)dt, (void)keyval, (void)val;
    CHECK(extra == &type_deletes || extra == &type_copies, "extra_state not passed to the datatype delete callback");
    if (extra == &type_deletes)
        type_deletes++;
    else
        other_deletes++;
    return MPI_SUCCESS;
}

static void type_keyvals(void) {
    int k, flag;
    void *v;
    OK(MPI_Type_create_keyval(type_copy, type_delete, &k, &type_copies));
    MPI_Datatype t, d;
    OK(MPI_Type_contiguous(2, MPI_INT, &t));
    OK(MPI_Type_commit(&t));
    OK(MPI_Type_get_attr(t, k, &v, &flag));
    CHECK(!flag, "an attribute before any was set");
    OK(MPI_Type_set_attr(t, k, (void *)100));
    OK(MPI_Type_set_attr(t, k, (void *)200)); /* replaces: the old value's delete callback runs */
    CHECK(other_deletes == 1, "replacing a value ran the delete callback %d times", other_deletes);
    OK(MPI_Type_get_attr(t, k, &v, &flag));
    CHECK(flag && v == (void *)200, "get after set: %d %p", flag, v);
    OK(MPI_Type_dup(t, &d));
    CHECK(type_copies == 1, "dup ran the copy callback %d times", type_copies);
    OK(MPI_Type_get_attr(d, k, &v, &flag));
    CHECK(flag && v == (void *)210, "the duplicate's attribute %p", v);
    OK(MPI_Type_free(&d));
    OK(MPI_Type_delete_attr(t, k));
    OK(MPI_Type_get_attr(t, k, &v, &flag));
    CHECK(!flag, "an attribute after delete");
    /* An attribute on a predefined type. */
    OK(MPI_Type_set_attr(MPI_DOUBLE, k, (void *)5));
    OK(MPI_Type_get_attr(MPI_DOUBLE, k, &v, &flag));
    CHECK(flag && v == (void *)5, "attribute on MPI_DOUBLE");
    OK(MPI_Type_delete_attr(MPI_DOUBLE, k));
    CHECK(other_deletes == 4, "free of the duplicate, two deletes: %d delete callbacks", other_deletes);
    /* Kinds do not mix. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Comm_set_attr(MPI_COMM_WORLD, k, (void *)1), MPI_ERR_KEYVAL);
    int ck;
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &ck, NULL));
    FAILS_WITH(MPI_Type_set_attr(t, ck, (void *)1), MPI_ERR_KEYVAL);
    FAILS_WITH(MPI_Type_free_keyval(&ck), MPI_ERR_KEYVAL);
    OK(MPI_Comm_free_keyval(&ck));
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
    /* A keyval with the delete counter: MPI_Type_free runs it. */
    int k2;
    OK(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, type_delete, &k2, &type_deletes));
    OK(MPI_Type_set_attr(t, k2, (void *)1));
    OK(MPI_Type_dup(t, &d));
    OK(MPI_Type_get_attr(d, k2, &v, &flag));
    CHECK(!flag, "MPI_TYPE_NULL_COPY_FN copied an attribute");
    OK(MPI_Type_free(&d));
    OK(MPI_Type_free(&t));
    CHECK(type_deletes == 1, "MPI_Type_free ran the delete callback %d times", type_deletes);
    OK(MPI_Type_free_keyval(&k));
    OK(MPI_Type_free_keyval(&k2));
    CHECK(k == MPI_KEYVAL_INVALID && k2 == MPI_KEYVAL_INVALID, "freed keyvals not reset");
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    predefined();
    keyvals();
    type_keyvals();
    infos();
    memory();
    OK(MPI_Finalize());
    printf("OK attrs %d\n", rank);
    return 0;
}
