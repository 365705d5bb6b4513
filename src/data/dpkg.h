// Debian's package database, read directly (no dpkg process).
#pragma once
#include <stddef.h>

// Version of an installed package from /var/lib/dpkg/status into out[cap]:
// 1 if installed, 0 otherwise (no database, not installed, unreadable).
int dpkg_version(const char *pkg, char *out, size_t cap);
