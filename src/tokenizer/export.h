// The tokenizer in the reference libraries' forms, and back.
//   HF tokenizers tokenizer.json: a BPE model over GPT-2's byte-to-character
//   map (every byte a printable character, so token strings are JSON text),
//   pre-tokenizer Sequence[Split(Regex(pattern), Isolated), ByteLevel(no
//   regex)], decoder ByteLevel, special tokens as added tokens.
//   tiktoken: "base64(token bytes) rank" per line (rank = id), plus a JSON
//   sidecar {pat_str, special_tokens, explicit_n_vocab}.
#pragma once
#include "bpe.h"

int bpe_export_hf(const Bpe *b, const char *path);
// Needs ids in merge order (tiktoken's rank is the id and the merge order):
// refused, with the reason, for an imported vocabulary that is not.
int bpe_export_tiktoken(const Bpe *b, const char *path);
// Load a byte-level BPE tokenizer.json; refuses (with the reason) what mhar
// could not encode identically: normalizers, unknown split patterns,
// dropout, subword prefixes or suffixes, stripping added tokens.
int bpe_import_hf(const char *path, Bpe *b);

// GPT-2's byte <-> character map: bytes that are printable Latin-1 map to
// themselves, the others to U+0100 upward in byte order.
void byte_level_map(uint32_t cp_of_byte[256]);
