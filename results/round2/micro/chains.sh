# Sourced by seed1.sh and seeds23.sh: the frozen binary, the sweeps' folder,
# the kernels, and a sweep of one run at a time, one thread, lowest priority.
MHAR=${MHAR:-/work/frozen/mhar}  # the frozen a33a03a build
S=${SWEEPS:-/work/sweeps}
export OPENBLAS_CORETYPE=SkylakeX
sweep() { nice -n 19 "$MHAR" sweep --jobs 1 --threads 1 "$@"; }
