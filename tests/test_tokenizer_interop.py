"""Interoperability of mhar's tokenizer with the reference libraries.

On real text found on every machine (the Python standard library's .py
files: a deterministic training set of about 6 MB and a disjoint held-out
set of about 3 MB of valid UTF-8, documents joined by <|endoftext|>):
  - `mhar tokenizer train` (vocab 4096) then `mhar tokenizer export`: HF
    tokenizers loads the tokenizer.json and tiktoken the ranks + pattern, and
    both encode the held-out text, and a Unicode torture text (every class of
    character the split pattern distinguishes, assigned in Python's Unicode
    version), to exactly mhar's ids; for mhar's pattern (Llama-3's) and for
    GPT-2's and Qwen2's;
  - decode(encode(text)) is the text, byte for byte;
  - HF import: HF tokenizers' own BpeTrainer builds a byte-level BPE with
    the GPT-2 pre-tokenizer (ByteLevel with its regex) and with the
    Llama-3/Qwen pattern (Split + ByteLevel); `mhar tokenizer import` reads
    it and mhar encodes the held-out text to exactly HF's ids;
  - HF import of a Qwen2/3-style tokenizer (NFC normalizer, Qwen2's
    single-digit pattern), on text of characters assigned by Unicode 3.2 with
    combining sequences: HF's NFC uses older Unicode data than Python's, so
    marks assigned later (e.g. U+08D2) are ordered differently there;
  - the command line refuses bad input with a clear error: an empty file, a
    binary file, a truncated tokenizer, an unsupported normalizer or split
    regex.
Any difference in one id fails the check and prints the first mismatch.
"""
import base64
import json
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MHAR = Path(os.environ.get("MHAR_BIN") or REPO / "mhar")
failures = 0


def report(name, ok, detail=""):
    global failures
    if ok:
        print(f"PASS {name}" + (f" ({detail})" if detail else ""))
    else:
        failures += 1
        print(f"FAIL {name}: {detail}")
    sys.stdout.flush()


def mhar(*args, check=True):
    r = subprocess.run([str(MHAR), *map(str, args)], capture_output=True, text=True, timeout=600)
    if check and r.returncode != 0:
        raise RuntimeError(f"mhar {' '.join(map(str, args))}: {r.stderr.strip()}")
    return r


def read_tokens(path):
    raw = Path(path).read_bytes()
    assert raw[:8] == b"MHARTOK\0"
    width, count = struct.unpack("<I", raw[12:16])[0], struct.unpack("<Q", raw[16:24])[0]
    fmt = "<%d%s" % (count, "H" if width == 2 else "I")
    return list(struct.unpack(fmt, raw[32:32 + count * width]))


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare(name, got, want, decode=None):
    if got == want:
        report(name, True, f"{len(want)} ids")
        return
    i = first_diff(got, want)
    ctx = ""
    if decode:
        try:
            ctx = " near %r" % decode(want[max(0, i - 4):i + 4])
        except Exception:  # noqa: BLE001
            pass
    report(name, False, f"{len(got)} vs {len(want)} ids, first difference at {i}: "
                        f"{got[i:i + 5]} vs {want[i:i + 5]}{ctx}")


def stdlib_files():
    root = Path(sysconfig.get_paths()["stdlib"])
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x not in ("site-packages", "dist-packages", "__pycache__"))
        out += [Path(d) / f for f in sorted(files) if f.endswith(".py")]
    return out


def pick(files, budget, start, step):
    """Files start, start+step, ... until budget bytes of valid UTF-8."""
    got, size = [], 0
    for f in files[start::step]:
        data = f.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if not data or b"\0" in data:
            continue
        got.append((f, data))
        size += len(data)
        if size >= budget:
            break
    return got


