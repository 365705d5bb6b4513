// tokens_load on arbitrary bytes. Properties: an error names the file and
// leaves the TokenFile empty; an accepted file holds exactly count tokens of
// its width after the 32-byte header, every one below vocab_size, decoded
// little-endian.
#include "../src/data/tokens.h"
#include "../src/util/common.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    TokenFile tf;
    int rc = tokens_load(path, &tf);
    FUZZ_ASSERT(rc == MHAR_OK || rc == MHAR_ERR, "rc %d", rc);
    if (rc == MHAR_ERR) {
        FUZZ_ASSERT(strstr(mhar_error(), path) != NULL, "error does not name the file: %s", mhar_error());
        FUZZ_ASSERT(tf.tokens == NULL && tf.count == 0, "a failed load left tokens behind");
        return 0;
    }
    FUZZ_ASSERT(tf.width == 2 || tf.width == 4, "width %d", tf.width);
    FUZZ_ASSERT(size == 32 + tf.count * (size_t)tf.width, "size %zu, count %zu, width %d", size, tf.count, tf.width);
    FUZZ_ASSERT(tf.vocab_size >= 1 && tf.count >= 2, "vocab %d count %zu", tf.vocab_size, tf.count);
    for (size_t i = 0; i < tf.count; i++) {
        const uint8_t *p = data + 32 + i * (size_t)tf.width;
        uint32_t v = tf.width == 2 ? (uint32_t)p[0] | (uint32_t)p[1] << 8
                                   : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        FUZZ_ASSERT(tf.tokens[i] >= 0 && tf.tokens[i] < tf.vocab_size && (uint32_t)tf.tokens[i] == v,
                    "token %zu is %d, file says %u, vocab %d", i, tf.tokens[i], v, tf.vocab_size);
    }
    tokens_free(&tf);
    return 0;
}
