"""Independent PyTorch reference of the mhar model (SPEC §1) and of every
depth-residual scheme of SPEC §2, plus the reference optimiser.

It is written for clarity, not speed: the routing read (SPEC §2.2) materialises
its keys, logits and per-head softmax, and autograd supplies every gradient.
The tests run it in float64 against the C implementation (fp32), so its own
rounding is negligible next to the tolerances (see tests/test_exact.py).

Parameters are a plain dict name -> tensor with exactly the SPEC §3 names and
shapes; `cfg` is the config.json dict (HF Qwen3 or Llama keys + attnres_*).
The family is model_type (or mhar_family): "qwen3" has the per-head q/k
RMSNorm, "llama" has none. RoPE scaling ("rope_scaling": linear or llama3) is
written here from its definition (Llama 3.1's frequency bands), not from
transformers' code.  A residual
scheme is an object with read(s) -> x_s, write(s, o_s) and final() -> h, for
sublayers s = 0 .. 2L-1 (attention of layer i is s = 2i, its MLP s = 2i+1).

Readings chosen where the SPEC leaves room (the C side follows them):
  R1  Route's eps (rho_n = rsqrt(mean(S^2) + eps)) is the config's rms_norm_eps.
  R2  Route's logits use the raw query q (the [1, d] res_proj weight as a [d]
      vector); keys are S_n * rho_n * g. Values are the un-normalised S_n.
  R3  attnres always routes with H = 1 (attnres_num_heads is written as 1);
      mhar uses attnres_num_heads. Both ignore attnres_num_blocks (written 0).
  R4  Blocks (block routing and delta_mh) are runs of ceil(L/N) consecutive
      layers: layer i is in block i // ceil(L/N). If N does not divide L the
      last block is shorter, and there may be fewer than N blocks (L=6, N=4
      gives blocks of 2 layers, 3 blocks). N must be >= 1 for these modes.
  R5  block: b_0 = emb, b_n = sum of the outputs of block n (blocks numbered
      from 1). A sublayer reads Route([b_0..b_{n-1}, p]), p = partial sum of
      the outputs already produced in its block, left out when empty (so the
      very first sublayer reads [emb] alone). The final read routes over every
      completed block b_0 .. b_last with final_res_{proj,norm}.
  R6  hc: A[j, i] multiplies stream i into stream j; all four streams start as
      emb; the write uses the streams from before the write (simultaneous).
  R7  denseformer: dwa_alpha of layer i weights X_0 .. X_{i+1}; Y_0 = emb; the
      layer's two sublayers use the ordinary residual inside the layer.
  R8  delta_mh: each site s has its own null source z_s ([d], the same vector
      at every token) and its own q_s, g_s, a_s (a 0-dim tensor). A sublayer of
      block m (0-based) reads over [z_s, emb, D_1 .. D_m], D_j = sum of the
      outputs of block j-1, i.e. only completed blocks; the running block's
      partial sum is NOT a source. The read is x = r + a_s * Route(...).
      There is no final routing site: h = r. With every a_s = 0 the logits
      equal the baseline's exactly (r + 0 * finite == r).
  R9  RMSNorm and every other op run in the dtype of the parameters (float64
      in the tests), i.e. at least fp32 as SPEC §1 asks.
  R10 Parameters never reached by the loss still get a (zero) gradient, so
      AdamW's weight decay applies to every parameter (torch would skip a
      parameter whose .grad is None).
"""
import math
import zlib

import torch
import torch.nn.functional as F

MODES = ("baseline", "attnres", "mhar", "block", "hc", "denseformer", "delta_mh")
HC_STREAMS = 4
ROUTED_MODES = ("attnres", "mhar", "block", "delta_mh")


# --------------------------------------------------------------------------
# Configuration helpers
# --------------------------------------------------------------------------

def n_layers(cfg):
    return cfg["num_hidden_layers"]


def routing_heads(cfg):
    """H of the Route read (R3)."""
    return 1 if cfg["attnres_mode"] == "attnres" else cfg.get("attnres_num_heads", 1)


