#!/usr/bin/env bash
# `mhar data corpus` on a made-up standard library (--stdlib-dir): binary,
# empty and separator-holding files skipped, non-*.py files, site-packages,
# __pycache__ and symbolic links ignored, duplicates removed, the manifest's
# hashes and counts matching the files (checked with sha256sum), the document
# index matching the shards, builds byte-identical, and clear errors.
# The full corpus (Debian packages, ~10 s and ~300 MB of downloads) is not
# built here.
set -u
cd "$(dirname "$0")/.."
source tests/lib.sh
# json FILE EXPR: evaluate a Python expression over the parsed JSON file (m).
json() { python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print($2)" "$1"; }

# A made-up library: 40 distinct modules, one duplicate, one binary, one empty,
# one holding the separator, one Latin-1 (kept byte for byte), and things to ignore.
L="$W/lib/python3.99"
mkdir -p "$L/pkg" "$L/site-packages" "$L/__pycache__" "$L/empty_dir"
for i in $(seq 1 40); do
    printf 'def f%d(x):\n    """Module %d."""\n    return x * %d\n' "$i" "$i" "$i" >"$L/mod$i.py"
done
printf 'import os\nprint("shared")\n' >"$L/aaa.py"
cp "$L/aaa.py" "$L/pkg/zzz_copy.py"                       # duplicate: aaa.py stays
printf 'x = 1\n\0\1\2binary\n' >"$L/pkg/blob.py"           # NUL: binary
: >"$L/pkg/empty.py"
printf 's = "<|endoftext|>"\n' >"$L/pkg/sep.py"
printf '# caf\xe9 \xff\n' >"$L/pkg/latin1.py"
printf 'not python\n' >"$L/notes.txt"
printf 'x = "third party"\n' >"$L/site-packages/thirdparty.py"
printf 'x = "cache"\n' >"$L/__pycache__/cached.py"
ln -s "$L/mod1.py" "$L/link.py"
expected_docs=42                                          # 40 + aaa.py + latin1.py

B="--stdlib-dir $L --seed 7 --val-fraction 0.1"
if $M data corpus --out "$W/c1" $B 2>"$W/err" && [ -f "$W/c1/manifest.json" ]; then pass corpus_builds
else fail corpus_builds "rc=$?, $(cat "$W/err")"; fi

r=$(json "$W/c1/manifest.json" "[m['sources'][0][k] for k in ('files_seen','skipped_binary','skipped_empty','skipped_separator','duplicates')]")
if [ "$r" = "[46, 1, 1, 1, 1]" ]; then pass corpus_skip_counts
else fail corpus_skip_counts "files_seen, binary, empty, separator, duplicates = $r, want [46, 1, 1, 1, 1]"; fi

origins=$(cut -f6 "$W/c1/docs-train.tsv" "$W/c1/docs-val.tsv" | sort)
if [ "$(wc -l <<<"$origins")" = $expected_docs ] && grep -qx aaa.py <<<"$origins" && grep -qx pkg/latin1.py <<<"$origins" \
   && ! grep -qE 'zzz_copy|blob|empty|sep\.py|notes|thirdparty|cached|link' <<<"$origins"; then
    pass corpus_documents_selected
else fail corpus_documents_selected "documents: $(tr '\n' ' ' <<<"$origins")"; fi

r=$(json "$W/c1/manifest.json" "m['documents'], m['train']['documents'], m['val']['documents'], m['sources'][0]['root']")
if [ "$r" = "$expected_docs 38 4 $L" ]; then pass corpus_split_counts
else fail corpus_split_counts "documents, train, val, root = $r (want $expected_docs, 38, 4: round(0.1 * 42))"; fi

# every output file is listed with its sha256 and size, and nothing else is there
listed=$(json "$W/c1/manifest.json" "'\n'.join('%s  %s' % (f['sha256'], f['path']) for s in ('train','val') for f in m[s]['files'] + [m[s]['index']])")
if (cd "$W/c1" && sha256sum --quiet -c - <<<"$listed" >/dev/null 2>&1) \
   && [ "$(cd "$W/c1" && find . -type f ! -name manifest.json | sed 's#^\./##' | sort)" = "$(awk '{print $2}' <<<"$listed" | sort)" ]; then
    pass corpus_manifest_hashes
else fail corpus_manifest_hashes "sha256sum -c failed or files differ from the manifest's list"; fi

# the index points at each document, which ends with the separator; the
# document's hash is right; the shards split on the separator into the documents
if python3 - "$W/c1" "$L" <<'EOF'
import hashlib, os, sys
d, lib = sys.argv[1], sys.argv[2]
for split in ("train", "val"):
    shards, n = {}, 0
    for line in open(os.path.join(d, "docs-%s.tsv" % split), "rb"):
        shard, off, ln, h, src, origin = line.rstrip(b"\n").split(b"\t")
        data = shards.setdefault(shard, open(os.path.join(d, shard.decode()), "rb").read())
        doc = data[int(off):int(off) + int(ln)]
        assert hashlib.sha256(doc).hexdigest() == h.decode(), origin
        assert data[int(off) + int(ln):int(off) + int(ln) + 13] == b"<|endoftext|>", origin
        assert doc == open(os.path.join(lib, origin.decode()), "rb").read(), origin
        n += 1
    pieces = sum(len(v.split(b"<|endoftext|>")) - 1 for v in shards.values())
    assert pieces == n, (pieces, n)
EOF
then pass corpus_index_matches_shards; else fail corpus_index_matches_shards "see the Python error above"; fi

# the reproduce commands of results/README.md on a fresh machine: the
# tokenizer goes into a folder that does not exist yet, tokenize writes beside it
if $M tokenizer train --corpus "$W/c1" --vocab 300 --out "$W/new/full/tokenizer.bpe" >/dev/null 2>"$W/err" && \
   $M data tokenize --tokenizer "$W/new/full/tokenizer.bpe" --corpus "$W/c1" --out "$W/new/full" >/dev/null 2>>"$W/err" && \
   [ -f "$W/new/full/train.bin" ] && [ -f "$W/new/full/val.bin" ]; then pass tokenizer_train_makes_out_dir
else fail tokenizer_train_makes_out_dir "$(cat "$W/err")"; fi

# same inputs, same bytes: a second build, and a rebuild over the first
$M data corpus --out "$W/c2" $B 2>/dev/null
$M data corpus --out "$W/c1" $B 2>/dev/null
if diff -r "$W/c1" "$W/c2" >/dev/null; then pass corpus_deterministic
else fail corpus_deterministic "$(diff -rq "$W/c1" "$W/c2")"; fi
$M data corpus --out "$W/c3" --stdlib-dir "$L" --seed 8 --val-fraction 0.1 2>/dev/null
if [ "$(cut -f6 "$W/c3/docs-val.tsv")" != "$(cut -f6 "$W/c1/docs-val.tsv")" ]; then pass corpus_seed_changes_split
else fail corpus_seed_changes_split "seeds 7 and 8 chose the same validation documents"; fi

# the default source finds this machine's standard library
if $M data corpus --out "$W/d" 2>/dev/null && \
   [ "$(json "$W/d/manifest.json" "m['sources'][0]['root'].split('/')[-1].startswith('python3.') and m['documents'] > 100")" = True ]; then
    pass corpus_default_source
else fail corpus_default_source "no Python standard library found or too few documents"; fi

# errors name the path and the reason
expect_error_fixed corpus_missing_dir "$W/nope: cannot open directory" $M data corpus --out "$W/e1" --stdlib-dir "$W/nope"
expect_error_fixed corpus_empty_dir "$L/empty_dir: no *.py files" $M data corpus --out "$W/e2" --stdlib-dir "$L/empty_dir"
mkdir -p "$W/only_binary" && printf '\0' >"$W/only_binary/x.py"
expect_error_fixed corpus_only_binary "$W/only_binary: 1 *.py files, none usable (1 binary" \
    $M data corpus --out "$W/e3" --stdlib-dir "$W/only_binary"
mkdir -p "$W/busy" && touch "$W/busy/precious.txt"
expect_error_fixed corpus_refuses_foreign_dir "$W/busy: not empty and holds no manifest.json" \
    $M data corpus --out "$W/busy" $B
if [ -f "$W/busy/precious.txt" ] && [ ! -e "$W/e1" ]; then pass corpus_errors_write_nothing
else fail corpus_errors_write_nothing "a failed build touched the output"; fi
expect_error_fixed corpus_bad_source "unknown corpus source 'web'" $M data corpus --out "$W/e4" --source web
expect_error_fixed corpus_bad_fraction "out of range" $M data corpus --out "$W/e5" --val-fraction 0.9
expect_error_fixed corpus_needs_out "--out DIR is required" $M data corpus

# The full corpus installs nothing: with its tools missing (a PATH holding only
# a fake apt-get that records being run) it stops with an error that names the
# packages and the command, and never runs apt-get, root or not.
mkdir -p "$W/fakebin"
printf '#!/bin/sh\necho "$@" >>"%s"\nexit 1\n' "$W/apt-get.log" >"$W/fakebin/apt-get"
chmod +x "$W/fakebin/apt-get"
expect_error_fixed corpus_full_names_missing "apt-get update && apt-get install -y --no-install-recommends" \
    env PATH="$W/fakebin" $M data corpus --out "$W/f1" --source full
err=$(env PATH="$W/fakebin" $M data corpus --out "$W/f1" --source full 2>&1 >/dev/null)
if [ ! -e "$W/apt-get.log" ] && grep -q "xz-utils" <<<"$err" && grep -q "bible-kjv" <<<"$err"; then
    pass corpus_full_installs_nothing
else fail corpus_full_installs_nothing "apt-get ran ($(cat "$W/apt-get.log" 2>/dev/null)) or packages not named: $err"; fi
