#include "unicode.h"

int unicode_class(uint32_t cp) {
    int lo = 0, hi = unicode_n_ranges - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < unicode_ranges[mid].lo) hi = mid - 1;
        else if (cp > unicode_ranges[mid].hi) lo = mid + 1;
        else return (int)unicode_ranges[mid].cls;
    }
    return UCLASS_OTHER;
}

int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int len;
    uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else { *cp = UNICODE_INVALID; return 1; }
    if ((size_t)len > n) { *cp = UNICODE_INVALID; return 1; }
    for (int k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) { *cp = UNICODE_INVALID; return 1; }
        v = v << 6 | (s[k] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) { *cp = UNICODE_INVALID; return 1; }
    *cp = v;
    return len;
}