def block_size(cfg):
    """Layers per block, ceil(L / N) (R4)."""
    n = cfg.get("attnres_num_blocks", 0)
    if n < 1:
        raise ValueError(f"{cfg['attnres_mode']} needs attnres_num_blocks >= 1")
    return -(-n_layers(cfg) // n)


def is_tied(cfg):
    return cfg.get("tie_word_embeddings", True)


def family(cfg):
    """ "qwen3" (default) or "llama"."""
    return cfg.get("mhar_family") or cfg.get("model_type") or "qwen3"


def has_qk_norm(cfg):
    return family(cfg) == "qwen3"


def site_name(s):
    """Prefix of sublayer s's routing parameters: model.layers.{i}.{attn,mlp}."""
    return f"model.layers.{s // 2}.{'attn' if s % 2 == 0 else 'mlp'}"


# --------------------------------------------------------------------------
# Parameter names and shapes (SPEC §3)
# --------------------------------------------------------------------------

def _base_shapes(cfg):
    d, f = cfg["hidden_size"], cfg["intermediate_size"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    out = [("model.embed_tokens.weight", (cfg["vocab_size"], d))]
    for i in range(n_layers(cfg)):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (d,)),
                (p + "self_attn.q_proj.weight", (nh * hd, d)),
                (p + "self_attn.k_proj.weight", (nkv * hd, d)),
                (p + "self_attn.v_proj.weight", (nkv * hd, d)),
                (p + "self_attn.o_proj.weight", (d, nh * hd))]
        if has_qk_norm(cfg):
            out += [(p + "self_attn.q_norm.weight", (hd,)),
                    (p + "self_attn.k_norm.weight", (hd,))]
        out += [(p + "post_attention_layernorm.weight", (d,)),
                (p + "mlp.gate_proj.weight", (f, d)),
                (p + "mlp.up_proj.weight", (f, d)),
                (p + "mlp.down_proj.weight", (d, f))]
    out.append(("model.norm.weight", (d,)))
    if not is_tied(cfg):
        out.append(("lm_head.weight", (cfg["vocab_size"], d)))
    return out


def _routing_site_shapes(prefix, d):
    return [(prefix + "_res_proj.weight", (1, d)), (prefix + "_res_norm.weight", (d,))]


def _scheme_shapes(cfg):
    mode, d, L = cfg["attnres_mode"], cfg["hidden_size"], n_layers(cfg)
    if mode not in MODES:
        raise ValueError(f"unknown attnres_mode {mode!r}")
    out = []
    for i in range(L):
        p = f"model.layers.{i}."
        for kind in ("attn", "mlp"):
            if mode in ROUTED_MODES:
                out += _routing_site_shapes(p + kind, d)
            if mode == "delta_mh":
                out += [(p + kind + "_null_source", (d,)), (p + kind + "_res_alpha", ())]
            if mode == "hc":
                n = HC_STREAMS
                out += [(p + "hc_alpha_" + kind, (n,)), (p + "hc_A_" + kind, (n, n)),
                        (p + "hc_beta_" + kind, (n,))]
        if mode == "denseformer":
            out.append((p + "dwa_alpha", (i + 2,)))
    if mode in ("attnres", "mhar", "block"):
        out += _routing_site_shapes("model.final", d)
    return out


def param_shapes(cfg):
    """Ordered dict name -> shape of every parameter of this config."""
    return dict(_base_shapes(cfg) + _scheme_shapes(cfg))


# --------------------------------------------------------------------------
# Initialisation: random test weights (default) or the SPEC init of the scheme
# --------------------------------------------------------------------------

