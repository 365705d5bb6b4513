// HF tokenizer.json and tiktoken export, HF tokenizer.json import.
#include "export.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/atomic.h"
#include "../util/common.h"
#include "../util/json.h"
#include "hash.h"
#include "pretokenize.h"
#include "textfiles.h"
#include "unicode.h"

void byte_level_map(uint32_t cp[256]) {
    uint32_t next = 256;
    for (int c = 0; c < 256; c++) {
        int printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF);
        cp[c] = printable ? (uint32_t)c : next++;
    }
}

// Token bytes as a byte-level string (UTF-8, NUL-terminated) in out, which
// holds at least 2 * len + 1 bytes: every mapped character is < U+0800.
static void to_byte_level(const uint32_t map[256], const unsigned char *s, size_t len, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t c = map[s[i]];
        if (c < 0x80) {
            out[o++] = (char)c;
        } else {
            out[o++] = (char)(0xC0 | (c >> 6));
            out[o++] = (char)(0x80 | (c & 0x3F));
        }
    }
    out[o] = '\0';
}

static int write_json(const char *path, cJSON *root) {
    char *text = cJSON_PrintUnformatted(root);
    if (!text) return mhar_fail("%s: out of memory printing JSON", path);
    int rc = atomic_write_file(path, text, strlen(text));
    cJSON_free(text);
    return rc;
}

static cJSON *added_token(int id, const char *content) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "id", id);
    cJSON_AddStringToObject(t, "content", content);
    cJSON_AddBoolToObject(t, "single_word", 0);
    cJSON_AddBoolToObject(t, "lstrip", 0);
    cJSON_AddBoolToObject(t, "rstrip", 0);
    cJSON_AddBoolToObject(t, "normalized", 0);
    cJSON_AddBoolToObject(t, "special", 1);
    return t;
}

static cJSON *byte_level(int use_regex) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddBoolToObject(o, "add_prefix_space", 0);
    cJSON_AddBoolToObject(o, "trim_offsets", 0);
    cJSON_AddBoolToObject(o, "use_regex", use_regex);
    return o;
}

// A special token's text as a C string (it may not hold NUL for JSON).
static int special_text(const Bpe *b, int id, char *out, size_t cap) {
    size_t len = bpe_token_len(b, id);
    if (len >= cap || memchr(bpe_token(b, id), 0, len))
        return mhar_fail("special token %d cannot be written as JSON text", id);
    memcpy(out, bpe_token(b, id), len);
    out[len] = '\0';
    return MHAR_OK;
}

