#include "normalize.h"

#include <stdlib.h>
#include <string.h>

#include "../util/common.h"
#include "unicode.h"

// Hangul syllables decompose and compose by arithmetic (Unicode ch. 3.12).
#define S_BASE 0xAC00u
#define L_BASE 0x1100u
#define V_BASE 0x1161u
#define T_BASE 0x11A7u
#define L_COUNT 19u
#define V_COUNT 21u
#define T_COUNT 28u
#define N_COUNT (V_COUNT * T_COUNT)
#define S_COUNT (L_COUNT * N_COUNT)
// An invalid byte b travels as the non-character RAW_BYTE + b: class 0,
// never composed, written back as the byte.
#define RAW_BYTE 0x110000u

static int ccc(uint32_t cp) {
    if (cp < 0x300 || cp >= RAW_BYTE) return 0;
    int lo = 0, hi = unicode_n_ccc - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < unicode_ccc[mid].lo) hi = mid - 1;
        else if (cp > unicode_ccc[mid].hi) lo = mid + 1;
        else return (int)unicode_ccc[mid].cls;
    }
    return 0;
}

static const UnicodeDecomp *decomp(uint32_t cp) {
    int lo = 0, hi = unicode_n_decomp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < unicode_decomp[mid].a) hi = mid - 1;
        else if (cp > unicode_decomp[mid].a) lo = mid + 1;
        else return &unicode_decomp[mid];
    }
    return NULL;
}

// The primary composite of (a, b), 0 if none.
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a - L_BASE < L_COUNT && b - V_BASE < V_COUNT)
        return S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
    if (a - S_BASE < S_COUNT && (a - S_BASE) % T_COUNT == 0 && b - T_BASE - 1 < T_COUNT - 1)
        return a + (b - T_BASE);
    uint64_t key = (uint64_t)a << 32 | b;
    int lo = 0, hi = unicode_n_comp - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        uint64_t k = (uint64_t)unicode_comp[mid].a << 32 | unicode_comp[mid].b;
        if (key < k) hi = mid - 1;
        else if (key > k) lo = mid + 1;
        else return unicode_comp[mid].c;
    }
    return 0;
}

// Full canonical decomposition of cp appended at cp_out[*n] (at most 4 code
// points for any character: the buffer has room for 4 per input byte).
static void decompose(uint32_t cp, uint32_t *out, size_t *n) {
    if (cp - S_BASE < S_COUNT) {
        uint32_t s = cp - S_BASE;
        out[(*n)++] = L_BASE + s / N_COUNT;
        out[(*n)++] = V_BASE + (s % N_COUNT) / T_COUNT;
        if (s % T_COUNT) out[(*n)++] = T_BASE + s % T_COUNT;
        return;
    }
    const UnicodeDecomp *d = cp >= 0xC0 && cp < RAW_BYTE ? decomp(cp) : NULL;
    if (!d) { out[(*n)++] = cp; return; }
    decompose(d->b, out, n);
    if (d->c) decompose(d->c, out, n);
}

static int put_utf8(Nfc *nf, uint32_t c) {
    if (nf->len + 4 > nf->cap) {
        size_t cap = nf->cap ? 2 * nf->cap : 4096;
        unsigned char *p = realloc(nf->out, cap);
        if (!p) return mhar_fail("out of memory normalizing text");
        nf->out = p;
        nf->cap = cap;
    }
    unsigned char *o = nf->out + nf->len;
    if (c >= RAW_BYTE) { o[0] = (unsigned char)(c - RAW_BYTE); nf->len += 1; }
    else if (c < 0x80) { o[0] = (unsigned char)c; nf->len += 1; }
    else if (c < 0x800) { o[0] = (unsigned char)(0xC0 | c >> 6); o[1] = (unsigned char)(0x80 | (c & 63)); nf->len += 2; }
    else if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | c >> 12); o[1] = (unsigned char)(0x80 | (c >> 6 & 63));
        o[2] = (unsigned char)(0x80 | (c & 63)); nf->len += 3;
    } else {
        o[0] = (unsigned char)(0xF0 | c >> 18); o[1] = (unsigned char)(0x80 | (c >> 12 & 63));
        o[2] = (unsigned char)(0x80 | (c >> 6 & 63)); o[3] = (unsigned char)(0x80 | (c & 63)); nf->len += 4;
    }
    return MHAR_OK;
}

int nfc_normalize(Nfc *nf, const unsigned char *s, size_t n) {
    nf->len = 0;
    if (4 * n + 4 > nf->cap_cp) {
        uint32_t *p = realloc(nf->cp, sizeof(uint32_t) * (4 * n + 4));
        if (!p) return mhar_fail("out of memory normalizing %zu bytes", n);
        nf->cp = p;
        nf->cap_cp = 4 * n + 4;
    }
    uint32_t *c = nf->cp;
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = utf8_decode(s + i, n - i, &cp);
        decompose(cp == UNICODE_INVALID ? RAW_BYTE + s[i] : cp, c, &m);
        i += (size_t)l;
    }
    // Canonical ordering: marks between starters sorted by class, stably.
    for (size_t i = 1; i < m; i++) {
        int ci = ccc(c[i]);
        if (!ci) continue;
        for (size_t j = i; j > 0 && ccc(c[j - 1]) > ci; j--) {
            uint32_t t = c[j];
            c[j] = c[j - 1];
            c[j - 1] = t;
        }
    }
    // Canonical composition: a mark joins the last starter unless a mark of
    // the same or a higher class, or a starter, stands between them.
    if (m) {
        size_t starter = 0, w = 1;
        int last = ccc(c[0]) ? 256 : 0;
        for (size_t i = 1; i < m; i++) {
            int ci = ccc(c[i]);
            uint32_t comp = last == 256 ? 0 : compose(c[starter], c[i]);
            if (comp && (last < ci || last == 0)) {
                c[starter] = comp;
            } else {
                if (ci == 0) starter = w;
                last = ci;
                c[w++] = c[i];
            }
        }
        m = w;
    }
    for (size_t i = 0; i < m; i++)
        if (put_utf8(nf, c[i])) return MHAR_ERR;
    return MHAR_OK;
}

void nfc_free(Nfc *nf) {
    free(nf->cp);
    free(nf->out);
    memset(nf, 0, sizeof *nf);
}
