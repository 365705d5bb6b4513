// mhar score: encoding (lm-eval's rules, score.h), batched forwards, the
// metrics.
#include "score.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tokenizer/unicode.h"

// ---- text measures -------------------------------------------------------------------

// Python's str.isspace: Unicode White_Space, and the separators U+001C..U+001F.
static int is_space(uint32_t cp) {
    return (cp >= 0x1C && cp <= 0x1F) || (cp != UNICODE_INVALID && unicode_class(cp) == UCLASS_SPACE);
}

// Characters (code points; an invalid byte counts as one), the end of the
// text without its trailing whitespace, and the number of whitespace runs.
typedef struct { long chars, space_runs; size_t rstrip_end; } TextMeasure;

static TextMeasure measure(const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text);
    TextMeasure t = {0, 0, 0};
    int in_space = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int len = utf8_decode(s + i, n - i, &cp);
        int sp = is_space(cp);
        if (sp && !in_space) t.space_runs++;
        in_space = sp;
        i += (size_t)len;
        if (!sp) t.rstrip_end = i;
        t.chars++;
    }
    return t;
}

// ---- batched forwards ------------------------------------------------------------------

// A sequence to score: ids[0..len) (len >= 2), the log-probabilities of
// ids[from..len) each given the ids before it (1 <= from < len).
typedef struct { const int *ids; int len, from; } Seq;

typedef struct {
    Model *m;
    int max_length;
    int *tokens;     // [B·T] inputs, padded
    int *targets;    // [B·T]
    double *logp;    // [T]
} Scorer;

// Up to this many tokens per forward (B sequences of T): bounds the
// attention probabilities saved per layer, B·nh·T².
#define SCORE_BATCH_TOKENS 4096

// T for a batch whose longest input is n tokens: a multiple of 64 (so the
// arena is rarely resized), at most the window.
static int padded_len(int n, int max_length) {
    int t = (n + 63) / 64 * 64;
    return t < max_length ? t : max_length;
}

// out[i] = Σ log p over seqs[i]'s scored tokens, for n sequences of at most
// max_length + 1 ids. Positions past a sequence's end read token 0: the
// model is causal, so they change nothing before them.
static int forward_seqs(Scorer *s, const Seq *seqs, int n, double *out) {
    Model *m = s->m;
    const int V = m->cfg.vocab_size;
    for (int i0 = 0; i0 < n;) {
        int longest = 0, B = 0;
        for (int i = i0; i < n; i++) {
            int l = seqs[i].len - 1 > longest ? seqs[i].len - 1 : longest;
            if (B > 0 && (B + 1) * padded_len(l, s->max_length) > SCORE_BATCH_TOKENS) break;
            longest = l;
            B++;
        }
        int T = padded_len(longest, s->max_length);
        if ((m->B != B || m->T != T) && model_alloc_acts(m, B, T)) return MHAR_ERR;
        memset(s->tokens, 0, sizeof(int) * (size_t)B * T);
        memset(s->targets, 0, sizeof(int) * (size_t)B * T);
        for (int b = 0; b < B; b++) {
            const Seq *q = &seqs[i0 + b];
            memcpy(s->tokens + (size_t)b * T, q->ids, sizeof(int) * (size_t)(q->len - 1));
            memcpy(s->targets + (size_t)b * T, q->ids + 1, sizeof(int) * (size_t)(q->len - 1));
        }
        model_forward(m, s->tokens, NULL);
        for (int b = 0; b < B; b++) {
            const Seq *q = &seqs[i0 + b];
            size_t row = (size_t)b * T + (size_t)(q->from - 1);
            int count = q->len - q->from;
            token_logprobs(m->ctx, s->logp, m->logits + row * V, s->targets + row, count, V);
            ops_sync(m->ctx);
            double sum = 0;
            for (int k = 0; k < count; k++) sum += s->logp[k];
            out[i0 + b] = sum;
        }
        i0 += B;
    }
    return MHAR_OK;
}

// ---- multiple choice ---------------------------------------------------------------------

static int encode(const Bpe *b, const char *text, size_t len, IntVec *out) {
    out->n = 0;
    return bpe_encode(b, (const unsigned char *)text, len, 1, out);
}

