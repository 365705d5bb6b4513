# Shared helpers of the shell tests (sourced from the repo root): the binary,
# a scratch directory removed on exit, and the PASS/FAIL lines tests/run.sh counts.
M=${MHAR_BIN:-$PWD/mhar}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
# expect_error NAME PATTERN CMD...: CMD must fail and say PATTERN (an extended
# regex, case-insensitive) on stderr. expect_error_fixed: PATTERN is literal.
expect_error() { _expect_error -E "$@"; }
expect_error_fixed() { _expect_error -F "$@"; }
_expect_error() {
    local mode=$1 name=$2 pattern=$3; shift 3
    local err; err=$("$@" 2>&1 >/dev/null); local rc=$?
    if [ $rc -ne 0 ] && grep -qi "$mode" -- "$pattern" <<<"$err"; then pass "$name"
    else fail "$name" "rc=$rc, stderr: $err"; fi
}