def table_classes():
    """Code point -> class from src/tokenizer/unicode_tables.c (non-OTHER only)."""
    text = (REPO / "src" / "tokenizer" / "unicode_tables.c").read_text()
    body = text[text.index("unicode_ranges[]"):text.index("};", text.index("unicode_ranges[]"))]
    out = {}
    for lo, hi, c in re.findall(r"\{0x([0-9A-F]+), 0x([0-9A-F]+), (\d)\}", body):
        for cp in range(int(lo, 16), int(hi, 16) + 1):
            out[cp] = int(c)
    return out


WHITE_SPACE = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029,
               0x202F, 0x205F, 0x3000}


def python_class(cp):
    if cp in WHITE_SPACE:
        return 3
    cat = unicodedata.category(chr(cp))
    return 1 if cat[0] == "L" else 2 if cat[0] == "N" else 0


def torture_text(n, seed, old=False):
    """Characters of every class the patterns tell apart, in runs and mixes;
    with old, only characters Unicode 3.2 already had, and more combining
    sequences (for NFC)."""
    rng = random.Random(seed)
    ucd = unicodedata.ucd_3_2_0 if old else unicodedata
    table = table_classes()
    # Only characters whose class in mhar's generated table (its Unicode
    # version) is the class this Python's Unicode gives: the same set when the
    # versions agree, and no false failure on a Python with newer data.
    assigned = [c for c in range(0x20, 0x30000) if ucd.category(chr(c)) not in ("Cn", "Cs", "Co")
                and table.get(c, 0) == python_class(c)]
    pieces = [" ", "  ", "   ", "\n", "\n\n", "\r\n", "\t", " \n ", "'s", "'S", "'ll", "'RE", "'ve", "'d",
              "'m", "'t", "'\u017f", "'x", "123", "4567", "\u00bd", "\u0663", "(", ")", ".", "!?", "\u00a0",
              "\u3000", "\u2028", "\x0b", "\x0c", "\x85", "ab", "The", "\u00e9", "e\u0301", "\u65e5\u672c",
              "\U0001F600", "\u200d", "''", "--", "==", "    return", "\n        "]
    if old:
        pieces = [p for p in pieces if p != "\U0001F600"] + [
            "a\u0328\u0301", "a\u0301\u0328", "A\u030a", "\u212b", "\u1100\u1161\u11a8", "\uac00\u11a8",
            "\u0344", "q\u0307\u0323", "\u0041\u0300\u0315\u0301"]
    out = []
    for _ in range(n):
        out.append(rng.choice(pieces) if rng.random() < 0.5 else chr(rng.choice(assigned)))
    return "".join(out)


def tiktoken_encoding(prefix):
    import tiktoken
    ranks = {}
    for line in Path(prefix).read_text().splitlines():
        b64, rank = line.split()
        ranks[base64.b64decode(b64)] = int(rank)
    side = json.loads(Path(str(prefix) + ".json").read_text())
    return tiktoken.Encoding("mhar", pat_str=side["pat_str"], mergeable_ranks=ranks,
                             special_tokens=side["special_tokens"], explicit_n_vocab=side["explicit_n_vocab"])


