// mhar sample --prompt: text in, text out. The prompt is encoded with the
// run's tokenizer (special token text such as <|endoftext|> becomes its id,
// as HF tokenizers does; no BOS is added; an empty prompt is the prefix
// token, run_tokenizer_prefix), and generation (model/generate.h) streams:
// the prompt's text is written first, then each token's bytes as it is
// drawn, flushed per token, an incomplete UTF-8 sequence held back until it
// completes (tokenizer/utf8_stream.h); a newline ends the output. The bytes
// after the prompt are exactly the generated tokens' bytes.
#pragma once
#include <stdio.h>

#include "../model/generate.h"
#include "../tokenizer/run_tokenizer.h"

typedef struct {
    int prompt_tokens, generated;
    int stopped;  // generation ended at the end-of-text token
} TextSampleInfo;

// o->stop_id is set here: the tokenizer's end-of-text token
// (run_tokenizer_eot) unless ignore_eot, or when it has none.
int sample_text(Model *m, const RunTokenizer *t, const char *prompt, GenerateOptions o, int ignore_eot, FILE *out,
                TextSampleInfo *info);
