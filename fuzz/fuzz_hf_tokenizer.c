// bpe_import_hf (an HF tokenizers tokenizer.json) on arbitrary bytes.
// Properties: an error names the file; an imported tokenizer decodes its own
// encoding of a fixed text back exactly.
#include "../src/tokenizer/bpe.h"
#include "../src/tokenizer/export.h"
#include "../src/util/common.h"
#include "fuzz.h"

static const char TEXT[] = "Hello, world! x = 42\n\tdef f(a):  return a<|endoftext|>\xc3\xa9\xe2\x82\xac \xff\xfe tail";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    Bpe b;
    int rc = bpe_import_hf(path, &b);
    FUZZ_ASSERT(rc == MHAR_OK || rc == MHAR_ERR, "rc %d", rc);
    if (rc == MHAR_ERR) {
        FUZZ_ASSERT(strstr(mhar_error(), path) != NULL, "error does not name the file: %s", mhar_error());
        return 0;
    }
    IntVec ids = {0};
    rc = bpe_encode(&b, (const unsigned char *)TEXT, sizeof TEXT - 1, 1, &ids);
    FUZZ_ASSERT(rc == MHAR_OK, "encode failed: %s", mhar_error());
    unsigned char *out = NULL;
    size_t len = 0, cap = 0;
    rc = bpe_decode(&b, ids.v, ids.n, &out, &len, &cap);
    FUZZ_ASSERT(rc == MHAR_OK, "decode failed: %s", mhar_error());
    FUZZ_ASSERT(len == sizeof TEXT - 1 && memcmp(out, TEXT, len) == 0, "decode(encode(text)) != text");
    free(out);
    intvec_free(&ids);
    bpe_free(&b);
    return 0;
}
