// mhar bench --torch: the PyTorch peers of the benched schemes, timed by
// tools/bench_torch.py on the same shape (the helper says what each peer is
// and why one failed; tests/test_bench_torch.py checks they compute mhar's
// logits). Here: the command line, and reading its last line.
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../model/config.h"
#include "../util/json.h"
#include "../util/subprocess.h"

// The peer that times scheme `name`: HF Qwen3 for baseline, modeling_mhar's
// class of the same name for every other scheme.
static const char *peer_name(const char *scheme) { return strcmp(scheme, "baseline") ? scheme : "qwen3"; }

int bench_torch_peer(const BenchTorch *t, const BenchScheme *s) {
    const char *want = s ? peer_name(s->name) : "qwen3_compile";
    for (int i = 0; i < t->n; i++)
        if (strcmp(t->peer[i].name, want) == 0) return i;
    return -1;
}

static int read_peers(const char *text, size_t len, BenchTorch *out) {
    const char *last = text + len;  // the last non-empty line
    while (last > text && (last[-1] == '\n' || last[-1] == ' ')) last--;
    const char *line = last;
    while (line > text && line[-1] != '\n') line--;
    cJSON *j = NULL;
    if (json_parse(line, (size_t)(last - line), "bench_torch.py's last line", &j)) return MHAR_ERR;
    const cJSON *peers = cJSON_GetObjectItemCaseSensitive(j, "peers");
    snprintf(out->version, sizeof out->version, "%s", json_string_or(j, "torch", "?"));
    out->threads = (int)json_number_or(j, "threads", 0);
    const cJSON *p;
    cJSON_ArrayForEach(p, peers) {
        if (out->n == (int)(sizeof out->peer / sizeof out->peer[0])) break;
        BenchPeer *b = &out->peer[out->n++];
        snprintf(b->name, sizeof b->name, "%s", json_string_or(p, "name", "?"));
        snprintf(b->what, sizeof b->what, "%s", json_string_or(p, "what", ""));
        b->tok_s = json_number_or(p, "tok_per_s", 0);
        snprintf(b->error, sizeof b->error, "%s", json_string_or(p, "error", b->tok_s > 0 ? "" : "no tok_per_s"));
    }
    cJSON_Delete(j);
    return cJSON_IsArray(peers) ? MHAR_OK : mhar_fail("bench_torch.py's last line has no \"peers\" list");
}

int bench_torch(const char *preset, int vocab, int B, int T, int steps, const BenchScheme *list, int n,
                BenchTorch *out) {
    memset(out, 0, sizeof *out);
    Config c;
    if (config_preset(preset, &c)) return MHAR_ERR;
    // Peers: each scheme's, and torch.compile's when baseline is benched. H
    // and N: the first scheme that takes them (the helper passes 1 to attnres).
    char peers[512] = "";
    int heads = 1, blocks = 0;
    for (int i = 0; i < n; i++) {
        snprintf(peers + strlen(peers), sizeof peers - strlen(peers), "%s%s", i ? "," : "", peer_name(list[i].name));
        if (heads == 1 && list[i].heads > 1) heads = list[i].heads;
        if (!blocks) blocks = list[i].blocks;
    }
    if (bench_find(list, n, "baseline") >= 0) strncat(peers, ",qwen3_compile", sizeof peers - strlen(peers) - 1);
    const char *script = getenv("MHAR_BENCH_TORCH") ? getenv("MHAR_BENCH_TORCH") : "tools/bench_torch.py";
    const char *python = access(".venv/bin/python3", X_OK) == 0 ? ".venv/bin/python3" : "python3";
    if (access(script, R_OK) != 0) {
        snprintf(out->error, sizeof out->error, "%s not found (run mhar bench --torch from the repository root)",
                 script);
        return MHAR_OK;
    }
    char num[9][16];
    const int v[9] = {c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
                      c.head_dim, c.intermediate_size, vocab, heads, blocks};
    for (int i = 0; i < 9; i++) snprintf(num[i], sizeof num[i], "%d", v[i]);
    char sb[16], st[16], ss[16];
    snprintf(sb, sizeof sb, "%d", B); snprintf(st, sizeof st, "%d", T); snprintf(ss, sizeof ss, "%d", steps);
    char *argv[] = {(char *)python, (char *)script, "--peers", peers, "--hidden-size", num[0],
                    "--num-hidden-layers", num[1], "--num-attention-heads", num[2], "--num-key-value-heads", num[3],
                    "--head-dim", num[4], "--intermediate-size", num[5], "--vocab-size", num[6],
                    "--route-heads", num[7], "--route-blocks", num[8], "--batch", sb, "--seq", st, "--steps", ss,
                    NULL};
    char *text = NULL;
    size_t len = 0;
    if (proc_output(argv, &text, &len) || read_peers(text, len, out))
        snprintf(out->error, sizeof out->error, "%s", mhar_error());
    free(text);
    return MHAR_OK;
}
