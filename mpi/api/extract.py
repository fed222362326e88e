#!/usr/bin/env python3
"""Writes mpi/api/mpi.api: the MPI-4.1 C interface as data, one declaration per line.

Source: the MPI Forum's `pympistandard` 0.2.0 (`pip install pympistandard==0.2.0`), whose data is
MPI-5.0's: the 28 names MPI-5.0 added (the `MPI_Abi_*` calls but `Abi_get_version`/`Abi_get_info`,
every `*_toint`/`*_fromint`) are dropped; the MPI-1 calls MPI-3.0 removed that MPICH 4.x still
exports are added with MPICH's prototypes. Run from anywhere: `python3 mpi/api/extract.py`.
The test `generated` runs it (when `pympistandard` imports) and checks the output is current.
"""

import os
import sys

import pympistandard as std

# MPI-5.0 names the library does not export: the ABI calls but the two the issue asks for.
MPI5_ABI_DROPPED = {"MPI_Abi_get_fortran_booleans", "MPI_Abi_get_fortran_info",
                    "MPI_Abi_set_fortran_booleans", "MPI_Abi_set_fortran_info"}

# Removed in MPI-3.0, still exported by MPICH 4.x (its mpi_proto.h prototypes).
REMOVED = [
    "int MPI_Address(void* location, MPI_Aint* address)",
    "int MPI_Errhandler_create(MPI_Comm_errhandler_function* comm_errhandler_fn, MPI_Errhandler* errhandler)",
    "int MPI_Errhandler_get(MPI_Comm comm, MPI_Errhandler* errhandler)",
    "int MPI_Errhandler_set(MPI_Comm comm, MPI_Errhandler errhandler)",
    "int MPI_Type_extent(MPI_Datatype datatype, MPI_Aint* extent)",
    "int MPI_Type_hindexed(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[], "
    "MPI_Datatype oldtype, MPI_Datatype* newtype)",
    "int MPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype* newtype)",
    "int MPI_Type_lb(MPI_Datatype datatype, MPI_Aint* displacement)",
    "int MPI_Type_struct(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[], "
    "MPI_Datatype array_of_types[], MPI_Datatype* newtype)",
    "int MPI_Type_ub(MPI_Datatype datatype, MPI_Aint* displacement)",
]

# Errors of the data, corrected to the standard's text (MPI-4.1 §11.4.1: `char *argv[]`).
FIXES = {
    "int MPI_Info_create_env(int argc, char argv[], MPI_Info* info)":
        "int MPI_Info_create_env(int argc, char* argv[], MPI_Info* info)",
}

HEADER = """\
# mpi.api: the MPI-4.1 C interface, one declaration per line, written by mpi/api/extract.py
# from pympistandard 0.2.0 (MPI-5.0 data, cut to MPI-4.1) -- do not edit; rerun extract.py.
# Each line: a tag, then the C declaration with the standard's parameter names and types.
#   fn          a function of MPI-4.1 (large-count `_c` forms included; MPI_Abi_get_version/_info of 5.0)
#   removed     an MPI-1 function MPI-3.0 removed that MPICH 4.x still exports (MPICH's prototype)
#   callback    a callback typedef
#   predefined  a predefined callback (MPI_COMM_DUP_FN...)
"""


def keep(name):
    if name.endswith("_toint") or name.endswith("_fromint"):
        return False
    return name not in MPI5_ABI_DROPPED


def c(decl):
    text = str(decl).replace("\\ldots", "...")
    return FIXES.get(text, text)


def main():
    std.use_api_version(1)
    fns = []
    for p in std.PROCEDURES.values():
        forms = [p.express.iso_c] if p.express.iso_c else []
        if forms and p.has_embiggenment():
            forms.append(p.express.embiggen.iso_c)
        for f in forms:
            if keep(f.name):
                fns.append((f.name, "fn", c(f)))
    fns += [(d.split("(")[0].split()[-1], "removed", d) for d in REMOVED]
    fns.sort(key=lambda t: t[0])
    cbs = []
    for p in std.CALLBACKS.values():
        cbs.append((p.express.iso_c.name, c(p.express.iso_c)))
        if p.has_embiggenment():
            cbs.append((p.express.embiggen.iso_c.name, c(p.express.embiggen.iso_c)))
    cbs.sort()
    pre = sorted((p.express.iso_c.name, c(p.express.iso_c)) for p in std.PREDEFINED_FUNCTIONS.values())
    lines = [HEADER]
    lines += [f"{tag} {decl}\n" for _, tag, decl in fns]
    lines += [f"callback {decl}\n" for _, decl in cbs]
    lines += [f"predefined {decl}\n" for _, decl in pre]
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "mpi.api")
    with open(out, "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
