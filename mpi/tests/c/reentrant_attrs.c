/* Attribute callbacks and error handlers that call MPI (MPI lets every callback do so), at the
 * thread level REENTRANT_LEVEL names (reentrant.h; under MULTIPLE a second thread calls MPI
 * meanwhile):
 * - a communicator copy callback calling MPI_Comm_test_inter and MPI_Comm_rank (mpi4py's), in
 *   MPI_Comm_dup and MPI_Comm_idup;
 * - a delete callback calling MPI_Comm_get_attr on the communicator being freed and
 *   MPI_Comm_free of another communicator (whose own delete callback runs nested);
 * - datatype copy and delete callbacks calling MPI_Type_size;
 * - a copy callback returning an error code: MPI_Comm_dup returns it (MPI_ERRORS_RETURN);
 * - an error handler calling MPI_Error_string and MPI_Comm_get_attr (from a failing call and
 *   from MPI_Comm_call_errhandler);
 * - the same through the MPI-1 names (MPI_Keyval_create, MPI_Attr_put/get/delete,
 *   MPI_Keyval_free);
 * - MPI_COMM_SELF's attributes deleted at MPI_Finalize, first and in LIFO order, by a callback
 *   that calls MPI_Finalized (false) and MPI_Comm_rank.
 * Prints "OK reentrant_attrs <rank>". */
#include "reentrant.h"

static int copies, deletes, type_copies, type_deletes, nested_deletes, handled;
static int comm_key, other_key, type_key, fail_key, self_key;
static MPI_Comm other = MPI_COMM_NULL;

static int copy_fn(MPI_Comm comm, int key, void *extra, void *in, void *out, int *flag) {
    int inter = -1, r = -1;
    OK(MPI_Comm_test_inter(comm, &inter));
    OK(MPI_Comm_rank(comm, &r));
    CHECK(inter == 0 && r == rank, "copy callback: test_inter %d, rank %d", inter, r);
    CHECK(key == comm_key && extra == &comm_key, "copy callback: key %d", key);
    int *v = xmalloc(sizeof *v);
    *v = *(int *)in + 1;
    *(int **)out = v;
    *flag = 1;
    copies++;
    return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm comm, int key, void *val, void *extra) {
    (void)extra;
    void *got = NULL;
    int flag = 0;
    OK(MPI_Comm_get_attr(comm, key, &got, &flag));
    CHECK(!flag || got == val, "delete callback: the attribute's value changed");
    if (other != MPI_COMM_NULL) {
        /* Frees another communicator, whose attribute's delete callback runs inside this one. */
        MPI_Comm o = other;
        other = MPI_COMM_NULL;
        OK(MPI_Comm_free(&o));
        CHECK(o == MPI_COMM_NULL, "MPI_Comm_free in a delete callback");
    }
    free(val);
    deletes++;
    return MPI_SUCCESS;
}

static int nested_delete_fn(MPI_Comm comm, int key, void *val, void *extra) {
    (void)comm, (void)key, (void)extra;
    int r = -1;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &r));
    CHECK(r == rank && val == &nested_deletes, "nested delete callback");
    nested_deletes++;
    return MPI_SUCCESS;
}

/* MPI_Type_size from a datatype callback: the type is three ints. */
static void check_type_size(MPI_Datatype t, const char *where) {
    int size = -1;
    OK(MPI_Type_size(t, &size));
    CHECK(size == 3 * (int)sizeof(int), "%s callback: size %d", where, size);
}

static int type_copy_fn(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag) {
    (void)key, (void)extra;
    check_type_size(t, "type copy");
    *(void **)out = in;
    *flag = 1;
    type_copies++;
    return MPI_SUCCESS;
}

static int type_delete_fn(MPI_Datatype t, int key, void *val, void *extra) {
    (void)key, (void)val, (void)extra;
    check_type_size(t, "type delete");
    type_deletes++;
    return MPI_SUCCESS;
}

/* The program's error class and code the failing copy callback returns. */
static int my_class, my_code;

static int failing_copy_fn(MPI_Comm comm, int key, void *extra, void *in, void *out, int *flag) {
    (void)key, (void)extra, (void)in, (void)out, (void)flag;
    int r = -1;
    OK(MPI_Comm_rank(comm, &r));
    return my_code;
}