def _init_tensor(name, shape, gen, test):
    """One tensor. `test`: perturbed test values; else the SPEC §2 init."""
    def randn(scale):
        return torch.randn(shape, generator=gen, dtype=torch.float32) * scale

    def onehot(k, n):
        return F.one_hot(torch.tensor(k), n).to(torch.float32)

    if name.endswith("_res_proj.weight"):            # routing query, SPEC init 0
        return randn(1.0 / math.sqrt(shape[1])) if test else torch.zeros(shape)
    if name.endswith("_res_norm.weight"):            # routing key norm, init 1
        return 1 + randn(0.1) if test else torch.ones(shape)
    if name.endswith("norm.weight"):                  # every RMSNorm weight
        return 1 + randn(0.1)
    if "hc_alpha_" in name:
        return randn(0.5 if test else 0.02)
    if "hc_A_" in name:
        return torch.eye(shape[0]) + randn(0.1 if test else 0.02)
    if "hc_beta_" in name:
        return onehot(0, shape[0]) + randn(0.2 if test else 0.02)
    if name.endswith("dwa_alpha"):
        return onehot(shape[0] - 1, shape[0]) + (randn(0.1) if test else 0)
    if name.endswith("_null_source"):
        return randn(0.05) if test else torch.zeros(shape)
    if name.endswith("_res_alpha"):                  # non-zero: sign * U(0.25, 0.75)
        if not test:
            return torch.zeros(shape)
        u = torch.rand(2, generator=gen, dtype=torch.float32)
        return ((0.25 + 0.5 * u[0]) * (1 if u[1] < 0.5 else -1)).reshape(shape)
    # Every matrix (embedding, projections, untied head): N(0, 1/fan_in), the
    # unit-gain scale. SPEC init is N(0, 0.02^2); the larger test scale gives
    # an O(1) signal through every sublayer and gradients well above AdamW's
    # eps, where fp32 noise in tiny gradients would swamp the updates.
    return randn(1.0 / math.sqrt(shape[1]))


def init_params(cfg, seed, *, random_routing=True):
    """Random fp32 test weights (the values the C side reads from safetensors):
    matrices N(0, 1/fan_in), norm weights 1 + 0.1 randn, and (by default) every
    scheme parameter perturbed from its SPEC init so that it matters.

    Every tensor has its own generator seeded from (seed, name), so two schemes
    with the same seed share the same base-model weights. random_routing=False
    puts the scheme's own parameters at their SPEC §2 init instead (q = 0,
    g = 1, hc/dwa/delta as specified); the base model stays random.
    """
    params = {}
    for name, shape in param_shapes(cfg).items():
        gen = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()))
        params[name] = _init_tensor(name, tuple(shape), gen, random_routing).to(torch.float32)
    return params


# --------------------------------------------------------------------------
# The base model's pieces (SPEC §1)
# --------------------------------------------------------------------------

def rms_norm(x, w, eps):
    """y = x * rsqrt(mean(x^2) + eps) * w over the last dimension (R9)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_frequencies(cfg):
    """The hd/2 rotation frequencies (radians per position), float64.

    linear: every frequency divided by `factor`. llama3 (Llama 3.1): with the
    original context C, a frequency whose wavelength 2*pi/f is shorter than
    C/high_freq_factor is kept, one longer than C/low_freq_factor is divided
    by `factor`, and in between the two are mixed with weight
    s = (C/wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)
    on the kept one."""
    hd, theta = cfg["head_dim"], cfg.get("rope_theta", 10000.0)
    freq = [theta ** (-2.0 * j / hd) for j in range(hd // 2)]
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", "default")
    if kind == "linear":
        freq = [f / rs["factor"] for f in freq]
    elif kind == "llama3":
        C = rs.get("original_max_position_embeddings", cfg.get("max_position_embeddings"))
        lo, hi, k = rs["low_freq_factor"], rs["high_freq_factor"], rs["factor"]
        out = []
        for f in freq:
            wavelength = 2 * math.pi / f
            if wavelength < C / hi:
                out.append(f)
            elif wavelength > C / lo:
                out.append(f / k)
            else:
                s = (C / wavelength - lo) / (hi - lo)
                out.append(s * f + (1 - s) * f / k)
        freq = out
    elif kind != "default":
        raise ValueError(f"rope type {kind!r}")
    return torch.tensor(freq, dtype=torch.float64)


def rope_tables(T, cfg, dtype):
    """cos, sin [T, hd] for positions 0..T-1, rotate-half layout."""
    inv_freq = rope_frequencies(cfg)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    angle = torch.cat([angle, angle], dim=-1)
    return angle.cos().to(dtype), angle.sin().to(dtype)


def apply_rope(x, cos, sin):
    """x [B, heads, T, hd]: coordinate j pairs with j + hd/2."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def attention(cfg, P, prefix, x, cos, sin):
    """GQA causal self-attention with RoPE (and, for qwen3, per-head q/k RMSNorm)."""
    B, T, _ = x.shape
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, a = cfg["rms_norm_eps"], prefix + "self_attn."
    q = (x @ P[a + "q_proj.weight"].T).view(B, T, nh, hd)
    k = (x @ P[a + "k_proj.weight"].T).view(B, T, nkv, hd)
    v = (x @ P[a + "v_proj.weight"].T).view(B, T, nkv, hd)
    if has_qk_norm(cfg):
        q, k = rms_norm(q, P[a + "q_norm.weight"], eps), rms_norm(k, P[a + "k_norm.weight"], eps)
    q, k = q.transpose(1, 2), k.transpose(1, 2)
    v = v.transpose(1, 2)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    group = nh // nkv                       # query head j reads kv head j // group
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    probs = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    out = (probs @ v).transpose(1, 2).reshape(B, T, nh * hd)
    return out @ P[a + "o_proj.weight"].T


