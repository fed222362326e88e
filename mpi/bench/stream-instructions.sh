#!/usr/bin/env bash
# Instructions per message of small-message streaming through libmpi.so (issue 16): windows of 64
# MPI_Isend + MPI_Waitall against 64 MPI_Irecv + MPI_Waitall, the pattern of
# ../shared/bench/mpi_pingpong.c's `bw` mode, with both ranks under callgrind
# (mpi/bench/stream_instructions.c; the receiver lets the window arrive before it waits).
#
#   mpi/bench/stream-instructions.sh [SIZE...]          (default: 8 1024 2048 bytes; 200 windows)
#
# Needs the release build (cargo build --release -p nemesis-mpi -p nemesis) and valgrind. Prints,
# per size, the inclusive instructions per message of MPI_Isend, MPI_Waitall and their sum on the
# sender, of MPI_Irecv, MPI_Waitall and their sum on the receiver (a Waitall's cost divided by the
# 64 requests it completes). Counting does not depend on the machine's load; waiting does: a
# receiver whose window had not all arrived polls inside MPI_Waitall (its figure grows).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(dirname "$here")
windows=${STREAM_WINDOWS:-200}
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(8 1024 2048)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$here/bin/mpicc" -O2 -o "$work/stream_instructions" "$here/bench/stream_instructions.c"
cd "$work"
for size in "${sizes[@]}"; do
    rm -f cg.0 cg.1
    "$root/target/release/nemesis-run" -n 2 -- sh -c \
        "exec valgrind --tool=callgrind --callgrind-out-file=cg.\$PMI_RANK ./stream_instructions $size $windows" \
        >/dev/null 2>&1
    msgs=$((windows * 64))
    for r in 0 1; do
        callgrind_annotate --inclusive=yes --threshold=100 cg.$r 2>/dev/null | grep libmpi.so |
            grep -E ':P?MPI_(Isend|Irecv|Waitall) ' >lines.$r || true
    done
    awk -v m="$msgs" -v size="$size" '
        FNR == 1 { r++ }
        { gsub(",", "", $1); name = $0; sub(/.*:P?/, "", name); sub(/ .*/, "", name); c[r, name] += $1 }
        END {
            si = c[1, "MPI_Isend"] / m; sw = c[1, "MPI_Waitall"] / m
            ri = c[2, "MPI_Irecv"] / m; rw = c[2, "MPI_Waitall"] / m
            printf "size %d: sender MPI_Isend %.1f + MPI_Waitall %.1f = %.1f; receiver MPI_Irecv %.1f + MPI_Waitall %.1f = %.1f instructions per message\n",
                size, si, sw, si + sw, ri, rw, ri + rw
        }' lines.0 lines.1
done
