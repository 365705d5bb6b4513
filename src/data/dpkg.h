// Debian's package database, read directly (no dpkg process).
#pragma once
#include <stddef.h>

#define DPKG_STATUS "/var/lib/dpkg/status"

// Version of an installed package from DPKG_STATUS into out[cap]: 1 if
// installed, 0 otherwise (no database, not installed, unreadable).
int dpkg_version(const char *pkg, char *out, size_t cap);
// The same from the text of a status file: records of "Key: value" lines
// separated by blank lines; only "Status: install ok installed" counts.
int dpkg_status_version(const char *status, const char *pkg, char *out, size_t cap);
