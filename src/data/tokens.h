// Token files: a 32-byte header then the tokens, little-endian.
//   0  char[8]  magic "MHARTOK\0"
//   8  u32      version (1)
//   12 u32      token width in bytes (2 = uint16, 4 = uint32)
//   16 u64      token count
//   24 u32      vocabulary size the tokens were made for (every id < it)
//   28 u32      reserved (0)
//   32 ...      count tokens
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int *tokens;      // decoded to int
    size_t count;
    int vocab_size;
    int width;
} TokenFile;

// Load and validate: magic, version, width, count against the file size,
// every id < vocab_size. Errors name the file and the reason.
int tokens_load(const char *path, TokenFile *tf);
int tokens_save(const char *path, const int *tokens, size_t count, int vocab_size); // atomic; width chosen from vocab
void tokens_free(TokenFile *tf);
