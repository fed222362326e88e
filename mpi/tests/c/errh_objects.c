/* Error handlers of every kind and their lifetimes (MPI-4.1 §9.3): MPI_File_create_errhandler,
 * MPI_Win_create_errhandler, MPI_Session_create_errhandler; MPI_FILE_NULL's handler (at first
 * MPI_ERRORS_RETURN; set, got, called: the program's file handler gets MPI_FILE_NULL and the
 * code; bad input goes to it); the window calls on MPI_WIN_NULL (MPI_ERR_WIN); handlers of the
 * wrong kind refused (MPI_ERR_ARG); MPI_Comm_get_errhandler and MPI_Session_get_errhandler hand
 * out new handles the program frees, 100 times over, without freeing the handler in use; a
 * handler freed while in use keeps working until the last user lets go of it; freeing a
 * predefined handler resets the handle; a freed or null handle is MPI_ERR_ARG (as MPICH); the names
 * of MPI_COMM_NULL, MPI_DATATYPE_NULL and MPI_WIN_NULL (MPI-4.1). Prints
 * "OK errh_objects <rank>". */
#include "check.h"

static int rank;
static int file_calls, file_code;
static MPI_File file_seen = (MPI_File)1;
static int comm_calls, comm_code;
static MPI_Comm comm_seen;
static int session_calls;

static void on_file(MPI_File *f, int *code, ...) {
    file_calls++;
    file_seen = *f;
    file_code = *code;
}

static void on_win(MPI_Win *w, int *code, ...) {
    (void)w;
    (void)code;
}

static void on_comm(MPI_Comm *c, int *code, ...) {
    comm_calls++;
    comm_seen = *c;
    comm_code = *code;
}

