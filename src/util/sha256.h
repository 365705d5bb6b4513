// SHA-256 (FIPS 180-4): streaming, one-shot, and the lowercase hex form.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes;      // total length so far
    uint8_t block[64];
    size_t fill;         // bytes waiting in block
} Sha256;
void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
void sha256_final(Sha256 *s, uint8_t digest[32]);
void sha256(const void *data, size_t n, uint8_t digest[32]);
void sha256_hex(const uint8_t digest[32], char hex[65]);
// The hex SHA-256 of a whole file; MHAR_ERR (naming the file) if it cannot be read.
int sha256_file(const char *path, char hex[65]);
