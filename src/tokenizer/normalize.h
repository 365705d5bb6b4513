// NFC (Unicode Normalization Form C), for tokenizers that normalize before
// splitting (Qwen2/Qwen3's tokenizer.json has an NFC normalizer): canonical
// decomposition, canonical ordering of combining marks, canonical
// composition (UAX #15), with Unicode data from tools/gen_unicode_tables.py.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t *cp;        // scratch code points
    size_t cap_cp;
    unsigned char *out;  // the normalized text
    size_t len, cap;
} Nfc;

// NFC of s[0..n) into nf->out[0..nf->len). Bytes that are not well-formed
// UTF-8 pass through unchanged (HF never sees them: it takes only valid text).
// Pure ASCII is already NFC: callers skip the call for it.
int nfc_normalize(Nfc *nf, const unsigned char *s, size_t n);
void nfc_free(Nfc *nf);
