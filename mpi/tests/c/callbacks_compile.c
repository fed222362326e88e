/* Compiled only (by the test `generated`, as C99, C11 and C++, -Wall -Wextra -Werror): every
 * callback typedef of mpi.h and the predefined callbacks, passed to the functions that take them,
 * as rsmpi's and mpi4py's bindings do. Not run. */
#include <mpi.h>
#include <stddef.h>

static int copy_fn(MPI_Comm c, int k, void *e, void *in, void *out, int *flag) {
    (void)c, (void)k, (void)e, (void)in, (void)out, (void)flag;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm c, int k, void *v, void *e) {
    (void)c, (void)k, (void)v, (void)e;
    return MPI_SUCCESS;
}
static int type_copy_fn(MPI_Datatype t, int k, void *e, void *in, void *out, int *flag) {
    (void)t, (void)k, (void)e, (void)in, (void)out, (void)flag;
    return MPI_SUCCESS;
}
static int type_delete_fn(MPI_Datatype t, int k, void *v, void *e) {
    (void)t, (void)k, (void)v, (void)e;
    return MPI_SUCCESS;
}
static int win_copy_fn(MPI_Win w, int k, void *e, void *in, void *out, int *flag) {
    (void)w, (void)k, (void)e, (void)in, (void)out, (void)flag;
    return MPI_SUCCESS;
}
static int win_delete_fn(MPI_Win w, int k, void *v, void *e) {
    (void)w, (void)k, (void)v, (void)e;
    return MPI_SUCCESS;
}
static void comm_errh(MPI_Comm *c, int *code, ...) { (void)c, (void)code; }
static void win_errh(MPI_Win *w, int *code, ...) { (void)w, (void)code; }
static void file_errh(MPI_File *f, int *code, ...) { (void)f, (void)code; }
static void session_errh(MPI_Session *s, int *code, ...) { (void)s, (void)code; }
static void user_fn(void *in, void *inout, int *len, MPI_Datatype *t) { (void)in, (void)inout, (void)len, (void)t; }
static void user_fn_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *t) {
    (void)in, (void)inout, (void)len, (void)t;
}
static int query_fn(void *e, MPI_Status *s) {
    (void)e, (void)s;
    return MPI_SUCCESS;
}
static int free_fn(void *e) {
    (void)e;
    return MPI_SUCCESS;
}
static int cancel_fn(void *e, int complete) {
    (void)e, (void)complete;
    return MPI_SUCCESS;
}
static int conv_fn(void *u, MPI_Datatype t, int n, void *f, MPI_Offset p, void *e) {
    (void)u, (void)t, (void)n, (void)f, (void)p, (void)e;
    return MPI_SUCCESS;
}
static int conv_fn_c(void *u, MPI_Datatype t, MPI_Count n, void *f, MPI_Offset p, void *e) {
    (void)u, (void)t, (void)n, (void)f, (void)p, (void)e;
    return MPI_SUCCESS;
}
static int extent_fn(MPI_Datatype t, MPI_Aint *x, void *e) {
    (void)t, (void)x, (void)e;
    return MPI_SUCCESS;
}
static void event_cb(MPI_T_event_instance i, MPI_T_event_registration r, MPI_T_cb_safety s, void *u) {
    (void)i, (void)r, (void)s, (void)u;
}
static void event_free_cb(MPI_T_event_registration r, MPI_T_cb_safety s, void *u) { (void)r, (void)s, (void)u; }
static void event_dropped_cb(MPI_Count n, MPI_T_event_registration r, int src, MPI_T_cb_safety s, void *u) {
    (void)n, (void)r, (void)src, (void)s, (void)u;
}

int use_every_callback(void);
int use_every_callback(void) {
    int k = 0, rc = 0;
    MPI_Errhandler eh;
    MPI_Op op;
    MPI_Request req;
    MPI_T_event_registration reg = NULL;
    MPI_Comm_copy_attr_function *cc = copy_fn;
    MPI_Comm_delete_attr_function *cd = delete_fn;
    MPI_Copy_function *oc = copy_fn;
    MPI_Delete_function *od = delete_fn;
    MPI_Comm_errhandler_fn *old_style = comm_errh;
    MPI_Handler_function *handler = comm_errh;
    MPI_Session_errhandler_fn *session_old_style = session_errh;
    MPI_T_event_cb_function *ecb = event_cb;
    (void)old_style, (void)handler, (void)session_old_style, (void)ecb;
    rc |= MPI_Comm_create_keyval(cc, cd, &k, NULL);
    rc |= MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL);
    rc |= MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &k, NULL);
    rc |= MPI_Keyval_create(oc, od, &k, NULL);
    rc |= MPI_Keyval_create(MPI_NULL_COPY_FN, MPI_NULL_DELETE_FN, &k, NULL);
    rc |= MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, &k, NULL);
    rc |= MPI_Type_create_keyval(type_copy_fn, type_delete_fn, &k, NULL);
    rc |= MPI_Type_create_keyval(MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN, &k, NULL);
    rc |= MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &k, NULL);
    rc |= MPI_Win_create_keyval(win_copy_fn, win_delete_fn, &k, NULL);
    rc |= MPI_Win_create_keyval(MPI_WIN_DUP_FN, MPI_WIN_NULL_DELETE_FN, &k, NULL);
    rc |= MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &k, NULL);
    rc |= MPI_Comm_create_errhandler(comm_errh, &eh);
    rc |= MPI_Errhandler_create(comm_errh, &eh);
    rc |= MPI_Win_create_errhandler(win_errh, &eh);
    rc |= MPI_File_create_errhandler(file_errh, &eh);
    rc |= MPI_Session_create_errhandler(session_errh, &eh);
    rc |= MPI_Op_create(user_fn, 1, &op);
    rc |= MPI_Op_create_c(user_fn_c, 1, &op);
    rc |= MPI_Grequest_start(query_fn, free_fn, cancel_fn, NULL, &req);
    rc |= MPI_Register_datarep("x", conv_fn, conv_fn, extent_fn, NULL);
    rc |= MPI_Register_datarep("y", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, extent_fn, NULL);
    rc |= MPI_Register_datarep_c("z", conv_fn_c, MPI_CONVERSION_FN_NULL_C, extent_fn, NULL);
    rc |= MPI_T_event_register_callback(reg, MPI_T_CB_REQUIRE_NONE, MPI_INFO_NULL, NULL, event_cb);
    rc |= MPI_T_event_handle_free(reg, NULL, event_free_cb);
    rc |= MPI_T_event_set_dropped_handler(reg, event_dropped_cb);
    rc |= (MPI_Comm_c2f)(MPI_COMM_WORLD) != MPI_Comm_c2f(MPI_COMM_WORLD);
    rc |= (PMPI_Type_f2c)(MPI_Type_c2f(MPI_INT)) != MPI_INT;
    return rc;
}
