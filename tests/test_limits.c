// Limits: absurd sizes from files or from flags are refused, with the
// reason, before anything is allocated for them; and the regression inputs
// of the crashes the fuzzers found (fuzz/corpus/*/crash-*, oom-*), each
// checked here for its message. Sizes are chosen far above any machine this
// runs on (hundreds of GiB to exabytes), so a missing check would show as an
// allocation failure or an out-of-memory kill, not as a pass.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "data/tokens.h"
#include "io/safetensors.h"
#include "kernels/cpu/vmath.h"
#include "model/config.h"
#include "model/model.h"
#include "model/params.h"
#include "tokenizer/bpe.h"
#include "train/checkpoint.h"
#include "train/optim.h"
#include "util/common.h"
#include "util/memlimit.h"

#include "testfiles.h"

static void put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_u64(unsigned char *p, uint64_t v) {
    put_u32(p, (uint32_t)v);
    put_u32(p + 4, (uint32_t)(v >> 32));
}

// A safetensors file: the 8-byte length, `header` padded with spaces, then
// `data_bytes` zero bytes of data.
static void write_st(const char *path, const char *header, size_t data_bytes) {
    size_t hl = (strlen(header) + 7) / 8 * 8;
    size_t n = 8 + hl + data_bytes;
    unsigned char *b = calloc(1, n);
    put_u64(b, hl);
    memset(b + 8, ' ', hl);
    memcpy(b + 8, header, strlen(header));
    write_bytes(path, b, n);
    free(b);
}

static void test_safetensors(void) {
    ParamTable t = {0};
    int shape[2] = {2, 3};
    ptable_add(&t, "w", 2, shape, INIT_ZEROS, PARAM_MATRIX);
    float buf[6] = {0};
    const char *p = tpath("claims.safetensors");
    // A header length of 1 TiB in a 64-byte file.
    unsigned char raw[64] = {0};
    put_u64(raw, (uint64_t)1 << 40);
    write_bytes(p, raw, sizeof raw);
    int rc = safetensors_load(p, &t, buf, 0);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "header length 1099511627776") && has(mhar_error(), p),
          "limits.st_header_length_terabyte", "%s", mhar_error());
    // A header length just under the 100 MB limit, file far shorter.
    put_u64(raw, 99999999);
    write_bytes(p, raw, sizeof raw);
    rc = safetensors_load(p, &t, buf, 0);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "truncated"), "limits.st_header_longer_than_file", "%s",
          mhar_error());
    // A tensor whose data_offsets claim 4 PiB.
    write_st(p, "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,4503599627370496]}}", 24);
    rc = safetensors_load(p, &t, buf, 0);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "'w'") && has(mhar_error(), "data_offsets"),
          "limits.st_offsets_petabytes", "%s", mhar_error());
    // Negative, fractional and overflowing shapes.
    const char *shapes[][2] = {{"[-2,-3]", "limits.st_shape_negative"},
                               {"[2.5,3]", "limits.st_shape_fraction"},
                               {"[4294967298,3]", "limits.st_shape_over_int"},
                               {"[1e300,1e300]", "limits.st_shape_overflowing"},
                               {"[9007199254740993,1]", "limits.st_shape_over_2^53"}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char h[256];
        snprintf(h, sizeof h, "{\"w\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[0,24]}}", shapes[i][0]);
        write_st(p, h, 24);
        rc = safetensors_load(p, &t, buf, 0);
        CHECK(rc == MHAR_ERR && has(mhar_error(), "shape") && has(mhar_error(), "expected [2, 3]"),
              shapes[i][1], "%s", mhar_error());
    }
    // The parameter table itself refuses a shape past 2^36 floats.
    int huge[2] = {1 << 20, 1 << 20};
    CHECK(ptable_add(&t, "h", 2, huge, INIT_ZEROS, PARAM_MATRIX) == MHAR_ERR && has(mhar_error(), "2^36"),
          "limits.ptable_shape_2^40", "%s", mhar_error());
    ptable_free(&t);
}

// A size whose rounding up to the (huge) page would wrap is refused, not
// turned into a tiny buffer.
static void test_alloc(void) {
    void *p = mhar_alloc(SIZE_MAX - 5);
    CHECK(p == NULL && has(mhar_error(), "out of memory"), "limits.alloc_size_wraps", "%s",
          p ? "got a buffer" : mhar_error());
}

