/* Conversions between C and Fortran, the deprecated and removed calls the library aliases, and
 * the stubs of what it does not implement yet (run by the test `generated`).
 *
 * - handle conversions: the functions (called through parentheses and as PMPI_) agree with the
 *   macros, every kind round-trips, a converted communicator still works;
 * - status conversions between MPI_Status, MPI_Fint[MPI_F_STATUS_SIZE] and MPI_F08_status: fields
 *   kept, six round trips; MPI_ERR_OTHER on the ignore sentinels, MPI_ERR_ARG on null;
 * - MPI_Keyval_create/free, MPI_Attr_put/get/delete (copy on dup, delete on delete and free);
 *   MPI_Errhandler_create/set/get;
 * - a stub before MPI_Init (the code returned), under MPI_ERRORS_RETURN (the class) and under a
 *   user handler (called with the code). */
#include <string.h>

#include "check.h"

static int copies, deletes, handled, last_code;

static int copy_fn(MPI_Comm c, int k, void *extra, void *in, void *out, int *flag) {
    (void)c, (void)k, (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm c, int k, void *v, void *extra) {
    (void)c, (void)k, (void)v, (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

static void handler(MPI_Comm *c, int *code, ...) {
    (void)c;
    handled++;
    last_code = *code;
}

static void handles(int rank) {
    CHECK((MPI_Comm_c2f)(MPI_COMM_WORLD) == MPI_Comm_c2f(MPI_COMM_WORLD), "Comm_c2f");
    CHECK((PMPI_Comm_f2c)(MPI_Comm_c2f(MPI_COMM_SELF)) == MPI_COMM_SELF, "Comm_f2c");
    CHECK((MPI_Type_f2c)((MPI_Type_c2f)(MPI_DOUBLE)) == MPI_DOUBLE, "Type");
    CHECK((MPI_Op_f2c)((MPI_Op_c2f)(MPI_SUM)) == MPI_SUM, "Op");
    CHECK((MPI_Group_f2c)((MPI_Group_c2f)(MPI_GROUP_EMPTY)) == MPI_GROUP_EMPTY, "Group");
    CHECK((MPI_Info_f2c)((MPI_Info_c2f)(MPI_INFO_ENV)) == MPI_INFO_ENV, "Info");
    CHECK((MPI_Errhandler_f2c)((MPI_Errhandler_c2f)(MPI_ERRORS_RETURN)) == MPI_ERRORS_RETURN, "Errhandler");
    CHECK((MPI_Request_f2c)((MPI_Request_c2f)(MPI_REQUEST_NULL)) == MPI_REQUEST_NULL, "Request");
    CHECK((MPI_Win_f2c)((MPI_Win_c2f)(MPI_WIN_NULL)) == MPI_WIN_NULL, "Win");
    CHECK((MPI_Message_f2c)((MPI_Message_c2f)(MPI_MESSAGE_NO_PROC)) == MPI_MESSAGE_NO_PROC, "Message");
    CHECK((MPI_Session_f2c)((MPI_Session_c2f)(MPI_SESSION_NULL)) == MPI_SESSION_NULL, "Session");
    CHECK((MPI_File_c2f)(MPI_FILE_NULL) == 0 && (MPI_File_f2c)(0) == MPI_FILE_NULL, "File");
    /* A communicator through Fortran and back still works. */
    MPI_Comm dup, back;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_Fint f = (PMPI_Comm_c2f)(dup);
    back = (MPI_Comm_f2c)(f);
    int r = -1;
    OK(MPI_Comm_rank(back, &r));
    CHECK(r == rank && back == dup, "rank %d through Fortran", r);
    OK(MPI_Comm_free(&back));
}

static void statuses(void) {
    int out[3] = {1, 2, 3}, in[3];
    MPI_Status s, s2;
    OK(MPI_Sendrecv(out, 3, MPI_INT, 0, 7, in, 3, MPI_INT, 0, 7, MPI_COMM_SELF, &s));
    MPI_Fint f[MPI_F_STATUS_SIZE], f2[MPI_F_STATUS_SIZE];
    MPI_F08_status f08, f08b;
    OK(MPI_Status_c2f(&s, f));
    CHECK(f[MPI_F_SOURCE] == 0 && f[MPI_F_TAG] == 7 && f[MPI_F_ERROR] == s.MPI_ERROR, "c2f fields");
    memset(&s2, 0xff, sizeof s2);
    OK(MPI_Status_f2c(f, &s2));
    int n = -1;
    OK(MPI_Get_count(&s2, MPI_INT, &n));
    CHECK(n == 3 && s2.MPI_SOURCE == 0 && s2.MPI_TAG == 7, "f2c: count %d", n);
    OK(MPI_Status_c2f08(&s, &f08));
    CHECK(f08.MPI_SOURCE == 0 && f08.MPI_TAG == 7, "c2f08");
    OK(PMPI_Status_f082c(&f08, &s2));
    CHECK(memcmp(&s, &s2, sizeof s) == 0, "f082c round trip");
    OK(MPI_Status_f2f08(f, &f08b));
    CHECK(memcmp(&f08, &f08b, sizeof f08) == 0, "f2f08");
    OK(MPI_Status_f082f(&f08b, f2));
    CHECK(memcmp(f, f2, sizeof f) == 0, "f082f");
    /* Sentinels name no status: MPI_ERR_OTHER; null: MPI_ERR_ARG. */
    FAILS_WITH(MPI_Status_c2f(MPI_STATUS_IGNORE, f), MPI_ERR_OTHER);
    FAILS_WITH(MPI_Status_f2c(MPI_F_STATUS_IGNORE, &s2), MPI_ERR_OTHER);
    FAILS_WITH(MPI_Status_c2f08(&s, MPI_F08_STATUS_IGNORE), MPI_ERR_OTHER);
    FAILS_WITH(MPI_Status_f082f(MPI_F08_STATUSES_IGNORE, f), MPI_ERR_OTHER);
    FAILS_WITH(MPI_Status_c2f(&s, NULL), MPI_ERR_ARG);
    FAILS_WITH(MPI_Status_f2f08(NULL, &f08), MPI_ERR_ARG);
}

static void attributes(void) {
    int k = MPI_KEYVAL_INVALID, flag = 0;
    static int value = 42;
    void *got = NULL;
    MPI_Comm c, d;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    OK(MPI_Keyval_create(copy_fn, delete_fn, &k, NULL));
    CHECK(k != MPI_KEYVAL_INVALID, "keyval");
    OK(MPI_Attr_put(c, k, &value));
    OK(MPI_Attr_get(c, k, &got, &flag));
    CHECK(flag == 1 && got == &value, "Attr_get");
    OK(MPI_Comm_dup(c, &d));
    CHECK(copies == 1, "copy callback ran %d times", copies);
    flag = 0;
    OK(MPI_Comm_get_attr(d, k, &got, &flag));
    CHECK(flag == 1 && got == &value, "copied attribute");
    OK(MPI_Attr_delete(c, k));
    CHECK(deletes == 1, "delete callback ran %d times", deletes);
    OK(MPI_Attr_get(c, k, &got, &flag));
    CHECK(flag == 0, "deleted attribute");
    OK(MPI_Comm_free(&d));
    CHECK(deletes == 2, "free ran the delete callback (%d)", deletes);
    OK(MPI_Keyval_free(&k));
    CHECK(k == MPI_KEYVAL_INVALID, "Keyval_free");
    OK(MPI_Comm_free(&c));
}

static void stubs_and_handlers(void) {
    int rc = MPI_File_sync(MPI_FILE_NULL);
    CHECK(class_of(rc) == MPI_ERR_UNSUPPORTED_OPERATION, "File_sync: %d", rc);
    rc = PMPI_File_open(MPI_COMM_WORLD, "x", MPI_MODE_RDONLY, MPI_INFO_NULL, NULL);
    CHECK(class_of(rc) == MPI_ERR_UNSUPPORTED_OPERATION, "PMPI_File_open: %d", rc);
    MPI_Errhandler eh, got;
    OK(MPI_Errhandler_create(handler, &eh));
    OK(MPI_Errhandler_set(MPI_COMM_WORLD, eh));
    OK(MPI_Errhandler_get(MPI_COMM_WORLD, &got));
    CHECK(got == eh, "Errhandler_get");
    rc = MPI_File_sync(MPI_FILE_NULL);
    CHECK(handled == 1 && last_code == rc && class_of(rc) == MPI_ERR_UNSUPPORTED_OPERATION,
          "the handler saw %d calls, code %d (returned %d)", handled, last_code, rc);
    OK(MPI_Errhandler_set(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Errhandler_free(&eh));
}

int main(int argc, char **argv) {
    /* Before MPI_Init there is no handler: the code is returned. */
    int rc = MPI_File_sync(MPI_FILE_NULL);
    if (rc != MPI_ERR_UNSUPPORTED_OPERATION) {
        fprintf(stderr, "FAIL: a stub before MPI_Init returned %d\n", rc);
        return 3;
    }
    OK(MPI_Init(&argc, &argv));
    int rank = 0, size = 0;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    handles(rank);
    statuses();
    attributes();
    stubs_and_handlers();
    int ok = 1, all = 0;
    OK(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(all == size, "%d of %d ranks passed", all, size);
    printf("OK convert %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
