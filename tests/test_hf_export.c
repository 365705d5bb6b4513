// Export and import in C alone (the transformers side is test_hf_import.py):
// a small model exported in each format, sharded and not, imports back to
// its weights rounded to that format bit for bit (f32: the same file byte
// for byte); the export names its dtype in config.json; an f16 overflow and
// an occupied output directory are refused with nothing left behind; shard
// sizes parse as transformers reads them.
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "model/model.h"
#include "train/hf_export.h"
#include "train/hf_import.h"
#include "util/common.h"
#include "util/file.h"
#include "util/json.h"

static char tmpdir[256];
static int has(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static int count_prefix(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    if (d) closedir(d);
    return n;
}

static float rounded(Dtype dt, float x) {
    return dt == DTYPE_BF16 ? bf16_to_f32(f32_to_bf16(x)) : dt == DTYPE_F16 ? f16_to_f32(f32_to_f16(x)) : x;
}

static void test_roundtrip(const Model *m, const char *run, Dtype dt, const char *shard) {
    char exp[600], back[600], name[96];
    snprintf(exp, sizeof exp, "%s/exp_%s_%s", tmpdir, dtype_flag_name(dt), shard);
    snprintf(back, sizeof back, "%s/back_%s_%s", tmpdir, dtype_flag_name(dt), shard);
    HfExportOptions o = {.dtype = dt};
    HfExportInfo ei;
    HfImportOptions io = {0};
    HfImportInfo ii;
    int rc = hf_parse_size(shard, &o.shard_bytes);
    if (!rc) rc = hf_export(run, exp, &o, &ei);
    if (!rc) rc = hf_import(exp, back, &io, &ii);
    Model r = {0};
    if (!rc) rc = model_load(&r, back);
    int same = !rc && r.table.total == m->table.total;
    for (size_t i = 0; same && i < m->table.total; i++) {
        float want = rounded(dt, m->params[i]);
        same = memcmp(&want, &r.params[i], 4) == 0;
    }
    snprintf(name, sizeof name, "hf_export.%s_%s_roundtrip", dtype_flag_name(dt), shard);
    CHECK(same && ei.n_shards == ii.n_files, name, "rc %d %s, %d shards, %d files read", rc, rc ? mhar_error() : "",
          ei.n_shards, ii.n_files);
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", exp);
    cJSON *cfg = json_load_or_null(path);
    const char *got = json_string_or(cfg, "torch_dtype", "(none)");
    snprintf(name, sizeof name, "hf_export.%s_%s_config_dtype", dtype_flag_name(dt), shard);
    CHECK(!strcmp(got, dtype_torch_name(dt)) && !strcmp(json_string_or(cfg, "attnres_mode", ""), "baseline"), name,
          "torch_dtype %s", got);
    cJSON_Delete(cfg);
    model_free(&r);
}

static void test_sizes(void) {
    struct { const char *text; uint64_t bytes; } ok[] = {
        {"123", 123}, {"2GB", 2000000000ull}, {"500MB", 500000000ull}, {"64KiB", 65536}, {"1GiB", 1ull << 30},
        {"7B", 7}, {"3TB", 3000000000000ull},
    };
    int good = 1;
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        uint64_t b = 0;
        good &= hf_parse_size(ok[i].text, &b) == MHAR_OK && b == ok[i].bytes;
    }
    uint64_t b;
    const char *bad[] = {"", "GB", "-1", "2 GB", "2gb", "1.5GB", "99999999999999999999", "20000000TiB"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) good &= hf_parse_size(bad[i], &b) == MHAR_ERR;
    CHECK(good, "hf_export.shard_size_parse", "a size parsed wrongly");
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_hf_export_XXXXXX");
    if (!mkdtemp(tmpdir)) return 2;
    Config c;
    config_preset("nano", &c);
    c.vocab_size = 96;
    c.num_hidden_layers = 2;
    c.tie_word_embeddings = 0;
    Model m;
    if (model_create(&m, &c)) return 2;
    model_init_weights(&m, 5);
    // Values that exercise rounding: arbitrary mantissas, subnormal f16 range, f16's largest.
    for (size_t i = 0; i < m.table.total; i++) m.params[i] *= 37.0f;
    m.params[m.off_norm] = 65504.0f;
    m.params[m.off_norm + 1] = 3e-6f;
    char run[600];
    snprintf(run, sizeof run, "%s/run", tmpdir);
    mkdir(run, 0755);
    if (model_save(&m, run)) return 2;
    const Dtype dts[] = {DTYPE_BF16, DTYPE_F16, DTYPE_F32};
    for (int i = 0; i < 3; i++) {
        test_roundtrip(&m, run, dts[i], "2GB");
        test_roundtrip(&m, run, dts[i], "40KiB");
    }
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/back_f32_2GB/model.safetensors", tmpdir);
    snprintf(b, sizeof b, "%s/model.safetensors", run);
    char *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    int same = !read_file_max(a, SIZE_MAX, &x, &nx) && !read_file_max(b, SIZE_MAX, &y, &ny) && nx == ny &&
               memcmp(x, y, nx) == 0;
    CHECK(same, "hf_export.f32_byte_identical", "%zu vs %zu bytes", nx, ny);
    free(x);
    free(y);
    snprintf(a, sizeof a, "%s/exp_bf16_40KiB", tmpdir);
    CHECK(count_prefix(a, "model-") >= 3 && count_prefix(a, "model.safetensors.index.json") == 1,
          "hf_export.sharded_layout", "%d shards", count_prefix(a, "model-"));

    // A value past f16's range: refused, naming the tensor; nothing written.
    m.params[m.off_norm + 2] = 65520.0f;
    model_save(&m, run);
    HfExportOptions o = {.dtype = DTYPE_F16, .shard_bytes = HF_EXPORT_SHARD_BYTES};
    HfExportInfo ei;
    snprintf(a, sizeof a, "%s/exp_overflow", tmpdir);
    int rc = hf_export(run, a, &o, &ei);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "'model.norm.weight'") && has(mhar_error(), "65520") &&
              count_prefix(tmpdir, "exp_overflow") == 0,
          "hf_export.f16_overflow_refused", "rc %d: %s", rc, mhar_error());
    snprintf(a, sizeof a, "%s/exp_bf16_2GB", tmpdir);
    o.dtype = DTYPE_BF16;
    rc = hf_export(run, a, &o, &ei);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "not empty"), "hf_export.out_not_empty", "rc %d: %s", rc, mhar_error());
    test_sizes();
    model_free(&m);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) return 2;
    CHECK_EXIT();
}
