// mhar sample: generate from a run directory with a KV cache: token ids
// (--prompt-tokens) or text (--prompt, with the run's tokenizer).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/text_sample.h"
#include "args.h"
#include "commands.h"
#include "model/generate.h"

static const char *usage =
    "usage: mhar sample --run DIR [--prompt TEXT | --prompt-tokens 1,2,3]\n"
    "                   [--steps N --temperature X --top-k K --seed S --ignore-eos]\n\n"
    "--prompt: encodes TEXT with the run's tokenizer (DIR/tokenizer.json) and prints\n"
    "the prompt, then the generated text as it is generated; generation stops at\n"
    "the end-of-text token unless --ignore-eos. --prompt-tokens (default 0): prints\n"
    "the prompt and the generated token ids, space-separated, on one line.\n"
    "Temperature 0 is greedy decoding; top-k 0 samples from the whole vocabulary.";

static int parse_prompt(const char *text, int *out, int cap, int vocab) {
    int n = 0;
    for (const char *p = text; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= vocab)
            return mhar_fail("--prompt-tokens: '%.20s' is not a token id in [0, %d)", p, vocab);
        if (n == cap) return mhar_fail("--prompt-tokens: more than %d tokens", cap);
        out[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return mhar_fail("--prompt-tokens: expected comma-separated ids");
    }
    return n ? n : mhar_fail("--prompt-tokens is empty");
}

static int sample_ids(Model *m, const char *prompt, const GenerateOptions *o) {
    int cap = (int)strlen(prompt) / 2 + 1, n = 0, total = 0;
    int *tokens = mhar_alloc(sizeof(int) * ((size_t)cap + (size_t)o->steps));
    int rc = tokens ? MHAR_OK : MHAR_ERR;
    if (!rc) rc = (n = parse_prompt(prompt, tokens, cap, m->cfg.vocab_size)) < 0;
    if (!rc) rc = generate(m, tokens, n, o, NULL, NULL, &total);
    if (!rc) {
        for (int i = 0; i < total; i++) printf(i ? " %d" : "%d", tokens[i]);
        printf("\n");
    }
    mhar_free(tokens);
    return rc;
}

int cmd_sample(int argc, char **argv) {
    const char *run = NULL, *prompt_ids = "0", *text = NULL;
    int ignore_eos = 0;
    GenerateOptions o = {.steps = 64, .temperature = 1.0f, .top_k = 0, .seed = 1, .stop_id = -1};
    Flag flags[] = {
        {"run", FLAG_STR, &run, "run directory", 0, 0, 0},
        {"prompt", FLAG_STR, &text, "prompt text (needs the run's tokenizer)", 0, 0, 0},
        {"prompt-tokens", FLAG_STR, &prompt_ids, "comma-separated prompt ids (default 0)", 0, 0, 0},
        {"steps", FLAG_INT, &o.steps, "tokens to generate (default 64)", 1, 1 << 20, 0},
        {"temperature", FLAG_FLOAT, &o.temperature, "softmax temperature (default 1; 0 = greedy)", 0, 100, 0},
        {"top-k", FLAG_INT, &o.top_k, "sample among the k most likely (default 0 = all)", 0, 1 << 24, 0},
        {"seed", FLAG_U64, &o.seed, "sampling seed (default 1)", 0, 0, 0},
        {"ignore-eos", FLAG_BOOL, &ignore_eos, "with --prompt: go on past the end-of-text token", 0, 0, 0},
    };
    const int nf = sizeof flags / sizeof flags[0];
    int r = args_parse(argc, argv, flags, nf, usage);
    if (r) return r > 0 ? 0 : 2;
    if (!run) { fprintf(stderr, "error: --run DIR is required (see --help)\n"); return 2; }
    if (text && args_flag(flags, nf, "prompt-tokens")->given) {
        fprintf(stderr, "error: give --prompt or --prompt-tokens, not both\n");
        return 2;
    }
    if (ignore_eos && !text) { fprintf(stderr, "error: --ignore-eos goes with --prompt\n"); return 2; }
    Model m;
    RunTokenizer tok = {0};
    int rc = model_load(&m, run), have_tok = 0;
    if (!rc && text) rc = run_tokenizer_load(run, &tok), have_tok = !rc;
    if (!rc && text) {
        TextSampleInfo info;
        rc = sample_text(&m, &tok, text, o, ignore_eos, stdout, &info);
        if (!rc)
            fprintf(stderr, "%d prompt tokens, %d generated%s\n", info.prompt_tokens, info.generated,
                    info.stopped ? ", stopped at the end-of-text token" : "");
    } else if (!rc) {
        rc = sample_ids(&m, prompt_ids, &o);
    }
    if (rc) fprintf(stderr, "error: %s\n", mhar_error());
    if (have_tok) run_tokenizer_free(&tok);
    if (m.params) model_free(&m);
    return rc ? 1 : 0;
}
