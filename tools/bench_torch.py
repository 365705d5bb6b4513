"""PyTorch eager comparison for `mhar bench --torch`: times full training
steps (forward, backward, clipping, AdamW) of HF transformers' Qwen3 in fp32
with eager attention, on the same shape as mhar's bench. Benchmark helper
only; the product never runs Python. Last line: {"tok_per_s": ...}."""
import argparse
import json
import os
import statistics
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

PRESETS = {  # d, layers, heads, kv heads, head dim, ffn (as src/model/config.c)
    "nano": (128, 6, 4, 2, 32, 384), "micro": (256, 8, 4, 2, 64, 768),
    "mini": (384, 12, 6, 2, 64, 1152), "100m": (512, 12, 8, 4, 64, 1536),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="micro", choices=PRESETS)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(os.cpu_count())
    d, L, nh, nkv, hd, ffn = PRESETS[a.preset]
    cfg = Qwen3Config(vocab_size=a.vocab, hidden_size=d, num_hidden_layers=L, num_attention_heads=nh,
                      num_key_value_heads=nkv, head_dim=hd, intermediate_size=ffn,
                      max_position_embeddings=max(2048, a.seq), tie_word_embeddings=True,
                      attn_implementation="eager")
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(cfg).float().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq + 1))
    times = []
    for i in range(a.steps + 1):  # one untimed warm-up step
        t0 = time.perf_counter()
        logits = model(input_ids=ids[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, a.vocab), ids[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i:
            times.append(time.perf_counter() - t0)
    tok_s = a.batch * a.seq / statistics.median(times)
    print(json.dumps({"torch": torch.__version__, "tok_per_s": round(tok_s, 1)}))


if __name__ == "__main__":
    main()