static void test_tokens(void) {
    const char *p = tpath("claims.bin");
    unsigned char h[32 + 8] = {'M', 'H', 'A', 'R', 'T', 'O', 'K', 0};
    put_u32(h + 8, 1);
    put_u32(h + 12, 4);
    put_u64(h + 16, (uint64_t)1 << 60); // 2^60 tokens, 8 bytes follow
    put_u32(h + 24, 100);
    write_bytes(p, h, sizeof h);
    TokenFile tf;
    int rc = tokens_load(p, &tf);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "1152921504606846976 tokens") && has(mhar_error(), "truncated") &&
              tf.tokens == NULL,
          "limits.tokens_count_2^60", "%s", mhar_error());
    put_u64(h + 16, UINT64_MAX); // count * width would wrap to a small number
    write_bytes(p, h, sizeof h);
    rc = tokens_load(p, &tf);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "truncated"), "limits.tokens_count_wraps", "%s", mhar_error());
}

static const char *config_text(char *buf, size_t cap, const char *extra) {
    snprintf(buf, cap,
             "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
             "\"intermediate_size\": 96, \"vocab_size\": 300%s}", extra);
    return buf;
}

static void test_config(void) {
    char text[512];
    Config c;
    struct { const char *extra, *want, *name; } bad[] = {
        {", \"hidden_size\": 1e12", "hidden_size", "limits.config_hidden_1e12"},
        {", \"vocab_size\": 4294967296", "vocab_size", "limits.config_vocab_2^32"},
        {", \"num_hidden_layers\": -3", "num_hidden_layers", "limits.config_layers_negative"},
        {", \"intermediate_size\": 1e400", "intermediate_size", "limits.config_ffn_inf"},
        {", \"max_position_embeddings\": 2147483648", "max_position_embeddings", "limits.config_positions_2^31"},
        {", \"head_dim\": 1.5", "head_dim", "limits.config_head_dim_fraction"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        // cJSON takes the first of two equal keys: the bad value goes first.
        char t2[1100];
        snprintf(t2, sizeof t2, "{%s, %s", bad[i].extra + 2, config_text(text, sizeof text, "") + 1);
        int rc = config_parse(t2, strlen(t2), "limits.json", &c);
        CHECK(rc == MHAR_ERR && has(mhar_error(), bad[i].want) && has(mhar_error(), "limits.json"), bad[i].name,
              "rc %d: %s", rc, mhar_error());
    }
    // Every key within its range and the table under its 2^36 floats, but the
    // model would need 509 GiB: refused by model_create before the parameters
    // are allocated.
    const char *big = "{\"hidden_size\": 4064, \"num_hidden_layers\": 1, \"num_attention_heads\": 16, "
                      "\"intermediate_size\": 64, \"vocab_size\": 16777216}";
    int rc = config_parse(big, strlen(big), "big.json", &c);
    CHECK(rc == MHAR_OK, "limits.config_big_parses", "%s", mhar_error());
    Model m;
    rc = model_create(&m, &c);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "GiB") && has(mhar_error(), "more than") && m.params == NULL,
          "limits.model_too_big_for_memory", "%s", mhar_error());
    model_free(&m);
}

static void test_batch(void) {
    char text[512];
    Config c;
    const char *t = config_text(text, sizeof text, ", \"max_position_embeddings\": 128");
    if (config_parse(t, strlen(t), "small.json", &c)) { CHECK(0, "limits.batch_setup", "%s", mhar_error()); return; }
    int rc = model_check_batch(&c, 4, 129);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "129") && has(mhar_error(), "max_position_embeddings 128"),
          "limits.seq_over_max_positions", "%s", mhar_error());
    rc = model_check_batch(&c, 1 << 20, 128);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "134217728 tokens"), "limits.batch_times_seq", "%s", mhar_error());
    rc = model_check_batch(&c, INT32_MAX, 128);  // B·T overflows int
    CHECK(rc == MHAR_ERR && has(mhar_error(), "tokens per micro-batch"), "limits.batch_times_seq_overflow",
          "%s", mhar_error());
    CHECK(model_check_batch(&c, 0, 16) == MHAR_ERR && model_check_batch(&c, 4, -1) == MHAR_ERR,
          "limits.batch_seq_positive", "accepted");
    CHECK(model_check_batch(&c, 8, 128) == MHAR_OK, "limits.batch_ok", "%s", mhar_error());
    // A legal config and batch whose attention alone needs 2^56 floats: the
    // arena's size is summed in double, refused, and never allocated.
    const char *wide = "{\"hidden_size\": 1024, \"num_hidden_layers\": 4, \"num_attention_heads\": 1024, "
                       "\"head_dim\": 2, \"num_key_value_heads\": 1, \"intermediate_size\": 8, "
                       "\"vocab_size\": 8, \"max_position_embeddings\": 1048576}";
    Model m;
    rc = config_parse(wide, strlen(wide), "wide.json", &c);
    if (!rc) rc = model_create(&m, &c);
    if (rc) { CHECK(0, "limits.arena_setup", "%s", mhar_error()); return; }
    rc = model_alloc_acts(&m, 16, 1 << 20);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "activations") && has(mhar_error(), "GiB") && m.arena == NULL,
          "limits.arena_too_big_for_memory", "%s", mhar_error());
    KVCache kv;
    m.cfg.num_key_value_heads = 1024;  // 1024 layers x 2^20 positions x 2048 floats x 2: 16 TiB
    m.cfg.num_hidden_layers = 1024;
    rc = kvcache_init(&kv, &m, 1 << 20);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "KV cache"), "limits.kv_cache_too_big", "%s", mhar_error());
    model_free(&m);
    CHECK(mem_check(1e30, "a test") == MHAR_ERR && mem_check(4096, "a page") == MHAR_OK && mem_limit_bytes() > 1e6,
          "limits.mem_check", "%s", mhar_error());
}

