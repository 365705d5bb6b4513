#!/usr/bin/env bash
# Paired A/B of the source-by-source route kernels (tools/source_ab.c):
# A from a git revision, B from a file (default: the working tree's
# route_source.c), linked into one program.
#   tools/source_ab.sh [-a REV] [-b ROUTE_SOURCE.c] [-- gather|keys H ROUNDS READERS TOKENS D memory|cache]
# The program links build/libmhar.a (made first if missing). Stop other
# work on the machine while it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=HEAD src=src/kernels/cpu/route_source.c
while getopts a:b: o; do
    case $o in a) rev=$OPTARG ;; b) src=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
. tools/ab_common.sh
git show "$rev:src/kernels/cpu/route_source.c" > "$tmp/a.c"
for h in route_impl.h tile_gemm.h; do
    git show "$rev:src/kernels/cpu/$h" > "$tmp/inc/kernels/cpu/$h" 2>/dev/null || rm -f "$tmp/inc/kernels/cpu/$h"
done
names() { echo "-Droute_gather=route_gather_$1 -Droute_keys=route_keys_$1 -Droute_dx_keep=route_dx_keep_$1 \
-Droute_source_scratch_floats=route_source_scratch_floats_$1"; }
$cc -I"$tmp/inc" $flags $(names A) -c "$tmp/a.c" -o "$tmp/a.o"
$cc $flags $(names B) -c "$src" -o "$tmp/b.o"
ab_link source_ab source_ab.c
"$tmp/source_ab" "$@"
