# Shared by tools/route_ab.sh and tools/source_ab.sh, sourced after their
# options: the rest of mhar (build/libmhar.a, made as the default build makes
# it if missing), a temporary directory removed on exit ($tmp), the compiler
# ($cc) and the Makefile's flags for the route objects ($flags), and
# ab_link NAME SOURCE: the A/B program from tools/SOURCE and $tmp/*.o.
[ -f build/libmhar.a ] || make -s build/libmhar.a
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/inc/kernels/cpu" # A's headers, found before src/ by the include path
cc=${CC:-cc}
flags="-Isrc -std=c11 -O3 -march=native -fopenmp -fno-trapping-math -D_GNU_SOURCE -ffp-contract=fast -fno-math-errno"
ab_link() {
    $cc $flags "tools/$2" "$tmp"/*.o build/libmhar.a -fopenmp -lopenblas -lcjson -lm $(mpicc --showme:link) \
        -o "$tmp/$1"
}
