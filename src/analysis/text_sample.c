// Text sampling: encode, generate, stream the decoded bytes.
#include "text_sample.h"

#include <string.h>

#include "../tokenizer/utf8_stream.h"

typedef struct {
    const Bpe *bpe;
    FILE *out;
    Utf8Stream stream;
    unsigned char *buf;  // room for the longest token + 3
    int failed;
} Printer;

static int print_token(void *arg, int token) {
    Printer *p = arg;
    size_t n = utf8_stream_push(&p->stream, bpe_token(p->bpe, token), bpe_token_len(p->bpe, token), p->buf);
    if (fwrite(p->buf, 1, n, p->out) != n || fflush(p->out)) p->failed = 1;
    return p->failed;
}

int sample_text(Model *m, const RunTokenizer *t, const char *prompt, GenerateOptions o, int ignore_eot, FILE *out,
                TextSampleInfo *info) {
    memset(info, 0, sizeof *info);
    const Bpe *b = &t->bpe;
    if (b->vocab_size > m->cfg.vocab_size)
        return mhar_fail("the tokenizer's vocabulary %d is larger than the model's %d", b->vocab_size,
                         m->cfg.vocab_size);
    IntVec ids = {0};
    size_t len = strlen(prompt);
    int rc = bpe_encode(b, (const unsigned char *)prompt, len, 1, &ids);
    int prefix = run_tokenizer_prefix(t);
    if (!rc && ids.n == 0) {
        if (prefix < 0) rc = mhar_fail("an empty prompt needs a bos or end-of-text token; the tokenizer has neither");
        else rc = intvec_push(&ids, &prefix, 1);
    }
    if (!rc && ids.n > (size_t)m->cfg.max_position_embeddings)
        rc = mhar_fail("the prompt is %zu tokens, more than max_position_embeddings %d", ids.n,
                       m->cfg.max_position_embeddings);
    o.stop_id = ignore_eot ? -1 : run_tokenizer_eot(t);
    int n = (int)ids.n, total = 0;
    int *tokens = rc ? NULL : mhar_alloc(sizeof(int) * ((size_t)n + (size_t)o.steps));
    size_t longest = 0;
    for (int i = 0; i < b->vocab_size; i++) if (bpe_token_len(b, i) > longest) longest = bpe_token_len(b, i);
    Printer p = {b, out, {{0}, 0}, rc ? NULL : mhar_alloc(longest + 4), 0};
    if (!rc && (!tokens || !p.buf)) rc = MHAR_ERR;
    if (!rc) {
        memcpy(tokens, ids.v, sizeof(int) * (size_t)n);
        if (fwrite(prompt, 1, len, out) != len || fflush(out)) p.failed = 1;
        rc = generate(m, tokens, n, &o, print_token, &p, &total);
        size_t rest = utf8_stream_flush(&p.stream, p.buf);
        if (fwrite(p.buf, 1, rest, out) != rest || fputc('\n', out) == EOF || fflush(out)) p.failed = 1;
        if (!rc && p.failed) rc = mhar_fail("cannot write the generated text");
        info->prompt_tokens = n;
        info->generated = total - n;
        info->stopped = total > n && tokens[total - 1] == o.stop_id;
    }
    mhar_free(tokens);
    mhar_free(p.buf);
    intvec_free(&ids);
    return rc;
}
