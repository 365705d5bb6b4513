// The Hugging Face remote code of a run directory: src/hf/*.py
// (configuration_mhar.py, modeling_mhar.py), embedded into the binary at
// build time (tools/embed.c writes the table). model_save writes them next to
// config.json for every scheme transformers has no class for, so that
// AutoModelForCausalLM.from_pretrained(RUN, trust_remote_code=True) loads
// the run with mhar's logits.
#pragma once
#include <stddef.h>

typedef struct {
    const char *name;           // file name in the run directory
    const unsigned char *data;
    size_t size;
} EmbeddedFile;

extern const EmbeddedFile hf_remote_files[];
extern const int hf_remote_file_count;

// Write every file into dir, each atomically. MHAR_OK / MHAR_ERR.
int hf_remote_save(const char *dir);
