// A run directory's tokenizer, as the files HF transformers loads with
// AutoTokenizer.from_pretrained(RUN):
//   RUN/tokenizer.json           HF tokenizers format (export.h)
//   RUN/tokenizer_config.json    tokenizer_class PreTrainedTokenizerFast,
//                                model_max_length, and the special tokens:
//                                eos_token <|endoftext|> (the separator mhar's
//                                data puts after every document), bos, pad
//                                and unk null, no BOS/EOS added on encoding
//   RUN/special_tokens_map.json  only when copied from a model that has one
// `mhar train` stores the tokenizer of its data here (the one recorded beside
// the token files: tokenizer_beside), `--init-from` and `mhar convert` carry
// it on; `mhar sample --prompt` and `mhar score` read it.
#pragma once
#include <stddef.h>

#include "bpe.h"

typedef struct {
    Bpe bpe;
    int bos_id, eos_id;  // tokenizer_config.json's bos_token / eos_token; -1: none or no config
} RunTokenizer;

// 1 if dir holds tokenizer.json.
int run_tokenizer_present(const char *dir);
// Write dir/tokenizer.json and dir/tokenizer_config.json (each atomically,
// the config last) for b; model_max_length: the model's context window.
int run_tokenizer_save(const char *dir, const Bpe *b, int model_max_length);
// Copy the tokenizer files of directory from into to byte for byte
// (tokenizer.json, and tokenizer_config.json and special_tokens_map.json
// where present); a missing tokenizer_config.json is written as
// run_tokenizer_save would. from must hold tokenizer.json.
int run_tokenizer_copy(const char *from, const char *to, int model_max_length);
// Load dir's tokenizer; an error names the directory and says when it has
// none. The config is optional (bos_id = eos_id = -1 without it).
int run_tokenizer_load(const char *dir, RunTokenizer *t);
void run_tokenizer_free(RunTokenizer *t);
// The token that ends a document: eos_token, else <|endoftext|> (or
// <|end_of_text|>); -1 if none.
int run_tokenizer_eot(const RunTokenizer *t);
// The token that conditions a text's first token, as lm-evaluation-harness's
// prefix_token_id: bos_token, else the end-of-text token; -1 if none.
int run_tokenizer_prefix(const RunTokenizer *t);

// A tokenizer file in either format, told apart by content: an HF
// tokenizer.json (a JSON object: bpe_import_hf), else mhar's .bpe (bpe_load).
int tokenizer_load_file(const char *path, Bpe *b);
// The tokenizer a token file was made with: tokenizer.bpe in the same
// directory (what `mhar data tokenize` and the default data write), else
// tokenizer.json there. Its path goes to out[cap]; returns 1 if found, 0 if
// not, MHAR_ERR if the path does not fit.
int tokenizer_beside(const char *token_file, char *out, size_t cap);
