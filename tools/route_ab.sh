#!/usr/bin/env bash
# Paired A/B of the route kernels (tools/route_ab.c): A from a git revision,
# B from files (default: the working tree's), linked into one program.
#   tools/route_ab.sh [-a REV] [-f FORWARD.c] [-b BACKWARD.c] [-- H ROUNDS TOKENS CHAIN]
# The program links build/libmhar.a (made first if missing). Stop other
# work on the machine while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=HEAD fwd=src/kernels/cpu/route_forward.c bwd=src/kernels/cpu/route_backward.c
while getopts a:f:b: o; do
    case $o in a) rev=$OPTARG ;; f) fwd=$OPTARG ;; b) bwd=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
[ -f build/libmhar.a ] || make -s build/libmhar.a   # the rest of mhar, as the default build makes it
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git show "$rev:src/kernels/cpu/route_forward.c" > "$tmp/fa.c"
git show "$rev:src/kernels/cpu/route_backward.c" > "$tmp/ba.c"
# A's objects see A's shared header (found before src/ by the include path).
mkdir -p "$tmp/inc/kernels/cpu"
git show "$rev:src/kernels/cpu/route_impl.h" > "$tmp/inc/kernels/cpu/route_impl.h"
# The flags of the Makefile's route objects.
cc=${CC:-cc}
flags="-Isrc -std=c11 -O3 -march=native -fopenmp -fno-trapping-math -D_GNU_SOURCE -ffp-contract=fast -fno-math-errno"
names() { echo "-Droute_forward=route_forward_$1 -Droute_backward=route_backward_$1 \
-Droute_backward_set=route_backward_set_$1 -Droute_scratch_floats=route_scratch_floats_$1 -Droute_mix=route_mix_$1"; }
$cc -I"$tmp/inc" $flags $(names A) -c "$tmp/fa.c" -o "$tmp/fa.o"
$cc -I"$tmp/inc" $flags $(names A) -c "$tmp/ba.c" -o "$tmp/ba.o"
$cc $flags $(names B) -c "$fwd" -o "$tmp/fb.o"
$cc $flags $(names B) -c "$bwd" -o "$tmp/bb.o"
$cc $flags tools/route_ab.c "$tmp"/*.o build/libmhar.a -fopenmp -lopenblas -lcjson -lm \
    $(mpicc --showme:link) -o "$tmp/route_ab"
"$tmp/route_ab" "$@"