int bpe_export_hf(const Bpe *b, const char *path) {
    uint32_t map[256];
    byte_level_map(map);
    char *s1 = malloc(2 * (size_t)BPE_MAX_TOKEN_LEN + 1), *s2 = malloc(2 * (size_t)BPE_MAX_TOKEN_LEN + 1);
    char *m = malloc(4 * (size_t)BPE_MAX_TOKEN_LEN + 2);
    cJSON *root = cJSON_CreateObject();
    if (!s1 || !s2 || !m || !root) {
        free(s1); free(s2); free(m); cJSON_Delete(root);
        return mhar_fail("%s: out of memory", path);
    }
    int rc = MHAR_OK;
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    for (int k = 0; k < b->n_special && rc == MHAR_OK; k++) {
        rc = special_text(b, b->special[k], s1, 2 * (size_t)BPE_MAX_TOKEN_LEN);
        if (rc == MHAR_OK) cJSON_AddItemToArray(added, added_token(b->special[k], s1));
    }
    if (b->flags & BPE_NFC) {
        cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
        cJSON_AddStringToObject(norm, "type", "NFC");
    } else {
        cJSON_AddNullToObject(root, "normalizer");
    }
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "Sequence");
    cJSON *seq = cJSON_AddArrayToObject(pre, "pretokenizers");
    cJSON *split = cJSON_CreateObject();
    cJSON_AddStringToObject(split, "type", "Split");
    cJSON *pat = cJSON_AddObjectToObject(split, "pattern");
    cJSON_AddStringToObject(pat, "Regex", pretok_pattern(b->pattern));
    cJSON_AddStringToObject(split, "behavior", "Isolated");
    cJSON_AddBoolToObject(split, "invert", 0);
    cJSON_AddItemToArray(seq, split);
    cJSON_AddItemToArray(seq, byte_level(0));
    cJSON_AddNullToObject(root, "post_processor");
    cJSON_AddItemToObject(root, "decoder", byte_level(1));
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddNullToObject(model, "continuing_subword_prefix");
    cJSON_AddNullToObject(model, "end_of_word_suffix");
    cJSON_AddBoolToObject(model, "fuse_unk", 0);
    cJSON_AddBoolToObject(model, "byte_fallback", 0);
    cJSON_AddBoolToObject(model, "ignore_merges", (b->flags & BPE_IGNORE_MERGES) != 0);
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    for (int t = 0; t < b->vocab_size && rc == MHAR_OK; t++) {
        if (b->is_special[t]) continue;
        to_byte_level(map, bpe_token(b, t), bpe_token_len(b, t), s1);
        cJSON_AddItemToObject(vocab, s1, cJSON_CreateNumber(t));
    }
    // Merges as "left right": byte-level strings hold no space (0x20 maps to U+0120).
    cJSON *merges = cJSON_AddArrayToObject(model, "merges");
    for (int k = 0; k < b->n_merges && rc == MHAR_OK; k++) {
        int l = b->merges[k][0], r = b->merges[k][1];
        to_byte_level(map, bpe_token(b, l), bpe_token_len(b, l), s1);
        to_byte_level(map, bpe_token(b, r), bpe_token_len(b, r), s2);
        snprintf(m, 4 * (size_t)BPE_MAX_TOKEN_LEN + 2, "%s %s", s1, s2);
        cJSON_AddItemToArray(merges, cJSON_CreateString(m));
    }
    if (rc == MHAR_OK) rc = write_json(path, root);
    cJSON_Delete(root);
    free(s1);
    free(s2);
    free(m);
    return rc;
}

// ---- tiktoken ----

static size_t base64(const unsigned char *s, size_t n, char *out) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) | (i + 2 < n ? s[i + 2] : 0);
        out[o++] = A[v >> 18 & 63];
        out[o++] = A[v >> 12 & 63];
        out[o++] = i + 1 < n ? A[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? A[v & 63] : '=';
    }
    out[o] = '\0';
    return o;
}

// tiktoken merges, within a piece, the adjacent pair whose concatenation has
// the lowest rank, and its rank is its id. That is the merge order exactly
// when the merge results are all distinct, come in increasing id order, and
// every other non-special token is a single byte.
static int check_rank_order(const Bpe *b) {
    unsigned char *made = calloc((size_t)b->vocab_size, 1);
    if (!made) return mhar_fail("out of memory");
    int rc = MHAR_OK, last = -1;
    for (int k = 0; k < b->n_merges && rc == MHAR_OK; k++) {
        int l = b->merges[k][0], r = b->merges[k][1];
        unsigned char buf[2 * 256];
        size_t ll = bpe_token_len(b, l), lr = bpe_token_len(b, r);
        int t;
        if (ll + lr <= sizeof buf) {
            memcpy(buf, bpe_token(b, l), ll);
            memcpy(buf + ll, bpe_token(b, r), lr);
            t = bpe_token_id(b, buf, ll + lr);
        } else {
            unsigned char *big = malloc(ll + lr);
            if (!big) { rc = mhar_fail("out of memory"); break; }
            memcpy(big, bpe_token(b, l), ll);
            memcpy(big + ll, bpe_token(b, r), lr);
            t = bpe_token_id(b, big, ll + lr);
            free(big);
        }
        if (t <= last || made[t])
            rc = mhar_fail("merge %d makes token %d, not above the previous merge's %d: ids are not in merge "
                           "order, which tiktoken's ranks require", k, t, last);
        made[t] = 1;
        last = t;
    }
    for (int t = 0; t < b->vocab_size && rc == MHAR_OK; t++)
        if (!b->is_special[t] && !made[t] && bpe_token_len(b, t) > 1)
            rc = mhar_fail("token %d is neither a byte, a merge result nor special: tiktoken would use it", t);
    free(made);
    return rc;
}