static void handler(MPI_Comm *comm, int *code, ...) {
    char s[MPI_MAX_ERROR_STRING];
    int len = 0, flag = 0;
    void *v = NULL;
    OK(MPI_Error_string(*code, s, &len));
    CHECK(len > 0 && (int)strlen(s) == len, "MPI_Error_string in a handler: %d", len);
    OK(MPI_Comm_get_attr(*comm, comm_key, &v, &flag));
    CHECK(flag && *(int *)v == 41, "MPI_Comm_get_attr in a handler: flag %d", flag);
    handled++;
}

static int order[2], deleted_at_finalize;

static int self_delete_fn(MPI_Comm comm, int key, void *val, void *extra) {
    (void)key, (void)extra;
    int fin = -1, r = -1;
    OK(MPI_Finalized(&fin));
    OK(MPI_Comm_rank(comm, &r));
    if (fin != 0 || r != 0 || comm != MPI_COMM_SELF || deleted_at_finalize >= 2) {
        fprintf(stderr, "FAIL (rank %d): COMM_SELF delete callback: finalized %d, rank %d\n", rank, fin, r);
        exit(3);
    }
    order[deleted_at_finalize++] = *(int *)val;
    return MPI_SUCCESS;
}

static void comm_attributes(void) {
    OK(MPI_Comm_create_keyval(copy_fn, delete_fn, &comm_key, &comm_key));
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, nested_delete_fn, &other_key, NULL));
    MPI_Comm a, b, c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    int *v = xmalloc(sizeof *v);
    *v = 40;
    OK(MPI_Comm_set_attr(a, comm_key, v));
    /* dup: the copy callback calls MPI (the mpi4py deadlock under MULTIPLE). */
    OK(MPI_Comm_dup(a, &b));
    CHECK(copies == 1, "copies %d", copies);
    void *got = NULL;
    int flag = 0;
    OK(MPI_Comm_get_attr(b, comm_key, &got, &flag));
    CHECK(flag && *(int *)got == 41, "the copy's attribute");
    /* idup: the same callback at the call. */
    MPI_Request req;
    OK(MPI_Comm_idup(a, &c, &req));
    OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(copies == 2, "copies after idup %d", copies);
    OK(MPI_Comm_get_attr(c, comm_key, &got, &flag));
    CHECK(flag && *(int *)got == 41, "the idup's attribute");
    /* Replacing a value runs the delete callback, which calls MPI. */
    int *w = xmalloc(sizeof *w);
    *w = 40;
    OK(MPI_Comm_set_attr(c, comm_key, w));
    CHECK(deletes == 1, "deletes after set %d", deletes);
    OK(MPI_Comm_delete_attr(c, comm_key));
    CHECK(deletes == 2, "deletes after delete_attr %d", deletes);
    /* Free: the delete callback frees `other`, whose own callback runs nested. */
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &other));
    OK(MPI_Comm_set_attr(other, other_key, &nested_deletes));
    OK(MPI_Comm_free(&a));
    CHECK(a == MPI_COMM_NULL && deletes == 3 && nested_deletes == 1 && other == MPI_COMM_NULL,
          "free: deletes %d nested %d", deletes, nested_deletes);
    /* An error handler that calls MPI, on b (which has the attribute 41). */
    MPI_Errhandler eh;
    OK(MPI_Comm_create_errhandler(handler, &eh));
    OK(MPI_Comm_set_errhandler(b, eh));
    int x = 0;
    int rc = MPI_Send(&x, 1, MPI_INT, nranks + 5, 0, b);
    CHECK(rc != MPI_SUCCESS && class_of(rc) == MPI_ERR_RANK && handled == 1, "handler: rc %d handled %d", rc,
          handled);
    OK(MPI_Comm_call_errhandler(b, MPI_ERR_OTHER));
    CHECK(handled == 2, "MPI_Comm_call_errhandler: handled %d", handled);
    OK(MPI_Errhandler_free(&eh));
    /* A copy callback's error code is MPI_Comm_dup's (under MPI_ERRORS_RETURN). */
    OK(MPI_Comm_create_keyval(failing_copy_fn, MPI_COMM_NULL_DELETE_FN, &fail_key, NULL));
    OK(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_attr(c, fail_key, NULL));
    MPI_Comm d = MPI_COMM_NULL;
    if (my_code == 0) {
        OK(MPI_Add_error_class(&my_class));
        OK(MPI_Add_error_code(my_class, &my_code));
    }
    rc = MPI_Comm_dup(c, &d);
    CHECK(rc == my_code && class_of(rc) == my_class && d == MPI_COMM_NULL,
          "MPI_Comm_dup with a failing copy callback returned %d (class %d), expected %d", rc, class_of(rc), my_code);
    OK(MPI_Comm_delete_attr(c, fail_key));
    OK(MPI_Comm_free(&b));
    OK(MPI_Comm_free(&c));
    CHECK(deletes == 4, "deletes at the end %d", deletes);
    OK(MPI_Comm_free_keyval(&comm_key));
    OK(MPI_Comm_free_keyval(&other_key));
    OK(MPI_Comm_free_keyval(&fail_key));
}