def main():
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    files = stdlib_files()
    train = pick(files, 6 << 20, 0, 2)          # even-numbered files
    held = pick(files, 3 << 20, 1, 2)           # odd-numbered: disjoint
    report("setup.stdlib_text", len(train) > 50 and len(held) > 20,
           f"{len(train)} training files, {len(held)} held-out files")
    w = Path(tempfile.mkdtemp(prefix="mhar_tok_interop."))
    try:
        corpus = w / "corpus"
        corpus.mkdir()
        for i, (_, data) in enumerate(train):
            (corpus / f"{i:05d}.py").write_bytes(data)
        held_text = "<|endoftext|>".join(d.decode("utf-8") for _, d in held)
        (w / "held.txt").write_bytes(held_text.encode("utf-8"))
        tort = torture_text(150000, 1)
        (w / "torture.txt").write_bytes(tort.encode("utf-8"))

        # mhar -> HF, tiktoken: each pattern.
        for pattern in ("llama3", "gpt2", "qwen2"):
            tok = w / f"{pattern}.bpe"
            mhar("tokenizer", "train", "--corpus", corpus, "--vocab", 4096, "--out", tok,
                 "--pattern", pattern, "--quiet")
            r = mhar("tokenizer", "export", "--tokenizer", tok, "--hf", w / f"{pattern}.json",
                     "--tiktoken", w / f"{pattern}.tiktoken")
            side = json.loads((w / f"{pattern}.tiktoken.json").read_text())
            report(f"export.{pattern}.pattern_printed", r.stdout.strip() == side["pat_str"], r.stdout.strip())
            hf = Tokenizer.from_file(str(w / f"{pattern}.json"))
            tt = tiktoken_encoding(w / f"{pattern}.tiktoken")
            for name, src, text in (("held_out", w / "held.txt", held_text), ("torture", w / "torture.txt", tort)):
                out = w / f"{pattern}.{name}.tok"
                mhar("tokenizer", "encode", "--tokenizer", tok, "--in", src, "--out", out)
                ids = read_tokens(out)
                compare(f"hf_encodes_like_mhar.{pattern}.{name}", hf.encode(text, add_special_tokens=False).ids,
                        ids, hf.decode)
                compare(f"tiktoken_encodes_like_mhar.{pattern}.{name}", tt.encode(text, allowed_special="all"),
                        ids, tt.decode)
                dec = w / f"{pattern}.{name}.dec"
                mhar("tokenizer", "decode", "--tokenizer", tok, "--in", out, "--out", dec)
                same = dec.read_bytes() == src.read_bytes()
                report(f"roundtrip.{pattern}.{name}", same, "" if same else "decode(encode(text)) differs")
            hf_dec = hf.decode(read_tokens(w / f"{pattern}.held_out.tok"), skip_special_tokens=False)
            report(f"hf_decodes_mhar_ids.{pattern}", hf_dec == held_text,
                   "" if hf_dec == held_text else "HF's decode of mhar's ids differs from the text")

        # HF-trained byte-level BPE -> mhar import.
        llama3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
        texts = [d.decode("utf-8") for _, d in train]
        for kind in ("gpt2", "llama3"):
            t = Tokenizer(models.BPE())
            if kind == "gpt2":
                t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
            else:
                t.pre_tokenizer = pre_tokenizers.Sequence([
                    pre_tokenizers.Split(Regex(llama3), behavior="isolated"),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
            t.decoder = decoders.ByteLevel()
            trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=["<|endoftext|>"], show_progress=False,
                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
            t.train_from_iterator(texts, trainer)
            path = w / f"hf_{kind}.json"
            t.save(str(path))
            imported = w / f"hf_{kind}.bpe"
            r = mhar("tokenizer", "import", "--hf", path, "--out", imported, check=False)
            report(f"import.{kind}.loads", r.returncode == 0, r.stderr.strip())
            if r.returncode:
                continue
            for name, src, text in (("held_out", w / "held.txt", held_text), ("torture", w / "torture.txt", tort)):
                out = w / f"hf_{kind}.{name}.tok"
                mhar("tokenizer", "encode", "--tokenizer", imported, "--in", src, "--out", out)
                compare(f"import.{kind}.mhar_encodes_like_hf.{name}",
                        read_tokens(out), t.encode(text, add_special_tokens=False).ids, t.decode)

        # Qwen2/3 form: NFC normalizer + Qwen2's pattern.
        qwen = llama3.replace(r"\p{N}{1,3}", r"\p{N}")
        t = Tokenizer(models.BPE())
        t.normalizer = normalizers.NFC()
        t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(qwen), behavior="isolated"),
                                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        t.decoder = decoders.ByteLevel()
        nfc_text = torture_text(100000, 2, old=True)
        trainer = trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>"], show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        t.train_from_iterator(texts[:100] + [torture_text(50000, 3, old=True)], trainer)
        t.save(str(w / "hf_qwen.json"))
        r = mhar("tokenizer", "import", "--hf", w / "hf_qwen.json", "--out", w / "hf_qwen.bpe", check=False)
        report("import.qwen_nfc.loads", r.returncode == 0 and "NFC" in r.stderr, r.stderr.strip())
        if r.returncode == 0:
            (w / "nfc.txt").write_bytes(nfc_text.encode("utf-8"))
            mhar("tokenizer", "encode", "--tokenizer", w / "hf_qwen.bpe", "--in", w / "nfc.txt", "--out",
                 w / "nfc.tok")
            compare("import.qwen_nfc.mhar_encodes_like_hf", read_tokens(w / "nfc.tok"),
                    t.encode(nfc_text, add_special_tokens=False).ids, t.decode)
            mhar("tokenizer", "decode", "--tokenizer", w / "hf_qwen.bpe", "--in", w / "nfc.tok", "--out",
                 w / "nfc.dec")
            same = (w / "nfc.dec").read_bytes() == unicodedata.normalize("NFC", nfc_text).encode("utf-8")
            report("import.qwen_nfc.decode_is_nfc_of_text", same, "" if same else "decode(encode(x)) != NFC(x)")

        # Bad input: clear errors, exit status 1.
        def expect_error(name, pattern, *args):
            r = mhar(*args, check=False)
            report(name, r.returncode == 1 and pattern.lower() in r.stderr.lower(),
                   f"rc {r.returncode}, stderr: {r.stderr.strip()}")
        tok = w / "llama3.bpe"
        (w / "empty.txt").write_bytes(b"")
        (w / "blob.bin").write_bytes(b"\x7fELF\x02\x01\x01\0\0\0binary")
        expect_error("cli.encode_empty_file", "empty", "tokenizer", "encode", "--tokenizer", tok,
                     "--in", w / "empty.txt", "--out", w / "x.tok")
        expect_error("cli.encode_binary_file", "not a text file", "tokenizer", "encode", "--tokenizer", tok,
                     "--in", w / "blob.bin", "--out", w / "x.tok")
        data = tok.read_bytes()
        (w / "cut.bpe").write_bytes(data[:len(data) // 2])
        expect_error("cli.truncated_tokenizer", "truncated", "tokenizer", "encode", "--tokenizer", w / "cut.bpe",
                     "--in", w / "held.txt", "--out", w / "x.tok")
        expect_error("cli.text_is_not_a_tokenizer", "bad magic", "tokenizer", "encode", "--tokenizer",
                     w / "held.txt", "--in", w / "held.txt", "--out", w / "x.tok")
        j = json.loads((w / "hf_llama3.json").read_text())
        j["normalizer"] = {"type": "NFKC"}
        (w / "nfkc.json").write_text(json.dumps(j))
        expect_error("cli.import_unsupported_normalizer", "normalizer", "tokenizer", "import", "--hf",
                     w / "nfkc.json", "--out", w / "x.bpe")
        j["normalizer"] = None
        j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = r"\w+|\s+"
        (w / "regex.json").write_text(json.dumps(j))
        expect_error("cli.import_unknown_regex", "unsupported split regex", "tokenizer", "import", "--hf",
                     w / "regex.json", "--out", w / "x.bpe")
        j = json.loads((w / "hf_llama3.json").read_text())
        j["model"]["vocab"]["zzzz"] = 9999999  # a fuzzer find: one large id sized the tables (7 GB at 888888969)
        (w / "hugeid.json").write_text(json.dumps(j))
        expect_error("cli.import_id_gap", "no gaps", "tokenizer", "import", "--hf", w / "hugeid.json",
                     "--out", w / "x.bpe")
        expect_error("cli.import_not_json", "not a json object", "tokenizer", "import", "--hf", w / "held.txt",
                     "--out", w / "x.bpe")
        for sub in ("train", "encode", "decode", "export", "import"):
            r = mhar("tokenizer", sub, "--help", check=False)
            report(f"cli.help_{sub}", r.returncode == 0 and "usage: mhar tokenizer " + sub in r.stdout, r.stderr)
    finally:
        shutil.rmtree(w, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001
        report("interop.run", False, f"{type(e).__name__}: {e}")
    sys.exit(1 if failures else 0)
