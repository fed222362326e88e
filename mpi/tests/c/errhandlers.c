/* The program's error handlers and error classes: MPI_Comm_create_errhandler (a handler that
 * records its communicator and code, inherited by a dup), errors of calls reaching it, the call
 * returning the code afterwards; MPI_Comm_call_errhandler (the program's handler, and
 * MPI_ERRORS_RETURN); MPI_Errhandler_free while in use; MPI_Add_error_class/code/string with
 * MPI_Error_class, MPI_Error_string and MPI_LASTUSEDCODE. Prints "OK errhandlers <rank>". */
#include "check.h"

static int rank, size;
static int seen_calls, seen_code;
static MPI_Comm seen_comm;

static void recorder(MPI_Comm *comm, int *code, ...) {
    seen_calls++;
    seen_comm = *comm;
    seen_code = *code;
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;

    MPI_Errhandler eh, got;
    OK(MPI_Comm_create_errhandler(recorder, &eh));
    MPI_Comm d;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &d));
    OK(MPI_Comm_set_errhandler(d, eh));
    OK(MPI_Comm_get_errhandler(d, &got));
    CHECK(got == eh, "get_errhandler: %#x not %#x", got, eh);

    /* An error on d reaches the handler, then the call returns the code. */
    int x = 0;
    int rc = MPI_Send(&x, 1, MPI_INT, size + 5, 0, d);
    CHECK(rc != MPI_SUCCESS && class_of(rc) == MPI_ERR_RANK, "send to a bad rank returned %d", rc);
    CHECK(seen_calls == 1 && seen_comm == d && seen_code == rc, "handler: %d calls, comm %#x, code %d", seen_calls,
          seen_comm, seen_code);

    /* A dup inherits the handler. */
    MPI_Comm e;
    OK(MPI_Comm_dup(d, &e));
    rc = MPI_Recv(&x, -1, MPI_INT, 0, 0, e, MPI_STATUS_IGNORE);
    CHECK(class_of(rc) == MPI_ERR_COUNT && seen_calls == 2 && seen_comm == e, "inherited handler: %d calls", seen_calls);

    /* Freeing the handler while communicators use it: they keep it. */
    OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL, "freed handler not MPI_ERRHANDLER_NULL");
    OK(MPI_Comm_call_errhandler(e, MPI_ERR_OTHER));
    CHECK(seen_calls == 3 && seen_code == MPI_ERR_OTHER, "call_errhandler after free: %d calls", seen_calls);

    /* The program's classes and codes. */
    int cls, code, code2;
    OK(MPI_Add_error_class(&cls));
    OK(MPI_Add_error_code(cls, &code));
    OK(MPI_Add_error_code(MPI_ERR_ARG, &code2));
    OK(MPI_Add_error_string(cls, "my class"));
    OK(MPI_Add_error_string(code, "my code"));
    int k;
    OK(MPI_Error_class(code, &k));
    CHECK(k == cls, "class of my code: %d not %d", k, cls);
    OK(MPI_Error_class(cls, &k));
    CHECK(k == cls, "class of my class: %d", k);
    OK(MPI_Error_class(code2, &k));
    CHECK(k == MPI_ERR_ARG, "class of a code of MPI_ERR_ARG: %d", k);
    char s[MPI_MAX_ERROR_STRING];
    int len;
    OK(MPI_Error_string(code, s, &len));
    CHECK(strcmp(s, "my code") == 0, "my code's string: %s", s);
    OK(MPI_Error_string(cls, s, &len));
    CHECK(strcmp(s, "my class") == 0, "my class's string: %s", s);
    int *last, flag;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag));
    CHECK(flag && *last >= code2 && *last >= code, "MPI_LASTUSEDCODE %d below %d", *last, code2);
    OK(MPI_Comm_call_errhandler(e, code));
    CHECK(seen_calls == 4 && seen_code == code, "my code through the handler");

    /* MPI_ERRORS_RETURN: calling it does nothing. */
    OK(MPI_Comm_set_errhandler(e, MPI_ERRORS_RETURN));
    OK(MPI_Comm_call_errhandler(e, MPI_ERR_OTHER));
    CHECK(seen_calls == 4, "MPI_ERRORS_RETURN called the handler");
    /* MPI_ERRORS_ABORT (MPI-4.0) is a predefined handler: set, got back, its handle freed. */
    OK(MPI_Comm_set_errhandler(e, MPI_ERRORS_ABORT));
    MPI_Errhandler abort_h;
    OK(MPI_Comm_get_errhandler(e, &abort_h));
    CHECK(abort_h == MPI_ERRORS_ABORT, "MPI_ERRORS_ABORT not kept");
    OK(MPI_Errhandler_free(&abort_h));
    CHECK(abort_h == MPI_ERRHANDLER_NULL, "freed handle not nulled");
    OK(MPI_Comm_set_errhandler(e, MPI_ERRORS_RETURN));
    /* A freed handler cannot be set again. */
    rc = MPI_Comm_set_errhandler(e, eh);
    CHECK(rc != MPI_SUCCESS, "MPI_ERRHANDLER_NULL accepted");
    OK(MPI_Comm_free(&e));
    OK(MPI_Comm_free(&d));

    OK(MPI_Finalize());
    printf("OK errhandlers %d\n", rank);
    return 0;
}
