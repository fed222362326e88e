#!/usr/bin/env bash
# The TCP netmod through the C ABI next to Open MPI's TCP transport: the same program,
# ../shared/bench/mpi_pingpong.c, built with each mpicc; nemesis's two ranks on two node identities
# (`nemesis-run -n 2 --nodes 2 --bind core`: every message crosses loopback TCP), Open MPI's with
# `--mca btl tcp,self --bind-to core`; rounds interleaved (the order alternates every round);
# medians of per-round ratios. Issue 7's targets: 8-byte latency <= 0.9 x Open MPI's, 1 MiB
# streaming bandwidth >= 1.1 x.
#
#   mpi/bench/compare-tcp.sh [ROUNDS]          (default 7 rounds)
#
# Needs the release build (cargo build --release --workspace) and Debian's openmpi-bin +
# libopenmpi-dev (mpicc.openmpi, mpiexec.openmpi).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
root=$(dirname "$here")
rounds=${1:-7}
src=${MPI_PINGPONG_C:-$root/../shared/bench/mpi_pingpong.c}
[ -f "$src" ] || src=$root/benches/c/mpi_pingpong.c
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$here/bin/mpicc" -O2 -o "$work/pp_nemesis" "$src"
mpicc.openmpi -O2 -o "$work/pp_openmpi" "$src"

# run SYSTEM MODE MAX: the program's output lines.
run() {
    case "$1" in
        nemesis) "$root/target/release/nemesis-run" -n 2 --nodes 2 --bind core -- "$work/pp_nemesis" "$2" "$3" ;;
        openmpi) mpiexec.openmpi --allow-run-as-root -n 2 --mca btl tcp,self --bind-to core \
            "$work/pp_openmpi" "$2" "$3" 2>/dev/null ;;
    esac
}
# figure SYSTEM MODE SIZE: the figure for SIZE from one run.
figure() { run "$1" "$2" "$3" | awk -v m="$2" -v s="$3" '$1 == m && $2 == s { print $3 }'; }

systems=(nemesis openmpi)
: >"$work/results"
for ((r = 1; r <= rounds; r++)); do
    if ((r % 2)); then order=("${systems[@]}"); else order=(openmpi nemesis); fi
    declare -A lat=() bw=()
    for s in "${order[@]}"; do
        lat[$s]=$(figure "$s" lat 8)
        bw[$s]=$(figure "$s" bw 1048576)
    done
    rl=$(awk -v a="${lat[nemesis]}" -v b="${lat[openmpi]}" 'BEGIN { printf "%.3f", a / b }')
    rb=$(awk -v a="${bw[nemesis]}" -v b="${bw[openmpi]}" 'BEGIN { printf "%.3f", a / b }')
    echo "round $r: 8 B latency nemesis ${lat[nemesis]} us, openmpi ${lat[openmpi]} us (ratio $rl);" \
        "1 MiB bandwidth nemesis ${bw[nemesis]} MB/s, openmpi ${bw[openmpi]} MB/s (ratio $rb)"
    echo "${lat[nemesis]} ${lat[openmpi]} $rl ${bw[nemesis]} ${bw[openmpi]} $rb" >>"$work/results"
    unset lat bw
done

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
col() { cut -d' ' -f"$1" "$work/results"; }
range() { echo "$(col "$1" | sort -g | head -1)-$(col "$1" | sort -g | tail -1)"; }
echo "medians over $rounds rounds: 8 B latency nemesis $(col 1 | median) us, openmpi $(col 2 | median) us;" \
    "1 MiB bandwidth nemesis $(col 4 | median) MB/s, openmpi $(col 5 | median) MB/s"
echo "median of per-round ratios nemesis/openmpi: latency $(col 3 | median) (range $(range 3); target <= 0.9)," \
    "bandwidth $(col 6 | median) (range $(range 6); target >= 1.1)"
