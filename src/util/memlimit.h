// How much memory this process may use, so that a size read from a file or
// a flag is refused before it is allocated: an absurd size then fails with
// the reason instead of an out-of-memory kill halfway through.
#pragma once

// Bytes: RAM + swap, capped by RLIMIT_AS, RLIMIT_DATA and the cgroup v2
// memory.max (+ memory.swap.max) of this process when they are set.
double mem_limit_bytes(void);
// MHAR_OK if `bytes` fit mem_limit_bytes(); else MHAR_ERR with the message
// "<what, printf-style> needs X GiB, more than the Y GiB of memory ...".
int mem_check(double bytes, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
