// config_parse (the body of config_load) on arbitrary bytes. Properties: an
// error names the origin; an accepted config passes config_validate, and
// config_save then config_load gives it back field for field.
#include "../src/model/config.h"
#include "../src/util/common.h"
#include "fuzz.h"

static int same(const Config *a, const Config *b) {
    return a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
           a->num_hidden_layers == b->num_hidden_layers && a->num_attention_heads == b->num_attention_heads &&
           a->num_key_value_heads == b->num_key_value_heads && a->head_dim == b->head_dim &&
           a->intermediate_size == b->intermediate_size &&
           a->max_position_embeddings == b->max_position_embeddings && a->rms_norm_eps == b->rms_norm_eps &&
           a->rope_theta == b->rope_theta && a->tie_word_embeddings == b->tie_word_embeddings &&
           strcmp(a->attnres_mode, b->attnres_mode) == 0 && a->attnres_num_heads == b->attnres_num_heads &&
           a->attnres_num_blocks == b->attnres_num_blocks;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // An exact-size copy without a terminating NUL: the parser must stay
    // inside [data, data + size).
    char *text = malloc(size ? size : 1);
    if (!text) abort();
    memcpy(text, data, size);
    Config c;
    int rc = config_parse(text, size, "fuzz.json", &c);
    free(text);
    FUZZ_ASSERT(rc == MHAR_OK || rc == MHAR_ERR, "rc %d", rc);
    if (rc == MHAR_ERR) {
        FUZZ_ASSERT(strstr(mhar_error(), "fuzz.json") != NULL, "error does not name the file: %s", mhar_error());
        return 0;
    }
    FUZZ_ASSERT(config_validate(&c, "accepted") == MHAR_OK, "accepted config fails validation: %s", mhar_error());
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", fuzz_dir());
    Config back;
    FUZZ_ASSERT(config_save(path, &c) == MHAR_OK, "cannot save an accepted config: %s", mhar_error());
    FUZZ_ASSERT(config_load(path, &back) == MHAR_OK, "saved config does not load: %s", mhar_error());
    FUZZ_ASSERT(same(&c, &back), "config_save/config_load round trip changed a field");
    return 0;
}
