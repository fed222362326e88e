/* The non-commutative user operation of the reduction tests: composition of affine maps
 * x -> a x + b on MPI_2INT (wrapping arithmetic), which combines correctly only in rank order.
 * Rank r's map for element i is map_of(r, i); composed(n, i) is ranks 0..n-1's in rank order. */
#ifndef AFFINE_H
#define AFFINE_H

#include "check.h"

typedef struct {
    int a, b;
} affine;

/* How many times MPI called compose. */
static int affine_calls __attribute__((unused));

/* f, then g: x -> g.a (f.a x + f.b) + g.b. */
static inline affine affine_then(affine f, affine g) {
    unsigned a = (unsigned)g.a * (unsigned)f.a;
    unsigned b = (unsigned)g.a * (unsigned)f.b + (unsigned)g.b;
    affine r = {(int)a, (int)b};
    return r;
}

/* The MPI_User_function: inout[i] = in[i], then inout[i]. */
static void __attribute__((unused)) compose(void *in, void *inout, int *len, MPI_Datatype *dt) {
    CHECK(*dt == MPI_2INT, "compose called on type %#x", *dt);
    affine *x = in, *y = inout;
    for (int i = 0; i < *len; i++) y[i] = affine_then(x[i], y[i]);
    affine_calls++;
}

/* Rank r's map for element i. */
static inline affine map_of(int r, int i) {
    affine m = {(int)(2u * (unsigned)(r + i) + 1u), r * 7 + i};
    return m;
}

/* Ranks 0..upto-1's maps composed in rank order. */
static inline affine composed(int upto, int i) {
    affine acc = map_of(0, i);
    for (int r = 1; r < upto; r++) acc = affine_then(acc, map_of(r, i));
    return acc;
}

#endif
