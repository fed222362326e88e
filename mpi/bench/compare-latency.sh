#!/usr/bin/env bash
# 8-byte one-way latency through the C ABI next to Open MPI (and MPICH if installed): the same
# program, ../shared/bench/mpi_pingpong.c ("lat 8"), built with each mpicc, both ranks pinned to
# cores, rounds interleaved (the order alternates every round), medians of per-round ratios.
#
#   mpi/bench/compare-latency.sh [--rt] [ROUNDS]          (default 11 rounds)
#
# --rt runs every job (nemesis's and the others' alike) under `chrt -f 10` (SCHED_FIFO, needs root):
# on a shared machine, other jobs then cannot preempt the pinned ranks, which otherwise dominates the
# spread.
#
# Needs the release build (cargo build --release -p nemesis-mpi -p nemesis) and Debian's
# openmpi-bin + libopenmpi-dev (mpicc.openmpi, mpiexec.openmpi); mpich (mpicc.mpich,
# mpiexec.hydra) is measured too when present. Prints one line per round, then the medians and
# the median of the per-round ratios nemesis/Open MPI (the target is <= 0.5).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(dirname "$here")
rt=()
if [ "${1:-}" = "--rt" ]; then
    rt=(chrt -f 10)
    shift
fi
rounds=${1:-11}
src=${MPI_PINGPONG_C:-$root/../shared/bench/mpi_pingpong.c}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$here/bin/mpicc" -O2 -o "$work/pp_nemesis" "$src"
mpicc.openmpi -O2 -o "$work/pp_openmpi" "$src"
have_mpich=no
if command -v mpicc.mpich >/dev/null && command -v mpiexec.hydra >/dev/null; then
    mpicc.mpich -O2 -o "$work/pp_mpich" "$src"
    have_mpich=yes
fi

# One-way latency in microseconds of 8-byte messages, from one run.
lat() {
    case "$1" in
        nemesis) "${rt[@]}" "$root/target/release/nemesis-run" -n 2 --bind core -- "$work/pp_nemesis" lat 8 ;;
        openmpi) OMPI_MCA_btl_vader_single_copy_mechanism=none \
            "${rt[@]}" mpiexec.openmpi --allow-run-as-root -n 2 --bind-to core "$work/pp_openmpi" lat 8 2>/dev/null ;;
        mpich) "${rt[@]}" mpiexec.hydra -n 2 -bind-to core "$work/pp_mpich" lat 8 ;;
    esac | awk '$1 == "lat" && $2 == 8 { print $3 }'
}

systems=(nemesis openmpi)
[ "$have_mpich" = yes ] && systems+=(mpich)
: >"$work/results"
for ((r = 1; r <= rounds; r++)); do
    # Alternate the order so that neither system always runs first.
    if ((r % 2)); then order=("${systems[@]}"); else order=($(printf '%s\n' "${systems[@]}" | tac)); fi
    declare -A t=()
    for s in "${order[@]}"; do t[$s]=$(lat "$s"); done
    ratio=$(awk -v a="${t[nemesis]}" -v b="${t[openmpi]}" 'BEGIN { printf "%.3f", a / b }')
    line="round $r: nemesis ${t[nemesis]} us, openmpi ${t[openmpi]} us"
    [ "$have_mpich" = yes ] && line+=", mpich ${t[mpich]} us"
    echo "$line, nemesis/openmpi $ratio"
    echo "${t[nemesis]} ${t[openmpi]} ${t[mpich]:-0} $ratio" >>"$work/results"
    unset t
done

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
mn=$(cut -d' ' -f1 "$work/results" | median)
mo=$(cut -d' ' -f2 "$work/results" | median)
mr=$(cut -d' ' -f4 "$work/results" | median)
lo=$(cut -d' ' -f4 "$work/results" | sort -g | head -1)
hi=$(cut -d' ' -f4 "$work/results" | sort -g | tail -1)
line="medians over $rounds rounds: nemesis $mn us, openmpi $mo us"
if [ "$have_mpich" = yes ]; then line+=", mpich $(cut -d' ' -f3 "$work/results" | median) us"; fi
echo "$line"
echo "median of per-round ratios nemesis/openmpi: $mr (range $lo-$hi; target <= 0.5)"