int bpe_export_tiktoken(const Bpe *b, const char *path) {
    if (b->flags & BPE_NFC)
        return mhar_fail("%s: cannot export: the tokenizer normalizes to NFC, which tiktoken cannot do", path);
    if (check_rank_order(b)) return mhar_fail("%s: cannot export: %s", path, mhar_error());
    AtomicFile a;
    char *line = malloc(4 * ((size_t)BPE_MAX_TOKEN_LEN / 3 + 2) + 32);
    if (!line) return mhar_fail("out of memory");
    if (atomic_open(&a, path)) { free(line); return MHAR_ERR; }
    for (int t = 0; t < b->vocab_size; t++) {
        if (b->is_special[t]) continue;
        size_t o = base64(bpe_token(b, t), bpe_token_len(b, t), line);
        o += (size_t)sprintf(line + o, " %d\n", t);
        atomic_write(&a, line, o);
    }
    free(line);
    if (a.failed) { atomic_abort(&a); return MHAR_ERR; }
    if (atomic_commit(&a)) return MHAR_ERR;
    // The sidecar: what tiktoken.Encoding needs besides the ranks.
    char side[MHAR_PATH_MAX], text[1024];
    if (path_format(side, sizeof side, "%s.json", path)) return MHAR_ERR;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "pat_str", pretok_pattern(b->pattern));
    cJSON *sp = cJSON_AddObjectToObject(root, "special_tokens");
    int rc = MHAR_OK;
    for (int k = 0; k < b->n_special && rc == MHAR_OK; k++) {
        rc = special_text(b, b->special[k], text, sizeof text);
        if (rc == MHAR_OK) cJSON_AddNumberToObject(sp, text, b->special[k]);
    }
    cJSON_AddNumberToObject(root, "explicit_n_vocab", b->vocab_size);
    if (rc == MHAR_OK) rc = write_json(side, root);
    cJSON_Delete(root);
    return rc;
}

// ---- HF import ----

static int absent_or_null(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return !v || cJSON_IsNull(v);
}

static int null_or_empty(const cJSON *o, const char *key) {
    const char *s = json_string_or(o, key, NULL);
    return absent_or_null(o, key) || (s && !*s);
}

