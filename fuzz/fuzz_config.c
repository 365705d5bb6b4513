// config_parse (the body of config_load) on arbitrary bytes. Properties: an
// error names the origin; an accepted config passes config_validate, and
// config_save then config_load gives it back field for field.
#include "../src/model/config.h"
#include "../src/util/common.h"
#include "fuzz.h"

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
    FUZZ_ASSERT(config_equal(&c, &back), "config_save/config_load round trip changed a field");
    return 0;
}
