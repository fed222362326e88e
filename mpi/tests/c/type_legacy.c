/* The MPI-1 datatype calls removed in MPI-3.0 that MPICH's library still exports (its 4.x header no
 * longer declares them; nemesis's does): MPI_Address, MPI_Type_extent, MPI_Type_lb, MPI_Type_ub,
 * MPI_Type_struct, MPI_Type_hvector, MPI_Type_hindexed, with MPI_LB/MPI_UB markers — MPICH's
 * struct-no-real-types ({ (LB, 10) } has extent -10) and struct-empty-el (a zero-length member
 * dropped). Results agree with the MPI-2 calls. */
#include "check.h"

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_rank = rank;

    int one = 1;
    MPI_Aint ten = 10, e = 0, lb = 0, ub = 0;
    MPI_Datatype lbt = MPI_LB, t;
    OK(MPI_Type_struct(1, &one, &ten, &lbt, &t));
    int sz = -1;
    OK(MPI_Type_size(t, &sz));
    OK(MPI_Type_extent(t, &e));
    OK(MPI_Type_lb(t, &lb));
    OK(MPI_Type_ub(t, &ub));
    CHECK(sz == 0 && e == -10 && lb == 10 && ub == 0, "{ (LB, 10) }: size %d extent %ld lb %ld ub %ld", sz, (long)e,
          (long)lb, (long)ub);
    OK(MPI_Type_free(&t));

    /* struct-empty-el: ints at 0, 8, 12 of 16-byte elements. */
    int blks[3] = {0, 1, 2};
    MPI_Aint disps[3] = {8, 0, 8};
    MPI_Datatype types[3] = {MPI_FLOAT, MPI_INT, MPI_INT};
    OK(MPI_Type_struct(3, blks, disps, types, &t));
    OK(MPI_Type_commit(&t));
    int sent[6] = {1, 2, 3, 4, 5, 6}, got[8], want[8] = {1, -1, 2, 3, 4, -1, 5, 6};
    for (int k = 0; k < 8; k++) got[k] = -1;
    MPI_Request r;
    MPI_Status st;
    OK(MPI_Irecv(got, 2, t, 0, 0, MPI_COMM_SELF, &r));
    OK(MPI_Send(sent, 6, MPI_INT, 0, 0, MPI_COMM_SELF));
    OK(MPI_Wait(&r, &st));
    for (int k = 0; k < 8; k++) CHECK(got[k] == want[k], "int %d is %d, not %d", k, got[k], want[k]);
    OK(MPI_Type_extent(t, &e));
    CHECK(e == 16, "extent %ld", (long)e);
    OK(MPI_Type_free(&t));

    /* hvector and hindexed are create_hvector and create_hindexed. */
    MPI_Datatype a, b;
    OK(MPI_Type_hvector(3, 2, 20, MPI_SHORT, &a));
    OK(MPI_Type_create_hvector(3, 2, 20, MPI_SHORT, &b));
    MPI_Aint ea, eb, la, lbb;
    OK(MPI_Type_get_extent(a, &la, &ea));
    OK(MPI_Type_get_extent(b, &lbb, &eb));
    CHECK(ea == eb && la == lbb && ea == 44, "hvector extent %ld/%ld", (long)ea, (long)eb);
    OK(MPI_Type_free(&a));
    OK(MPI_Type_free(&b));
    int bl[2] = {1, 3};
    MPI_Aint hd[2] = {-8, 16};
    OK(MPI_Type_hindexed(2, bl, hd, MPI_INT, &a));
    OK(MPI_Type_lb(a, &lb));
    OK(MPI_Type_ub(a, &ub));
    CHECK(lb == -8 && ub == 28, "hindexed lb %ld ub %ld", (long)lb, (long)ub);
    OK(MPI_Type_free(&a));

    /* MPI_Address is MPI_Get_address. */
    double x[2];
    MPI_Aint p0, p1;
    OK(MPI_Address(&x[0], &p0));
    OK(MPI_Get_address(&x[1], &p1));
    CHECK(p1 - p0 == (MPI_Aint)sizeof(double), "addresses %ld apart", (long)(p1 - p0));

    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    FAILS_WITH(MPI_Type_extent(MPI_DATATYPE_NULL, &e), MPI_ERR_TYPE);
    printf("OK type_legacy %d\n", rank);
    MPI_Finalize();
    return 0;
}