// The split pattern a pre_tokenizer amounts to, or an error.
static int read_pre_tokenizer(const char *path, const cJSON *pre, int *pattern) {
    if (!pre || cJSON_IsNull(pre)) return mhar_fail("%s: no pre_tokenizer: not a byte-level BPE", path);
    const cJSON *list[8];
    int n = 0;
    const char *type = json_string_or(pre, "type", NULL);
    if (type && !strcmp(type, "Sequence")) {
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers")) {
            if (n == 8) return mhar_fail("%s: pre_tokenizer: too many steps", path);
            list[n++] = it;
        }
    } else {
        list[n++] = pre;
    }
    *pattern = PAT_NONE;
    int byte_level = 0;
    for (int i = 0; i < n; i++) {
        const char *t = json_string_or(list[i], "type", NULL);
        if (t && !strcmp(t, "ByteLevel")) {
            if (byte_level || i != n - 1)
                return mhar_fail("%s: pre_tokenizer: ByteLevel must come once, last", path);
            if (json_bool_or(list[i], "add_prefix_space", 0))
                return mhar_fail("%s: pre_tokenizer: ByteLevel add_prefix_space is not supported", path);
            if (json_bool_or(list[i], "use_regex", 1)) {
                if (*pattern) return mhar_fail("%s: pre_tokenizer: a Split and ByteLevel's own regex both", path);
                *pattern = PAT_GPT2;  // ByteLevel's built-in regex is GPT-2's
            }
            byte_level = 1;
        } else if (t && !strcmp(t, "Split")) {
            const char *re =
                json_string_or(cJSON_GetObjectItemCaseSensitive(list[i], "pattern"), "Regex", NULL);
            const char *beh = json_string_or(list[i], "behavior", NULL);
            if (*pattern || !re)
                return mhar_fail("%s: pre_tokenizer: only one Split with a Regex pattern is supported", path);
            if (!beh || strcmp(beh, "Isolated") || json_bool_or(list[i], "invert", 0))
                return mhar_fail("%s: pre_tokenizer: Split must have behavior Isolated and invert false", path);
            *pattern = pretok_pattern_id(re);
            if (!*pattern)
                return mhar_fail("%s: unsupported split regex \"%.160s\": mhar implements exactly the GPT-2, Llama-3 "
                                 "and Qwen2 patterns", path, re);
        } else {
            return mhar_fail("%s: pre_tokenizer step \"%s\" is not supported (Split and ByteLevel are)", path,
                             t ? t : "?");
        }
    }
    if (!byte_level) return mhar_fail("%s: pre_tokenizer has no ByteLevel step: not a byte-level BPE", path);
    if (!*pattern) return mhar_fail("%s: pre_tokenizer splits with no regex: not supported", path);
    return MHAR_OK;
}

// A byte-level string back to bytes; -1 if it holds a character outside the map.
static long from_byte_level(const int16_t *byte_of, const char *s, unsigned char *out, size_t cap) {
    size_t n = strlen(s), o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (cp >= 0x144 || byte_of[cp] < 0 || o >= cap) return -1;
        out[o++] = (unsigned char)byte_of[cp];
    }
    return (long)o;
}

typedef struct { char *s; int special; } ImportTok;