def mlp(P, prefix, x):
    """SwiGLU: down(silu(gate(x)) * up(x))."""
    m = prefix + "mlp."
    return (F.silu(x @ P[m + "gate_proj.weight"].T) * (x @ P[m + "up_proj.weight"].T)) \
        @ P[m + "down_proj.weight"].T


# --------------------------------------------------------------------------
# Route (SPEC §2.2), written out plainly
# --------------------------------------------------------------------------

def route(sources, q, g, H, eps):
    """Read sources S_0..S_{N-1} ([B, T, d] each) with query q [d], key norm g [d]
    and H heads; returns x [B, T, d]."""
    S = torch.stack(sources)                                    # [N, B, T, d]
    N, B, T, d = S.shape
    if d % H:
        raise ValueError(f"routing heads {H} do not divide width {d}")
    rho = torch.rsqrt(S.pow(2).mean(-1, keepdim=True) + eps)    # full-width RMS
    K = S * rho * g                                             # keys
    Kh = K.view(N, B, T, H, d // H)
    logits = (Kh * q.view(H, d // H)).sum(-1)                   # [N, B, T, H]
    w = logits.softmax(dim=0)                                   # per head over n
    x = (w.unsqueeze(-1) * S.view(N, B, T, H, d // H)).sum(0)   # values: raw S
    return x.reshape(B, T, d)


# --------------------------------------------------------------------------
# Residual schemes (SPEC §2): read(s) -> x_s, write(s, o_s), final() -> h
# --------------------------------------------------------------------------

class Scheme:
    """Common state. `trace`, when a list, receives (sources, output) of every
    Route call; the self-checks use it."""

    def __init__(self, cfg, P, emb, trace=None):
        self.cfg, self.P, self.emb, self.trace = cfg, P, emb, trace
        self.d, self.L = cfg["hidden_size"], n_layers(cfg)
        self.eps, self.H = cfg["rms_norm_eps"], routing_heads(cfg)

    def route_at(self, prefix, sources):
        """Route with the q, g of the site named by prefix."""
        q = self.P[prefix + "_res_proj.weight"].reshape(self.d)
        g = self.P[prefix + "_res_norm.weight"]
        x = route(sources, q, g, self.H, self.eps)
        if self.trace is not None:
            self.trace.append((list(sources), x))
        return x

    def layer_ends(self, s):
        return s % 2 == 1


class Baseline(Scheme):
    """§2.1: r = emb; x_s = r; r += o_s; h = r."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.r = self.emb

    def read(self, s):
        return self.r

    def write(self, s, o):
        self.r = self.r + o

    def final(self):
        return self.r


class FullRouting(Scheme):
    """§2.3 attnres / mhar: sources [emb, o_0, ...]; every read routes over all."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.sources = [self.emb]

    def read(self, s):
        return self.route_at(site_name(s), self.sources)

    def write(self, s, o):
        self.sources.append(o)

    def final(self):
        return self.route_at("model.final", self.sources)


class BlockRouting(Scheme):
    """§2.4: sources are block sums b_0 = emb, b_1, ...; plus the partial sum (R5)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.blocks, self.partial, self.size = [self.emb], None, block_size(self.cfg)

    def read(self, s):
        extra = [] if self.partial is None else [self.partial]
        return self.route_at(site_name(s), self.blocks + extra)

    def write(self, s, o):
        self.partial = o if self.partial is None else self.partial + o
        i = s // 2
        if self.layer_ends(s) and ((i + 1) % self.size == 0 or i == self.L - 1):
            self.blocks.append(self.partial)
            self.partial = None

    def final(self):
        return self.route_at("model.final", self.blocks)


class HyperConnections(Scheme):
    """§2.5: four streams; read softmax(alpha)-mix; write H <- A H + beta o (R6)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.streams = [self.emb] * HC_STREAMS

    def _p(self, s, what):
        return self.P[f"model.layers.{s // 2}.hc_{what}_{'attn' if s % 2 == 0 else 'mlp'}"]

    def read(self, s):
        a = self._p(s, "alpha").softmax(dim=0)
        return sum(a[r] * self.streams[r] for r in range(HC_STREAMS))

    def write(self, s, o):
        A, beta, old = self._p(s, "A"), self._p(s, "beta"), self.streams
        self.streams = [sum(A[j, i] * old[i] for i in range(HC_STREAMS)) + beta[j] * o
                        for j in range(HC_STREAMS)]

    def final(self):
        return sum(self.streams) / HC_STREAMS


class DenseFormer(Scheme):
    """§2.6: X_{i+1} = Layer_i(Y_i); Y_{i+1} = sum_j dwa_alpha_i[j] X_j (R7)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.X, self.r = [self.emb], self.emb

    def read(self, s):
        return self.r

    def write(self, s, o):
        self.r = self.r + o
        if self.layer_ends(s):
            self.X.append(self.r)
            alpha = self.P[f"model.layers.{s // 2}.dwa_alpha"]
            self.r = sum(alpha[j] * self.X[j] for j in range(len(self.X)))

    def final(self):
        return self.r


class DeltaMH(Scheme):
    """§2.7: r kept; x_s = r + a_s * Route([z_s, emb, D_1..D_m]); r += o_s (R8)."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.r, self.deltas, self.current = self.emb, [], None
        self.size = block_size(self.cfg)

    def read(self, s):
        site = site_name(s)
        z = self.P[site + "_null_source"].expand_as(self.emb)
        routed = self.route_at(site, [z, self.emb] + self.deltas)
        return self.r + self.P[site + "_res_alpha"] * routed

    def write(self, s, o):
        self.r = self.r + o
        self.current = o if self.current is None else self.current + o
        i = s // 2
        if self.layer_ends(s) and ((i + 1) % self.size == 0 or i == self.L - 1):
            self.deltas.append(self.current)
            self.current = None

    def final(self):
        return self.r


SCHEMES = {"baseline": Baseline, "attnres": FullRouting, "mhar": FullRouting,
           "block": BlockRouting, "hc": HyperConnections, "denseformer": DenseFormer,
           "delta_mh": DeltaMH}


# --------------------------------------------------------------------------
# Forward, loss
# --------------------------------------------------------------------------

def forward(cfg, params, tokens, trace=None):
    """logits [B, T, V] for input tokens [B, T] (dtype of the parameters)."""
    P, eps = params, cfg["rms_norm_eps"]
    emb = P["model.embed_tokens.weight"][tokens]
    T, dtype = tokens.shape[1], emb.dtype
    cos, sin = rope_tables(T, cfg, dtype)
    scheme = SCHEMES[cfg["attnres_mode"]](cfg, P, emb, trace)
    for i in range(n_layers(cfg)):
        p = f"model.layers.{i}."
        x = rms_norm(scheme.read(2 * i), P[p + "input_layernorm.weight"], eps)
        scheme.write(2 * i, attention(cfg, P, p, x, cos, sin))
        x = rms_norm(scheme.read(2 * i + 1), P[p + "post_attention_layernorm.weight"], eps)
        scheme.write(2 * i + 1, mlp(P, p, x))
    h = rms_norm(scheme.final(), P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight"] if is_tied(cfg) else P["lm_head.weight"]
    return h @ head.T


def cross_entropy(logits, targets):
    """Mean next-token cross-entropy over all B*T positions."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def loss(cfg, params, inputs, targets):
    return cross_entropy(forward(cfg, params, inputs), targets)


def as_leaves(params, dtype=torch.float64):
    """Copies of the parameters in `dtype` that require grad."""
    return {k: v.detach().to(dtype).clone().requires_grad_(True) for k, v in params.items()}


def fill_missing_grads(P):
    """R10: a parameter the loss never reached gets an explicit zero gradient."""
    for v in P.values():
        if v.grad is None:
            v.grad = torch.zeros_like(v)


def loss_and_grads(cfg, params, inputs, targets, dtype=torch.float64):
    """(logits, loss, {name: grad}) with the parameters cast to dtype."""
    P = as_leaves(params, dtype)
    logits = forward(cfg, P, inputs)
    value = cross_entropy(logits, targets)
    value.backward()
    fill_missing_grads(P)
    return logits.detach(), value.detach(), {k: v.grad.detach() for k, v in P.items()}


# --------------------------------------------------------------------------
# Reference optimiser: torch AdamW + clip_grad_norm_ + warm-up/cosine schedule,
# and the continued-training recipe: weight decay left off some parameter
# classes, PaLM's z-loss, an EMA of the weights
# --------------------------------------------------------------------------

def param_class(name):
    """The recipe's class of a parameter, from its SPEC §3 name: "embed" (the
    token embedding), "norm" (the base model's RMSNorm weights), "route"
    (every parameter of a residual scheme) or "matrix" (the rest)."""
    if name == "model.embed_tokens.weight":
        return "embed"
    scheme = ("_res_proj.weight", "_res_norm.weight", "_null_source", "_res_alpha", "dwa_alpha")
    if name.endswith(scheme) or ".hc_" in name:
        return "route"
    if name.endswith("norm.weight"):
        return "norm"
    return "matrix"


def z_term(logits, z_loss):
    """z_loss * mean over positions of logsumexp(logits)^2."""
    return z_loss * logits.reshape(-1, logits.shape[-1]).logsumexp(-1).pow(2).mean()


def lr_at(i, peak, warmup, total):
    """Learning rate of 0-based step i."""
    if i < warmup:
        return peak * (i + 1) / warmup
    progress = (i - warmup) / max(1, total - warmup)
    return 0.1 * peak + 0.9 * peak * 0.5 * (1 + math.cos(math.pi * progress))


def train_reference(cfg, params, inputs, targets, *, steps, lr, warmup, dtype=torch.float64):
    """`steps` AdamW steps on one batch. Returns (losses, grad_norms, params):
    the loss before each update, the global gradient norm before clipping,
    and the parameters after the last step."""
    return train_recipe_reference(cfg, params, inputs, targets, steps=steps, lr=lr, warmup=warmup,
                                  dtype=dtype)[:3]


def train_recipe_reference(cfg, params, inputs, targets, *, steps, lr, warmup, wd_exclude=(), z_loss=0.0,
                           ema=0.0, dtype=torch.float64):
    """train_reference with the recipe: no weight decay on the parameters whose
    param_class is in wd_exclude (a second AdamW group with weight_decay 0),
    the objective CE + z_term (the reported loss stays the CE), and with
    ema > 0 an EMA of the weights, ema <- D ema + (1 - D) p after each step
    from the initial weights. Returns (losses, grad_norms, params, z_terms,
    ema params or None)."""
    P = as_leaves(params, dtype)
    leaves = list(P.values())
    groups = [{"params": [v for k, v in P.items() if param_class(k) not in wd_exclude], "weight_decay": 0.1},
              {"params": [v for k, v in P.items() if param_class(k) in wd_exclude], "weight_decay": 0.0}]
    opt = torch.optim.AdamW([g for g in groups if g["params"]], lr=lr, betas=(0.9, 0.95), eps=1e-8)
    avg = {k: v.detach().clone() for k, v in P.items()} if ema else None
    losses, norms, zs = [], [], []
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        logits = forward(cfg, P, inputs)
        value, z = cross_entropy(logits, targets), z_term(logits, z_loss)
        (value + z).backward()
        fill_missing_grads(P)
        norms.append(float(torch.nn.utils.clip_grad_norm_(leaves, 1.0)))
        losses.append(value.item())
        zs.append(z.item())
        for group in opt.param_groups:
            group["lr"] = lr_at(i, lr, warmup, steps)
        opt.step()
        if avg is not None:
            with torch.no_grad():
                for k, v in P.items():
                    avg[k].mul_(ema).add_(v, alpha=1 - ema)
    return losses, norms, {k: v.detach() for k, v in P.items()}, zs, avg
