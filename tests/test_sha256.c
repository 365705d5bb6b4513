// SHA-256 (src/util/sha256.c) against the FIPS 180-2 / NIST example vectors,
// the padding boundaries (55, 56, 63, 64 ... bytes; digests from Python's
// hashlib), and streaming in uneven pieces against the one-shot digest.
#include <string.h>

#include "check.h"
#include "util/sha256.h"

static int digest_is(const void *data, size_t n, const char *want, char got[65]) {
    uint8_t d[32];
    sha256(data, n, d);
    sha256_hex(d, got);
    return !strcmp(got, want);
}

int main(void) {
    char got[65];
    // FIPS 180-2 Appendix B and NIST's SHA-256 examples.
    static const struct { const char *name, *msg, *hex; } fips[] = {
        {"sha256_fips_abc", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"sha256_empty", "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"sha256_fips_448_bits", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"sha256_fips_896_bits",
         "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    for (size_t i = 0; i < sizeof fips / sizeof fips[0]; i++)
        CHECK(digest_is(fips[i].msg, strlen(fips[i].msg), fips[i].hex, got), fips[i].name,
              "got %s, want %s", got, fips[i].hex);

    // One million 'a' (FIPS 180-2 B.3), one-shot and streamed in uneven pieces.
    size_t n = 1000000;
    char *a = malloc(n);
    if (!a) { printf("FAIL sha256_alloc: out of memory\n"); return 1; }
    memset(a, 'a', n);
    const char *million = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    CHECK(digest_is(a, n, million, got), "sha256_fips_million_a", "got %s", got);
    Sha256 s;
    sha256_init(&s);
    static const size_t pieces[] = {1, 63, 64, 65, 7, 128, 1000, 55, 56, 4096};
    size_t off = 0;
    for (int k = 0; off < n; k++) {
        size_t take = pieces[k % 10];
        if (take > n - off) take = n - off;
        sha256_update(&s, a + off, take);
        off += take;
    }
    uint8_t d[32];
    sha256_final(&s, d);
    sha256_hex(d, got);
    CHECK(!strcmp(got, million), "sha256_streamed_pieces", "got %s", got);

    // Lengths around the 56-byte padding limit and the 64-byte block.
    static const struct { size_t n; const char *hex; } edges[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
        {128, "6836cf13bac400e9105071cd6af47084dfacad4e5e302c94bfed24e013afb73e"},
    };
    int edges_ok = 1;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        if (!digest_is(a, edges[i].n, edges[i].hex, got)) {
            edges_ok = 0;
            printf("  %zu x 'a': got %s, want %s\n", edges[i].n, got, edges[i].hex);
        }
    CHECK(edges_ok, "sha256_padding_boundaries", "see the lines above");

    // Every byte value (the message schedule must not sign-extend).
    unsigned char all[1024];
    for (int i = 0; i < 1024; i++) all[i] = (unsigned char)i;
    const char *bytes = "785b0751fc2c53dc14a4ce3d800e69ef9ce1009eb327ccf458afe09c242c26c9";
    CHECK(digest_is(all, sizeof all, bytes, got), "sha256_all_byte_values", "got %s", got);
    free(a);
    CHECK_EXIT();
}
