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
. tools/ab_common.sh
git show "$rev:src/kernels/cpu/route_forward.c" > "$tmp/fa.c"
git show "$rev:src/kernels/cpu/route_backward.c" > "$tmp/ba.c"
git show "$rev:src/kernels/cpu/route_impl.h" > "$tmp/inc/kernels/cpu/route_impl.h"
names() { echo "-Droute_forward=route_forward_$1 -Droute_backward=route_backward_$1 \
-Droute_backward_set=route_backward_set_$1 -Droute_scratch_floats=route_scratch_floats_$1 -Droute_mix=route_mix_$1"; }
$cc -I"$tmp/inc" $flags $(names A) -c "$tmp/fa.c" -o "$tmp/fa.o"
$cc -I"$tmp/inc" $flags $(names A) -c "$tmp/ba.c" -o "$tmp/ba.o"
$cc $flags $(names B) -c "$fwd" -o "$tmp/fb.o"
$cc $flags $(names B) -c "$bwd" -o "$tmp/bb.o"
ab_link route_ab route_ab.c
"$tmp/route_ab" "$@"
