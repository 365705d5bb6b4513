#!/bin/sh
# Sets up a Debian 12 machine for mhar, then builds it.
#   ./setup.sh          the build's packages (compiler, OpenBLAS, cJSON), then make
#   ./setup.sh --test   also the tests' packages and a project-local Python
#                       environment (.venv) with the reference libraries
# Installs only what is missing. As root it runs apt-get itself; otherwise it
# prints the exact command to run and stops. Written for plain sh: a fresh
# minimal Debian has no bash guarantees beyond the base system.
set -eu
cd "$(dirname "$0")"

# The build, and the main job's built-in data: a corpus of the Python
# standard library (libpython3-stdlib; no Python interpreter is run).
BUILD_PKGS="make gcc libc6-dev libopenblas-openmp-dev libcjson-dev libopenmpi-dev openmpi-bin libpython3-stdlib"
# The tests: Python for the references (in .venv), gnuplot for report plots,
# clang for the -Werror check and the sanitizer suite, valgrind, OpenMP for clang.
TEST_PKGS="python3 python3-venv ca-certificates gnuplot-nox clang libclang-rt-14-dev libomp-dev valgrind procps"
PY_REQS=tests/requirements.txt

test_too=0
case "${1:-}" in
    --test) test_too=1 ;;
    "") ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (see ./setup.sh --help)" >&2; exit 2 ;;
esac

want=$BUILD_PKGS
[ "$test_too" -eq 1 ] && want="$want $TEST_PKGS"
missing=""
for p in $want; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup.sh: missing Debian packages:$missing" >&2
        echo "run as root:  apt-get update && apt-get install -y --no-install-recommends$missing" >&2
        command -v sudo >/dev/null && echo "(or: sudo ./setup.sh${1:+ $1})" >&2
        exit 1
    fi
    echo "setup.sh: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086  # the list is meant to split into words
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

if [ "$test_too" -eq 1 ]; then
    # The reference libraries go into .venv, never the system's Python; a
    # stamp records which requirements file the environment was made from.
    if [ ! -x .venv/bin/python3 ]; then
        python3 -m venv .venv
    fi
    if ! cmp -s "$PY_REQS" .venv/requirements.installed 2>/dev/null; then
        echo "setup.sh: installing the Python test dependencies into .venv (this takes a few minutes once)"
        .venv/bin/python3 -m pip install -q --disable-pip-version-check -r "$PY_REQS"
        cp "$PY_REQS" .venv/requirements.installed
    fi
fi

make -j"$(nproc)" all