static int import_parsed(const char *path, const cJSON *root, Bpe *b) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *mtype = json_string_or(model, "type", NULL);
    if (!cJSON_IsObject(model) || (mtype && strcmp(mtype, "BPE")))
        return mhar_fail("%s: model type %s: only BPE is supported", path, mtype ? mtype : "missing");
    if (!absent_or_null(model, "dropout") && cJSON_GetObjectItemCaseSensitive(model, "dropout")->valuedouble != 0)
        return mhar_fail("%s: BPE dropout is not supported", path);
    if (!null_or_empty(model, "continuing_subword_prefix") || !null_or_empty(model, "end_of_word_suffix"))
        return mhar_fail("%s: continuing_subword_prefix / end_of_word_suffix are not supported", path);
    if (json_bool_or(model, "byte_fallback", 0)) return mhar_fail("%s: byte_fallback is not supported", path);
    // Normalizer: none, or NFC (alone or as a one-step Sequence).
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    unsigned nfc = 0;
    if (norm && !cJSON_IsNull(norm)) {
        const char *nt = json_string_or(norm, "type", NULL);
        const cJSON *steps = cJSON_GetObjectItemCaseSensitive(norm, "normalizers");
        if (nt && !strcmp(nt, "Sequence") && cJSON_GetArraySize(steps) <= 1) {
            norm = cJSON_GetArraySize(steps) ? cJSON_GetArrayItem(steps, 0) : NULL;
            nt = norm ? json_string_or(norm, "type", NULL) : NULL;
        }
        if (nt && !strcmp(nt, "NFC")) nfc = BPE_NFC;
        else if (norm)
            return mhar_fail("%s: normalizer %s is not supported (mhar implements none and NFC)", path,
                             nt ? nt : "?");
    }
    int pattern = PAT_NONE;
    if (read_pre_tokenizer(path, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &pattern)) return MHAR_ERR;
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
        return mhar_fail("%s: model.vocab (object) and model.merges (array) are required", path);
    // Ids: the vocabulary and the added tokens, with no gaps.
    long V = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= BPE_MAX_VOCAB)
            return mhar_fail("%s: vocab entry \"%.60s\" has a bad id", path, it->string);
        if ((long)it->valuedouble + 1 > V) V = (long)it->valuedouble + 1;
    }
    cJSON_ArrayForEach(it, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= BPE_MAX_VOCAB ||
            !json_string_or(it, "content", NULL))
            return mhar_fail("%s: an added token has no valid id or content", path);
        if ((long)id->valuedouble + 1 > V) V = (long)id->valuedouble + 1;
        if (json_bool_or(it, "lstrip", 0) || json_bool_or(it, "rstrip", 0) || json_bool_or(it, "single_word", 0))
            return mhar_fail("%s: added token \"%.60s\" uses lstrip/rstrip/single_word: not supported", path,
                             json_string_or(it, "content", NULL));
    }
    // Ids have no gaps, so V cannot exceed the number of entries: refusing it
    // here keeps a single huge id from sizing the tables below.
    long n_entries = (long)cJSON_GetArraySize(vocab) + (long)cJSON_GetArraySize(added);
    if (V > n_entries)
        return mhar_fail("%s: ids run up to %ld but there are only %ld vocab and added entries (ids must have no gaps)",
                         path, V - 1, n_entries);
    ImportTok *tok = calloc((size_t)V + 1, sizeof(ImportTok));
    if (!tok) return mhar_fail("%s: out of memory", path);
    int rc = MHAR_OK;
    cJSON_ArrayForEach(it, vocab) {
        long id = (long)it->valuedouble;
        if (tok[id].s) { rc = mhar_fail("%s: id %ld appears twice in the vocab", path, id); break; }
        tok[id].s = it->string;
    }
    cJSON_ArrayForEach(it, added) {
        if (rc) break;
        long id = (long)cJSON_GetObjectItemCaseSensitive(it, "id")->valuedouble;
        const char *content = json_string_or(it, "content", NULL);
        if (tok[id].s && !tok[id].special && strcmp(tok[id].s, content))
            rc = mhar_fail("%s: added token %ld \"%.60s\" differs from the vocab's \"%.60s\"", path, id, content,
                           tok[id].s);
        tok[id].s = (char *)content;
        tok[id].special = 1;
    }
    for (long t = 0; rc == MHAR_OK && t < V; t++)
        if (!tok[t].s) rc = mhar_fail("%s: id %ld is neither in the vocab nor an added token", path, t);
    // Token bytes.
    uint32_t map[256];
    int16_t byte_of[0x144];
    byte_level_map(map);
    memset(byte_of, 0xFF, sizeof byte_of);
    for (int c = 0; c < 256; c++) byte_of[map[c]] = (int16_t)c;
    size_t *off = malloc(sizeof(size_t) * ((size_t)V + 1));
    size_t total = 0;
    for (long t = 0; t < V && rc == MHAR_OK; t++) total += strlen(tok[t].s);
    unsigned char *bytes = malloc(total + 1);
    int *special = malloc(sizeof(int) * ((size_t)V + 1));
    int n_special = 0;
    if (rc == MHAR_OK && (!off || !bytes || !special)) rc = mhar_fail("%s: out of memory", path);
    if (rc == MHAR_OK) off[0] = 0;
    for (long t = 0; t < V && rc == MHAR_OK; t++) {
        size_t len = strlen(tok[t].s);
        long n;
        if (tok[t].special) {
            memcpy(bytes + off[t], tok[t].s, len);
            n = (long)len;
            special[n_special++] = (int)t;
        } else {
            n = from_byte_level(byte_of, tok[t].s, bytes + off[t], total - off[t]);
            if (n < 0) rc = mhar_fail("%s: vocab entry %ld \"%.60s\" is not byte-level text", path, t, tok[t].s);
        }
        if (rc == MHAR_OK && n == 0) rc = mhar_fail("%s: vocab entry %ld is empty", path, t);
        if (rc == MHAR_OK) off[t + 1] = off[t] + (size_t)n;
    }
    // Merges: "left right" or ["left", "right"], by the tokens' strings.
    int n_merges = cJSON_GetArraySize(merges);
    int (*mg)[2] = malloc(sizeof(int[2]) * ((size_t)n_merges + 1));
    size_t mask = hash_capacity((size_t)V) - 1;
    int32_t *slot = malloc(sizeof(int32_t) * (mask + 1));
    if (rc == MHAR_OK && (!mg || !slot)) rc = mhar_fail("%s: out of memory", path);
    if (rc == MHAR_OK) {
        memset(slot, 0xFF, sizeof(int32_t) * (mask + 1));
        for (long t = 0; t < V; t++) {
            if (tok[t].special) continue;
            size_t i = hash_bytes((const unsigned char *)tok[t].s, strlen(tok[t].s)) & mask;
            while (slot[i] >= 0) i = (i + 1) & mask;
            slot[i] = (int32_t)t;
        }
    }
    int k = 0;
    cJSON_ArrayForEach(it, merges) {
        if (rc) break;
        const char *parts[2] = {NULL, NULL};
        size_t plen[2] = {0, 0};
        if (cJSON_IsString(it)) {
            const char *sp = strchr(it->valuestring, ' ');
            if (sp && !strchr(sp + 1, ' ')) {
                parts[0] = it->valuestring;
                plen[0] = (size_t)(sp - it->valuestring);
                parts[1] = sp + 1;
                plen[1] = strlen(sp + 1);
            }
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2) {
            for (int j = 0; j < 2; j++) {
                const cJSON *p = cJSON_GetArrayItem(it, j);
                if (cJSON_IsString(p)) { parts[j] = p->valuestring; plen[j] = strlen(p->valuestring); }
            }
        }
        if (!parts[0] || !parts[1]) { rc = mhar_fail("%s: merge %d is not \"left right\"", path, k); break; }
        for (int j = 0; j < 2 && rc == MHAR_OK; j++) {
            int id = -1;
            for (size_t i = hash_bytes((const unsigned char *)parts[j], plen[j]) & mask; slot[i] >= 0;
                 i = (i + 1) & mask) {
                const char *s = tok[slot[i]].s;
                if (strlen(s) == plen[j] && !memcmp(s, parts[j], plen[j])) { id = slot[i]; break; }
            }
            if (id < 0) rc = mhar_fail("%s: merge %d names \"%.*s\", which is not in the vocab", path, k,
                                       (int)(plen[j] < 60 ? plen[j] : 60), parts[j]);
            mg[k][j] = id;
        }
        k++;
    }
    if (rc == MHAR_OK)
        rc = bpe_build(b, path, (int)V, bytes, off, n_merges, (const int (*)[2])mg, n_special, special,
                       pretok_pattern(pattern), (json_bool_or(model, "ignore_merges", 0) ? BPE_IGNORE_MERGES : 0) | nfc);
    free(tok);
    free(off);
    free(bytes);
    free(special);
    free(mg);
    free(slot);
    return rc;
}

int bpe_import_hf(const char *path, Bpe *b) {
    memset(b, 0, sizeof *b);
    unsigned char *data;
    size_t n;
    if (read_all(path, &data, &n)) return MHAR_ERR;
    if (n == 0) { free(data); return mhar_fail("%s: empty file", path); }
    cJSON *root = cJSON_ParseWithLength((const char *)data, n);
    free(data);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return mhar_fail("%s: not a JSON object (not a tokenizer.json)", path);
    }
    int rc = import_parsed(path, root, b);
    cJSON_Delete(root);
    return rc;
}