/* The MPI-1 names: MPI_Keyval_create, MPI_Attr_put/get/delete, MPI_Keyval_free, with the same
 * callbacks (MPI_Copy_function and MPI_Delete_function are the communicator ones). */
static void mpi1_attributes(void) {
    int key;
    OK(MPI_Keyval_create(copy_fn, delete_fn, &key, &comm_key));
    int saved = comm_key;
    comm_key = key; /* what copy_fn checks */
    MPI_Comm a, b;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    int *v = xmalloc(sizeof *v);
    *v = 7;
    OK(MPI_Attr_put(a, key, v));
    OK(MPI_Comm_dup(a, &b));
    void *got = NULL;
    int flag = 0;
    OK(MPI_Attr_get(b, key, &got, &flag));
    CHECK(flag && *(int *)got == 8, "MPI_Attr_get on the copy: flag %d", flag);
    int before = deletes;
    OK(MPI_Attr_delete(b, key));
    OK(MPI_Attr_get(b, key, &got, &flag));
    CHECK(!flag && deletes == before + 1, "MPI_Attr_delete: flag %d, deletes %d", flag, deletes - before);
    OK(MPI_Keyval_free(&key));
    CHECK(key == MPI_KEYVAL_INVALID, "MPI_Keyval_free");
    OK(MPI_Comm_free(&a)); /* the freed keyval's attribute still goes through its callback */
    CHECK(deletes == before + 2, "free after MPI_Keyval_free: deletes %d", deletes - before);
    OK(MPI_Comm_free(&b));
    comm_key = saved;
}

static void type_attributes(void) {
    MPI_Datatype t, u;
    OK(MPI_Type_contiguous(3, MPI_INT, &t));
    OK(MPI_Type_create_keyval(type_copy_fn, type_delete_fn, &type_key, NULL));
    OK(MPI_Type_set_attr(t, type_key, &type_key));
    OK(MPI_Type_dup(t, &u));
    CHECK(type_copies == 1, "type copies %d", type_copies);
    OK(MPI_Type_set_attr(u, type_key, &type_key)); /* replaces: a delete */
    CHECK(type_deletes == 1, "type deletes %d", type_deletes);
    OK(MPI_Type_delete_attr(u, type_key));
    OK(MPI_Type_free(&t));
    OK(MPI_Type_free(&u));
    CHECK(type_deletes == 3, "type deletes at the end %d", type_deletes);
    OK(MPI_Type_free_keyval(&type_key));
}

int main(int argc, char **argv) {
    reentrant_init(&argc, &argv);
    for (int round = 0; round < 3; round++) {
        copies = deletes = type_copies = type_deletes = nested_deletes = handled = 0;
        comm_attributes();
        mpi1_attributes();
        type_attributes();
    }
    /* MPI_COMM_SELF's attributes: deleted first at MPI_Finalize, the last set first. */
    static int first = 1, second = 2;
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete_fn, &self_key, NULL));
    OK(MPI_Comm_set_attr(MPI_COMM_SELF, self_key, &first));
    int key2;
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete_fn, &key2, NULL));
    OK(MPI_Comm_set_attr(MPI_COMM_SELF, key2, &second));
    reentrant_stop_thread();
    OK(MPI_Finalize());
    CHECK(deleted_at_finalize == 2 && order[0] == 2 && order[1] == 1, "at finalize: %d deleted, order %d %d",
          deleted_at_finalize, order[0], order[1]);
    printf("OK reentrant_attrs %d\n", rank);
    return 0;
}