// First index of the largest value (numpy's argmax).
static int argmax(const double *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

static int score_choice(Scorer *s, const RunTokenizer *tk, const ScoreTask *t, const char *where, int prefix,
                        ItemScore *it) {
    const int n = t->n_choices, M = s->max_length;
    it->n_choices = n;
    it->answer = t->answer;
    it->choice = calloc((size_t)n, sizeof(ChoiceScore));
    Seq *seqs = calloc((size_t)n, sizeof(Seq));
    int **ids = calloc((size_t)n, sizeof(int *));
    double *ll = calloc((size_t)n, sizeof(double)), *norm = calloc((size_t)n, sizeof(double));
    IntVec ctx = {0}, whole = {0};
    int rc = it->choice && seqs && ids && ll && norm ? MHAR_OK : mhar_fail("out of memory");
    size_t ctx_len = strlen(t->context), ctx_end = measure(t->context).rstrip_end;
    if (!rc) {
        if (ctx_end == 0) {  // lm-eval's empty context: the prefix token
            if (prefix < 0) rc = mhar_fail("%s: an empty context needs a bos or end-of-text token; the tokenizer "
                                           "has neither", where);
            else rc = intvec_push(&ctx, &prefix, 1);
        } else {
            rc = encode(&tk->bpe, t->context, ctx_end, &ctx);
        }
    }
    size_t cap = 0;
    char *joined = NULL;
    for (int c = 0; c < n && !rc; c++) {
        size_t clen = strlen(t->choices[c]);
        if (ctx_len + clen + 1 > cap && !(joined = realloc(joined, cap = ctx_len + clen + 1))) {
            rc = mhar_fail("out of memory");
            break;
        }
        memcpy(joined, t->context, ctx_len);
        memcpy(joined + ctx_len, t->choices[c], clen);
        rc = encode(&tk->bpe, joined, ctx_len + clen, &whole);
        // the choice's tokens: the whole's after the context's (all of them after a prefix token)
        size_t skip = ctx_end == 0 ? 0 : ctx.n;
        if (!rc && whole.n <= skip)
            rc = mhar_fail("%s: choice %d merges into the context's last tokens: context + choice is %zu tokens, "
                           "no more than the context's %zu (lm-eval would score it 0); end the context where a "
                           "token ends, e.g. after a space", where, c, whole.n, ctx.n);
        size_t n_cont = rc ? 0 : whole.n - skip;
        if (!rc && n_cont > (size_t)M)
            rc = mhar_fail("%s: choice %d is %zu tokens, more than the window of %d", where, c, n_cont, M);
        if (rc) break;
        size_t total = ctx.n + n_cont, keep = total < (size_t)M + 1 ? total : (size_t)M + 1;
        if (!(ids[c] = malloc(sizeof(int) * total))) { rc = mhar_fail("out of memory"); break; }
        memcpy(ids[c], ctx.v, sizeof(int) * ctx.n);
        memcpy(ids[c] + ctx.n, whole.v + skip, sizeof(int) * n_cont);
        seqs[c] = (Seq){ids[c] + (total - keep), (int)keep, (int)(keep - n_cont)};
        it->choice[c].tokens = (int)n_cont;
        it->choice[c].chars = (int)measure(t->choices[c]).chars;
        it->choice[c].truncated = (int)(total - keep);
    }
    if (!rc) rc = forward_seqs(s, seqs, n, ll);
    if (!rc) {
        for (int c = 0; c < n; c++) {
            it->choice[c].loglik = ll[c];
            norm[c] = ll[c] / it->choice[c].chars;
        }
        it->pred = argmax(ll, n);
        it->pred_norm = argmax(norm, n);
    }
    for (int c = 0; ids && c < n; c++) free(ids[c]);
    free(ids);
    free(seqs);
    free(ll);
    free(norm);
    free(joined);
    intvec_free(&ctx);
    intvec_free(&whole);
    return rc;
}

// ---- perplexity ------------------------------------------------------------------------------

static int score_text(Scorer *s, const RunTokenizer *tk, const ScoreTask *t, const char *where, int prefix,
                      ItemScore *it) {
    const int M = s->max_length;
    IntVec toks = {0};
    size_t len = strlen(t->text);
    TextMeasure tm = measure(t->text);
    it->bytes = (long)len;
    it->words = 1 + tm.space_runs;
    if (prefix < 0)
        return mhar_fail("%s: scoring a text needs a bos or end-of-text token to condition its first token; "
                         "the tokenizer has neither", where);
    int rc = encode(&tk->bpe, t->text, len, &toks);
    if (!rc && toks.n == 0) rc = mhar_fail("%s: the text encodes to no tokens", where);
    // The windows: the first starts with the prefix token; each next one
    // ends at the next token to score and reads the M tokens before it.
    size_t n = toks.n, n_win = n <= (size_t)M ? 1 : 1 + (n - M + M - 1) / M;
    Seq *seqs = rc ? NULL : calloc(n_win, sizeof(Seq));
    double *ll = rc ? NULL : calloc(n_win, sizeof(double));
    int *first = rc ? NULL : malloc(sizeof(int) * ((n < (size_t)M ? n : (size_t)M) + 1));
    if (!rc && (!seqs || !ll || !first)) rc = mhar_fail("out of memory");
    if (!rc) {
        size_t f = n < (size_t)M ? n : (size_t)M;
        first[0] = prefix;
        memcpy(first + 1, toks.v, sizeof(int) * f);
        seqs[0] = (Seq){first, (int)f + 1, 1};
        size_t k = 1;
        for (size_t done = f; done < n; k++) {
            size_t w = n - done < (size_t)M ? n - done : (size_t)M, end = done + w;
            seqs[k] = (Seq){toks.v + (end - M - 1), M + 1, (int)(M + 1 - w)};
            done = end;
        }
        it->windows = (int)k;
        rc = forward_seqs(s, seqs, (int)k, ll);
    }
    if (!rc) {
        it->tokens = (long)n;
        for (int k = 0; k < it->windows; k++) it->loglik += ll[k];
    }
    free(seqs);
    free(ll);
    free(first);
    intvec_free(&toks);
    return rc;
}

// ---- the run ---------------------------------------------------------------------------------

// lm-eval's mean and mean_stderr (sample sd / sqrt(n); NaN below 2 values).
static void mean_stderr(const double *x, size_t n, double *mean, double *stderr_) {
    double s = 0, ss = 0;
    for (size_t i = 0; i < n; i++) s += x[i];
    *mean = n ? s / (double)n : NAN;
    for (size_t i = 0; i < n; i++) ss += (x[i] - *mean) * (x[i] - *mean);
    *stderr_ = n >= 2 ? sqrt(ss / (double)(n - 1)) / sqrt((double)n) : NAN;
}

static void aggregate(ScoreResult *r) {
    double *acc = calloc(r->n + 1, sizeof(double)), *acc_norm = calloc(r->n + 1, sizeof(double));
    for (size_t i = 0; i < r->n; i++) {
        const ItemScore *it = &r->items[i];
        if (it->kind == TASK_CHOICE) {
            if (acc && acc_norm) {
                acc[r->n_choice] = it->pred == it->answer;
                acc_norm[r->n_choice] = it->pred_norm == it->answer;
            }
            r->n_choice++;
        } else {
            r->n_text++;
            r->loglik += it->loglik;
            r->tokens += it->tokens;
            r->bytes += it->bytes;
            r->words += it->words;
        }
    }
    r->acc = r->acc_stderr = r->acc_norm = r->acc_norm_stderr = NAN;
    if (acc && acc_norm) {
        mean_stderr(acc, r->n_choice, &r->acc, &r->acc_stderr);
        mean_stderr(acc_norm, r->n_choice, &r->acc_norm, &r->acc_norm_stderr);
    }
    free(acc);
    free(acc_norm);
    r->token_perplexity = r->n_text ? exp(-r->loglik / (double)r->tokens) : NAN;
    r->byte_perplexity = r->n_text ? exp(-r->loglik / (double)r->bytes) : NAN;
    r->word_perplexity = r->n_text ? exp(-r->loglik / (double)r->words) : NAN;
    r->bits_per_byte = r->n_text ? -r->loglik / (double)r->bytes / log(2.0) : NAN;
}

int score_run(Model *m, const RunTokenizer *t, const ScoreTasks *tasks, const ScoreOptions *o, ScoreResult *r) {
    memset(r, 0, sizeof *r);
    const Config *c = &m->cfg;
    int M = o->max_length ? o->max_length : c->max_position_embeddings;
    if (M < 1 || M > c->max_position_embeddings)
        return mhar_fail("--max-length %d is outside 1..max_position_embeddings %d", M, c->max_position_embeddings);
    if (t->bpe.vocab_size > c->vocab_size)
        return mhar_fail("the tokenizer's vocabulary %d is larger than the model's %d", t->bpe.vocab_size,
                         c->vocab_size);
    r->max_length = M;
    r->prefix_id = run_tokenizer_prefix(t);
    Scorer s = {m, M, NULL, NULL, NULL};
    size_t cells = M > SCORE_BATCH_TOKENS ? (size_t)M : SCORE_BATCH_TOKENS;  // B·T of any batch
    s.tokens = malloc(sizeof(int) * cells);
    s.targets = malloc(sizeof(int) * cells);
    s.logp = malloc(sizeof(double) * (size_t)M);
    r->items = calloc(tasks->n, sizeof(ItemScore));
    int rc = s.tokens && s.targets && s.logp && r->items ? MHAR_OK : mhar_fail("out of memory");
    for (size_t i = 0; i < tasks->n && !rc; i++) {
        const ScoreTask *task = &tasks->v[i];
        ItemScore *it = &r->items[i];
        char where[MHAR_PATH_MAX + 32];
        snprintf(where, sizeof where, "%s:%d", tasks->name, task->line);
        it->kind = task->kind;
        it->line = task->line;
        r->n = i + 1;
        rc = task->kind == TASK_CHOICE ? score_choice(&s, t, task, where, r->prefix_id, it)
                                       : score_text(&s, t, task, where, r->prefix_id, it);
    }
    free(s.tokens);
    free(s.targets);
    free(s.logp);
    if (rc) {
        score_result_free(r);
        return rc;
    }
    aggregate(r);
    return MHAR_OK;
}

void score_result_free(ScoreResult *r) {
    for (size_t i = 0; r->items && i < r->n; i++) free(r->items[i].choice);
    free(r->items);
    r->items = NULL;
    r->n = 0;
}