static void on_session(MPI_Session *s, int *code, ...) {
    (void)s;
    (void)code;
    session_calls++;
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    check_rank = rank;
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));

    /* MPI_FILE_NULL's handler is MPI_ERRORS_RETURN at first; a handle from get is freed. */
    MPI_Errhandler e, fe, we, ce, se, g;
    OK(MPI_File_get_errhandler(MPI_FILE_NULL, &e));
    CHECK(e == MPI_ERRORS_RETURN, "file default %#x", e);
    OK(MPI_Errhandler_free(&e));
    CHECK(e == MPI_ERRHANDLER_NULL, "freed predefined handle %#x", e);
    OK(MPI_File_call_errhandler(MPI_FILE_NULL, MPI_ERR_OTHER));

    OK(MPI_File_create_errhandler(on_file, &fe));
    OK(MPI_Win_create_errhandler(on_win, &we));
    OK(MPI_Comm_create_errhandler(on_comm, &ce));
    OK(MPI_Session_create_errhandler(on_session, &se));
    CHECK(fe != MPI_ERRHANDLER_NULL && we != fe && ce != we && se != ce, "handles %#x %#x %#x %#x", fe, we, ce, se);
    FAILS_WITH(MPI_File_create_errhandler(NULL, &g), MPI_ERR_ARG);
    FAILS_WITH(MPI_Win_create_errhandler(on_win, NULL), MPI_ERR_ARG);

    /* Handlers of another kind are refused, on files, communicators and sessions. */
    FAILS_WITH(MPI_File_set_errhandler(MPI_FILE_NULL, ce), MPI_ERR_ARG);
    FAILS_WITH(MPI_File_set_errhandler(MPI_FILE_NULL, we), MPI_ERR_ARG);
    FAILS_WITH(MPI_File_set_errhandler(MPI_FILE_NULL, se), MPI_ERR_ARG);
    FAILS_WITH(MPI_Comm_set_errhandler(MPI_COMM_SELF, fe), MPI_ERR_ARG);
    FAILS_WITH(MPI_Comm_set_errhandler(MPI_COMM_SELF, se), MPI_ERR_ARG);
    FAILS_WITH(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRHANDLER_NULL), MPI_ERR_ARG);
    FAILS_WITH(MPI_Comm_set_errhandler(MPI_COMM_SELF, 12345), MPI_ERR_ARG);
    FAILS_WITH(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRHANDLER_NULL), MPI_ERR_ARG);

    /* The program's file handler on MPI_FILE_NULL: got back, called with MPI_FILE_NULL. */
    OK(MPI_File_set_errhandler(MPI_FILE_NULL, fe));
    OK(MPI_File_get_errhandler(MPI_FILE_NULL, &g));
    CHECK(g == fe, "got %#x, set %#x", g, fe);
    OK(MPI_Errhandler_free(&g));
    CHECK(g == MPI_ERRHANDLER_NULL, "freed handle %#x", g);
    OK(MPI_File_call_errhandler(MPI_FILE_NULL, MPI_ERR_OTHER));
    CHECK(file_calls == 1 && file_seen == MPI_FILE_NULL && file_code == MPI_ERR_OTHER, "file handler: %d calls, code %d",
          file_calls, file_code);
    /* Freed while MPI_FILE_NULL holds it: it still runs. */
    OK(MPI_Errhandler_free(&fe));
    OK(MPI_File_call_errhandler(MPI_FILE_NULL, MPI_ERR_ARG));
    CHECK(file_calls == 2 && file_code == MPI_ERR_ARG, "after free: %d calls, code %d", file_calls, file_code);
    /* A file call's error goes to MPI_FILE_NULL's handler, then returns. */
    int rc = MPI_File_set_errhandler(MPI_FILE_NULL, ce);
    CHECK(class_of(rc) == MPI_ERR_ARG && file_calls == 3 && file_code == rc, "error to the file handler: %d calls", file_calls);
    /* A new handle to it; MPI_FILE_NULL lets go of it; the handle still names it until freed. */
    OK(MPI_File_get_errhandler(MPI_FILE_NULL, &g));
    OK(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN));
    OK(MPI_File_set_errhandler(MPI_FILE_NULL, g));
    OK(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN));
    MPI_Errhandler g2 = g;
    OK(MPI_Errhandler_free(&g));
    FAILS_WITH(MPI_Errhandler_free(&g2), MPI_ERR_ARG);
    FAILS_WITH(MPI_File_set_errhandler(MPI_FILE_NULL, g2), MPI_ERR_ARG);

    /* Windows: MPI_WIN_NULL is no window. */
    FAILS_WITH(MPI_Win_set_errhandler(MPI_WIN_NULL, we), MPI_ERR_WIN);
    FAILS_WITH(MPI_Win_get_errhandler(MPI_WIN_NULL, &g), MPI_ERR_WIN);
    FAILS_WITH(MPI_Win_call_errhandler(MPI_WIN_NULL, MPI_ERR_OTHER), MPI_ERR_WIN);
    OK(MPI_Errhandler_free(&we));
    FAILS_WITH(MPI_Errhandler_free(&we), MPI_ERR_ARG);

    /* MPI-4.1: the null handles' names are their own (mpi4py checks them once MPI_VERSION is 4.1). */
    {
        char name[MPI_MAX_OBJECT_NAME];
        int len = -1;
        OK(MPI_Comm_get_name(MPI_COMM_NULL, name, &len));
        CHECK(len == 13 && strcmp(name, "MPI_COMM_NULL") == 0, "MPI_COMM_NULL's name: %s (%d)", name, len);
        OK(MPI_Type_get_name(MPI_DATATYPE_NULL, name, &len));
        CHECK(strcmp(name, "MPI_DATATYPE_NULL") == 0, "MPI_DATATYPE_NULL's name: %s", name);
        OK(MPI_Win_get_name(MPI_WIN_NULL, name, &len));
        CHECK(strcmp(name, "MPI_WIN_NULL") == 0, "MPI_WIN_NULL's name: %s", name);
    }

    /* Predefined handlers: freeing one resets the handle; MPI_ERRHANDLER_NULL is no handler. */
    MPI_Errhandler p = MPI_ERRORS_RETURN;
    OK(MPI_Errhandler_free(&p));
    CHECK(p == MPI_ERRHANDLER_NULL, "freed predefined %#x", p);
    p = MPI_ERRORS_ARE_FATAL;
    OK(MPI_Errhandler_free(&p));
    p = MPI_ERRHANDLER_NULL;
    FAILS_WITH(MPI_Errhandler_free(&p), MPI_ERR_ARG);

    /* A communicator's handler: 100 handles from get, each freed, the handler still in use. */
    MPI_Comm d;
    OK(MPI_Comm_dup(MPI_COMM_SELF, &d));
    OK(MPI_Comm_set_errhandler(d, ce));
    MPI_Errhandler many[100];
    for (int i = 0; i < 100; i++) OK(MPI_Comm_get_errhandler(d, &many[i]));
    for (int i = 0; i < 100; i++) {
        CHECK(many[i] == ce, "get %d: %#x", i, many[i]);
        OK(MPI_Errhandler_free(&many[i]));
        CHECK(many[i] == MPI_ERRHANDLER_NULL, "freed %d", i);
    }
    OK(MPI_Comm_call_errhandler(d, 7));
    CHECK(comm_calls == 1 && comm_seen == d && comm_code == 7, "comm handler: %d calls", comm_calls);
    /* The creator's handle freed while d uses it: it keeps working; d's dup inherits it. */
    OK(MPI_Errhandler_free(&ce));
    OK(MPI_Comm_call_errhandler(d, 8));
    CHECK(comm_calls == 2 && comm_code == 8, "after free: %d calls", comm_calls);
    MPI_Comm d2;
    OK(MPI_Comm_dup(d, &d2));
    OK(MPI_Comm_free(&d));
    OK(MPI_Comm_call_errhandler(d2, 9));
    CHECK(comm_calls == 3 && comm_seen == d2 && comm_code == 9, "dup's handler: %d calls", comm_calls);
    /* Got again from d2 (a new handle), set back on d2, freed: still there. */
    OK(MPI_Comm_get_errhandler(d2, &g));
    OK(MPI_Comm_set_errhandler(d2, g));
    OK(MPI_Errhandler_free(&g));
    int x = 0;
    rc = MPI_Send(&x, 1, MPI_INT, 5, 0, d2);
    CHECK(class_of(rc) == MPI_ERR_RANK && comm_calls == 4 && comm_code == rc, "error on d2: %d calls", comm_calls);
    OK(MPI_Comm_set_errhandler(d2, MPI_ERRORS_RETURN));
    OK(MPI_Comm_free(&d2));
    /* The predefined handler of a communicator, from get: freeing it is fine. */
    OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &g));
    CHECK(g == MPI_ERRORS_RETURN, "world's %#x", g);
    OK(MPI_Errhandler_free(&g));

    /* A session's handler: got 100 times and freed, then the creator's handle freed while the
     * session uses it. */
    MPI_Session s;
    OK(MPI_Session_init(MPI_INFO_NULL, se, &s));
    /* A bad handler: the error goes to the session's handler. */
    FAILS_WITH(MPI_Session_set_errhandler(s, MPI_ERRHANDLER_NULL), MPI_ERR_ARG);
    CHECK(session_calls == 1, "session handler on a bad set: %d calls", session_calls);
    for (int i = 0; i < 100; i++) OK(MPI_Session_get_errhandler(s, &many[i]));
    for (int i = 0; i < 100; i++) {
        CHECK(many[i] == se, "session get %d: %#x", i, many[i]);
        OK(MPI_Errhandler_free(&many[i]));
    }
    OK(MPI_Errhandler_free(&se));
    OK(MPI_Session_call_errhandler(s, MPI_ERR_OTHER));
    CHECK(session_calls == 2, "session handler: %d calls", session_calls);
    OK(MPI_Session_get_errhandler(s, &g));
    OK(MPI_Session_set_errhandler(s, MPI_ERRORS_RETURN));
    OK(MPI_Session_set_errhandler(s, g));
    OK(MPI_Errhandler_free(&g));
    OK(MPI_Session_call_errhandler(s, MPI_ERR_OTHER));
    CHECK(session_calls == 3, "session handler again: %d calls", session_calls);
    OK(MPI_Session_finalize(&s));


    OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("OK errh_objects %d\n", rank);
    OK(MPI_Finalize());
    return 0;
}
