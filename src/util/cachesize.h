// The CPU's cache sizes, for the benches' working sets. The kernel's sysfs
// view first: glibc's sysconf derives them from CPUID on its own and can be
// far off (on an AMD EPYC VM: L3 320 MiB where sysfs and the hardware say
// 32 MiB, so the bench printed a last-level cache ten times too large).
#pragma once

// Bytes of the level-`level` data or unified cache of CPU 0 (1, 2, 3 ...),
// from <root>/cpu0/cache/index*/ (root: "/sys/devices/system/cpu" in use,
// a fake tree in tests); 0 where none is listed.
long cache_bytes_sysfs(const char *root, int level);
// The same from sysfs, else from sysconf, else 0.
long cache_bytes(int level);
// The largest cache level's size (the last-level cache), else the L2's, else 0.
long llc_bytes(void);
