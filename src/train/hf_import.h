// Importing a Hugging Face checkpoint directory (mhar import) into a run
// directory: config.json through the config parser (attnres_mode baseline
// unless the file names another), the weights from model.safetensors or a
// sharded model.safetensors.index.json (F32, BF16, F16, converted exactly
// to fp32), the tokenizer checked and copied. The result is what mhar train
// writes for a model (config.json + fp32 model.safetensors), so eval,
// sample, train --init-from and convert take it.
//
// Weights must match the config exactly: every tensor of the model present
// with its shape, nothing else, with two known exceptions: the
// "*.rotary_emb.inv_freq" buffers of older Llama checkpoints (derived from
// rope_theta, recomputed by the model; skipped), and an lm_head.weight in a
// tied model (transformers may save the tied copy): accepted only if it is
// bitwise equal to model.embed_tokens.weight, since mhar's tied head IS the
// embedding; else refused (the config should say tie_word_embeddings false).
// Any error leaves nothing behind: the run directory is built beside OUT and
// renamed into place only when complete.
#pragma once
#include <stddef.h>

#include "../model/config.h"

typedef struct {
    int no_tokenizer; // weights only: tokenizer files neither checked nor copied
} HfImportOptions;

typedef struct {
    Config cfg;
    size_t params;          // values imported
    int n_files;            // safetensors files read
    unsigned dtypes;        // DTYPE_BIT mask of the formats the weights came in
    int skipped_buffers;    // rotary_emb.inv_freq tensors skipped
    int tied_head_dropped;  // an lm_head.weight equal to the embedding (tied)
    int tokenizer_vocab;    // ids of the imported tokenizer, 0 if none
    int files_copied;       // tokenizer and generation files copied verbatim
} HfImportInfo;

// dir: an HF model directory; out: must not exist or be empty.
int hf_import(const char *dir, const char *out, const HfImportOptions *o, HfImportInfo *info);