// The fuzzers' crash inputs, with the message each must now give.
static void test_fuzz_regressions(void) {
    Bpe b;
    int rc = bpe_load("fuzz/corpus/bpe/oom-huge-vocab-claim", &b);  // 721M ids: over BPE_MAX_VOCAB
    CHECK(rc == MHAR_ERR && has(mhar_error(), "vocab_size 721420588, expected 256.."),
          "regress.bpe_vocab_claim_not_allocated", "%s", mhar_error());
    {   // the same header claiming the largest vocabulary allowed: refused by size, before allocating
        FILE *in = fopen("fuzz/corpus/bpe/oom-huge-vocab-claim", "rb");
        unsigned char buf[4096];
        size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
        if (in) fclose(in);
        const uint32_t v = BPE_MAX_VOCAB;
        memcpy(buf + 12, &v, 4);  // little-endian hosts, as the format
        const char *big = tpath("max-vocab.bpe");
        FILE *out = fopen(big, "wb");
        if (!out || n < 40 || fwrite(buf, 1, n, out) != n) { perror(big); exit(2); }
        fclose(out);
        rc = bpe_load(big, &b);
        CHECK(rc == MHAR_ERR && has(mhar_error(), "truncated") && has(mhar_error(), "need at least"),
              "regress.bpe_max_vocab_claim_not_allocated", "%s", mhar_error());
    }
    // state.json: eval_batches 2370955161 overflowed the int it is stored in.
    const char *run = tpath("run");
    char ck[600], link[700];
    snprintf(ck, sizeof ck, "%s/checkpoint", run);
    snprintf(link, sizeof link, "%s/state.json", ck);
    char target[4096];
    if (!getcwd(target, sizeof target - 100)) exit(2);
    strcat(target, "/fuzz/corpus/state/crash-eval-batches-over-int");
    if (mkdir(run, 0755) || mkdir(ck, 0755) || symlink(target, link)) { perror(run); exit(2); }
    TrainState st;
    rc = checkpoint_load_state(run, &st);
    CHECK(rc == MHAR_ERR && has(mhar_error(), "eval_batches") && has(mhar_error(), "outside"),
          "regress.state_int_field_over_int", "%s", mhar_error());
}

// Found by tests/test_faults.sh under UBSan: a NaN logit reached vexp's
// integer exponent (undefined); it must come out NaN, so the step is caught.
static void test_vexp_nonfinite(void) {
    volatile float nan_in = NAN, inf_in = INFINITY;
    float a = vexp(nan_in), b = vexp(inf_in), c = vexp(-inf_in);
    CHECK(isnan(a) && isfinite(b) && b > 1e38f && c >= 0 && c < 1e-37f, "regress.vexp_nan_stays_nan",
          "vexp(nan) %g, vexp(inf) %g, vexp(-inf) %g", (double)a, (double)b, (double)c);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mhar_test_limits.XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 2; }
    test_safetensors();
    test_alloc();
    test_tokens();
    test_config();
    test_batch();
    test_fuzz_regressions();
    test_vexp_nonfinite();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", tmpdir);
    CHECK_EXIT();
}
