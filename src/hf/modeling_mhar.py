"""mhar's decoder for Hugging Face transformers: a Qwen3- or Llama-style
Transformer whose sublayers read their inputs from a depth-residual scheme.

mhar writes this file into every run directory it saves (except plain
baseline runs, which are ordinary Qwen3/Llama directories). The tensor names
are mhar's (the HF Qwen3 layout plus the routing tensors), so the run's
model.safetensors loads with no missing or unexpected key:

    model = AutoModelForCausalLM.from_pretrained(RUN, trust_remote_code=True)

The layer runs its two sublayers (attention, then the SwiGLU MLP) and asks a
depth state, created per forward pass, for each sublayer's input (`read`),
hands it each sublayer's output (`write`), and at the end for the hidden state
that the final RMSNorm and the LM head turn into logits (`final`). Sublayer s
is the attention of layer s // 2 when s is even, its MLP when odd.

Every scheme reads and writes per token, across depth only; tokens meet only
in attention. So decoding with a KV cache needs nothing but the attention
keys and values of past tokens: the depth state of the new tokens is built
from scratch at each step.

Readings where the method leaves room, shared with mhar's C implementation:
the routing read's eps is rms_norm_eps; its logits use the raw query (the
[1, d] res_proj weight) against keys S_n * rho_n * g; attnres routes with one
head; blocks are runs of ceil(L / N) layers, the last possibly shorter;
hc's A[j, i] mixes stream i into stream j, from the streams before the write;
dwa_alpha of layer i weights X_0 .. X_{i+1}; delta_mh has a null source, a
query, a key norm and a scalar gate per sublayer, routes over completed block
deltas only and has no final routing read.
"""
from collections.abc import Callable

import torch
from torch import nn
import torch.nn.functional as F

from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.generation import GenerationMixin
from transformers.masking_utils import create_causal_mask
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel

from .configuration_mhar import MharConfig

HC_STREAMS = 4
SITES = ("attn", "mlp")                       # the two sublayers of a layer, in order
ROUTED_MODES = ("attnres", "mhar", "block", "delta_mh")
FINAL_ROUTED_MODES = ("attnres", "mhar", "block")


# ---------------------------------------------------------------------------
# Building blocks

class MharRMSNorm(nn.Module):
    """y = x * rsqrt(mean(x^2) + eps) * w over the last dimension, in fp32."""

    def __init__(self, width, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


class MharRoutingQuery(nn.Module):
    """The pseudo-query q of one routing site, stored as a [1, d] weight."""

    def __init__(self, width):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1, width))


def route(sources, query, key_norm, heads):
    """Route(S, q, g, H): read sources S_n [B, T, d] per token with H heads.

    Keys are the sources RMS-normalised over the full width with weight g
    (key_norm); head h scores source n by q_h . K_{n,h} over its d/H slice,
    takes a softmax over n, and mixes the un-normalised sources' slice h."""
    stacked = torch.stack(sources)                                 # [N, B, T, d]
    n, b, t, d = stacked.shape
    keys = key_norm(stacked).view(n, b, t, heads, d // heads)
    logits = (keys * query.view(heads, d // heads)).sum(-1)        # [N, B, T, H]
    weights = logits.float().softmax(dim=0).to(stacked.dtype)
    mixed = (weights.unsqueeze(-1) * stacked.view(n, b, t, heads, d // heads)).sum(0)
    return mixed.reshape(b, t, d)


class MharRotaryEmbedding(nn.Module):
    """cos, sin [B, T, head_dim] of rotate-half RoPE at the given positions.
    Scaled variants (linear, llama3, ...) come from transformers' own
    ROPE_INIT_FUNCTIONS, so they match the HF models exactly."""

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.rope_type = config.rope_parameters.get("rope_type", "default")
        fn = self.compute_default_rope_parameters if self.rope_type == "default" \
            else ROPE_INIT_FUNCTIONS[self.rope_type]
        inv_freq, self.attention_scaling = fn(config)
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.register_buffer("original_inv_freq", inv_freq.clone(), persistent=False)

    @staticmethod
    def compute_default_rope_parameters(config, device=None, **kwargs):
        theta, dim = config.rope_parameters["rope_theta"], config.head_dim
        exponent = torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim
        return 1.0 / (theta ** exponent), 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        angles = position_ids[..., None].float() * self.inv_freq.float().to(x.device)
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos() * self.attention_scaling, angles.sin() * self.attention_scaling
        return cos.to(x.dtype), sin.to(x.dtype)


def rotate_half(x):
    """Coordinate j pairs with j + hd/2: (x1, x2) -> (-x2, x1)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def eager_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """query [B, nh, T, hd], key/value [B, nkv, S, hd]; query head j reads kv
    head j // (nh / nkv). attention_mask: additive or boolean (True = keep)."""
    group = module.num_key_value_groups
    key, value = key.repeat_interleave(group, dim=1), value.repeat_interleave(group, dim=1)
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        mask = attention_mask[:, :, :, : key.shape[-2]]
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    probs = F.dropout(probs, p=dropout, training=module.training)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), probs


class MharAttention(nn.Module):
    """GQA causal self-attention; Qwen3 adds a per-head RMSNorm on q and k."""

    def __init__(self, config, layer_idx):
        super().__init__()
        self.config, self.layer_idx = config, layer_idx
        self.head_dim = config.head_dim
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads
        self.scaling = self.head_dim ** -0.5
        self.is_causal = True
        d, hd = config.hidden_size, config.head_dim
        self.q_proj = nn.Linear(d, config.num_attention_heads * hd, bias=False)
        self.k_proj = nn.Linear(d, config.num_key_value_heads * hd, bias=False)
        self.v_proj = nn.Linear(d, config.num_key_value_heads * hd, bias=False)
        self.o_proj = nn.Linear(config.num_attention_heads * hd, d, bias=False)
        if config.mhar_family == "qwen3":
            self.q_norm = MharRMSNorm(hd, config.rms_norm_eps)
            self.k_norm = MharRMSNorm(hd, config.rms_norm_eps)

    def forward(self, x, position_embeddings, attention_mask, cache=None, **kwargs):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, -1, self.head_dim)
        k = self.k_proj(x).view(b, t, -1, self.head_dim)
        v = self.v_proj(x).view(b, t, -1, self.head_dim).transpose(1, 2)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = (e.unsqueeze(1) for e in position_embeddings)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        attend: Callable = eager_attention
        if self.config._attn_implementation != "eager":
            attend = ALL_ATTENTION_FUNCTIONS[self.config._attn_implementation]
        out, probs = attend(self, q, k, v, attention_mask, scaling=self.scaling,
                            dropout=self.config.attention_dropout if self.training else 0.0, **kwargs)
        return self.o_proj(out.reshape(b, t, -1)), probs


class MharMLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, config):
        super().__init__()
        d, f = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MharDecoderLayer(nn.Module):
    """One layer: its two pre-normed sublayers and its scheme's parameters
    (tensor names of SPEC §3: {attn,mlp}_res_proj/_res_norm, hc_*_{attn,mlp},
    {attn,mlp}_null_source/_res_alpha, dwa_alpha)."""

    def __init__(self, config, layer_idx):
        super().__init__()
        d, mode = config.hidden_size, config.attnres_mode
        self.layer_idx, self.routing_heads = layer_idx, config.routing_heads
        self.input_layernorm = MharRMSNorm(d, config.rms_norm_eps)
        self.self_attn = MharAttention(config, layer_idx)
        self.post_attention_layernorm = MharRMSNorm(d, config.rms_norm_eps)
        self.mlp = MharMLP(config)
        for site in SITES:
            if mode in ROUTED_MODES:
                setattr(self, f"{site}_res_proj", MharRoutingQuery(d))
                setattr(self, f"{site}_res_norm", MharRMSNorm(d, config.rms_norm_eps))
            if mode == "delta_mh":
                setattr(self, f"{site}_null_source", nn.Parameter(torch.zeros(d)))
                setattr(self, f"{site}_res_alpha", nn.Parameter(torch.zeros(())))
            if mode == "hc":
                setattr(self, f"hc_alpha_{site}", nn.Parameter(torch.zeros(HC_STREAMS)))
                setattr(self, f"hc_A_{site}", nn.Parameter(torch.eye(HC_STREAMS)))
                setattr(self, f"hc_beta_{site}", nn.Parameter(torch.zeros(HC_STREAMS)))
        if mode == "denseformer":
            self.dwa_alpha = nn.Parameter(torch.zeros(layer_idx + 2))

    def route(self, site, sources):
        return route(sources, getattr(self, f"{site}_res_proj").weight,
                     getattr(self, f"{site}_res_norm"), self.routing_heads)

    def forward(self, depth, position_embeddings, attention_mask, cache=None, **kwargs):
        x = self.input_layernorm(depth.read(self, "attn"))
        out, _ = self.self_attn(x, position_embeddings, attention_mask, cache=cache, **kwargs)
        depth.write(self, "attn", out)
        depth.write(self, "mlp", self.mlp(self.post_attention_layernorm(depth.read(self, "mlp"))))


# ---------------------------------------------------------------------------
# Depth states: one object per forward pass; read(layer, site) -> x,
# write(layer, site, out), final() -> h. `model` is the MharModel.

class StandardResidual:
    """baseline: r = emb; x = r; r += o; h = r."""

    def __init__(self, model, emb):
        self.stream = emb

    def read(self, layer, site):
        return self.stream

    def write(self, layer, site, out):
        self.stream = self.stream + out

    def final(self):
        return self.stream


class FullRouting:
    """attnres / mhar: sources [emb, o_0, o_1, ...]; every read routes over
    all of them with its own query; the final read has its own too."""

    def __init__(self, model, emb):
        self.model, self.sources = model, [emb]

    def read(self, layer, site):
        return layer.route(site, self.sources)

    def write(self, layer, site, out):
        self.sources.append(out)

    def final(self):
        return self.model.route_final(self.sources)


def closes_block(model, layer, site):
    """True after the MLP of the last layer of a block (ceil(L/N) layers)."""
    i, size = layer.layer_idx, model.config.block_layers
    return site == "mlp" and ((i + 1) % size == 0 or i == model.config.num_hidden_layers - 1)


class BlockRouting:
    """block: sources are block sums b_0 = emb, b_1, ...; a read also sees the
    partial sum of its own block's outputs so far, when there is one."""

    def __init__(self, model, emb):
        self.model, self.blocks, self.partial = model, [emb], None

    def read(self, layer, site):
        extra = [] if self.partial is None else [self.partial]
        return layer.route(site, self.blocks + extra)

    def write(self, layer, site, out):
        self.partial = out if self.partial is None else self.partial + out
        if closes_block(self.model, layer, site):
            self.blocks.append(self.partial)
            self.partial = None

    def final(self):
        return self.model.route_final(self.blocks)


class HyperConnections:
    """hc: four streams, all emb at first; read softmax(alpha) . H;
    write H_j <- sum_i A[j, i] H_i + beta_j o; h = mean of the streams."""

    def __init__(self, model, emb):
        self.streams = emb.unsqueeze(0).expand(HC_STREAMS, *emb.shape)    # [n, B, T, d]

    def read(self, layer, site):
        mix = getattr(layer, f"hc_alpha_{site}").softmax(dim=0)
        return torch.einsum("r,rbtd->btd", mix, self.streams)

    def write(self, layer, site, out):
        a, beta = getattr(layer, f"hc_A_{site}"), getattr(layer, f"hc_beta_{site}")
        self.streams = torch.einsum("ji,ibtd->jbtd", a, self.streams) + beta.view(-1, 1, 1, 1) * out

    def final(self):
        return self.streams.mean(dim=0)


class DepthWeightedAverage:
    """denseformer: each layer runs with its ordinary residual on Y_i; after
    it, Y_{i+1} = sum_j dwa_alpha_i[j] X_j over X_0 = emb, X_1, ..., X_{i+1}."""

    def __init__(self, model, emb):
        self.outputs, self.stream = [emb], emb

    def read(self, layer, site):
        return self.stream

    def write(self, layer, site, out):
        self.stream = self.stream + out
        if site == "mlp":
            self.outputs.append(self.stream)
            self.stream = torch.einsum("j,jbtd->btd", layer.dwa_alpha, torch.stack(self.outputs))

    def final(self):
        return self.stream


class DeltaRouting:
    """delta_mh: the standard stream r plus sources [z, emb, D_1, ..., D_m]
    (z a learned null source, D_j the sum of the outputs of completed block
    j); x = r + a * Route(sources); r += o; h = r."""

    def __init__(self, model, emb):
        self.model, self.emb, self.stream = model, emb, emb
        self.deltas, self.partial = [], None

    def read(self, layer, site):
        null = getattr(layer, f"{site}_null_source").expand_as(self.emb)
        routed = layer.route(site, [null, self.emb] + self.deltas)
        return self.stream + getattr(layer, f"{site}_res_alpha") * routed

    def write(self, layer, site, out):
        self.stream = self.stream + out
        self.partial = out if self.partial is None else self.partial + out
        if closes_block(self.model, layer, site):
            self.deltas.append(self.partial)
            self.partial = None

    def final(self):
        return self.stream


DEPTH_STATES = {"baseline": StandardResidual, "attnres": FullRouting, "mhar": FullRouting,
                "block": BlockRouting, "hc": HyperConnections, "denseformer": DepthWeightedAverage,
                "delta_mh": DeltaRouting}


# ---------------------------------------------------------------------------
# Models

class MharPreTrainedModel(PreTrainedModel):
    config_class = MharConfig
    config: MharConfig
    base_model_prefix = "model"
    _no_split_modules = ["MharDecoderLayer"]
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _supports_attention_backend = True

    @torch.no_grad()
    def _init_weights(self, module):
        """SPEC init: matrices N(0, 0.02^2) and norms 1 (the base class), routing
        queries 0, hc alpha 0.02 randn, A I + 0.02 randn, beta e_0 + 0.02 randn,
        dwa_alpha one-hot on the layer's own output, delta sources and gates 0."""
        super()._init_weights(module)
        if isinstance(module, MharRoutingQuery):
            init.zeros_(module.weight)
        if isinstance(module, MharModel) and hasattr(module, "final_res_proj"):
            init.zeros_(module.final_res_proj.weight)
        if not isinstance(module, MharDecoderLayer):
            return
        n = HC_STREAMS
        for site in SITES:
            if hasattr(module, f"hc_alpha_{site}"):
                init.copy_(getattr(module, f"hc_alpha_{site}"), 0.02 * torch.randn(n))
                init.copy_(getattr(module, f"hc_A_{site}"), torch.eye(n) + 0.02 * torch.randn(n, n))
                init.copy_(getattr(module, f"hc_beta_{site}"), F.one_hot(torch.tensor(0), n) + 0.02 * torch.randn(n))
            if hasattr(module, f"{site}_null_source"):
                init.zeros_(getattr(module, f"{site}_null_source"))
                init.zeros_(getattr(module, f"{site}_res_alpha"))
        if hasattr(module, "dwa_alpha"):
            init.copy_(module.dwa_alpha, F.one_hot(torch.tensor(module.layer_idx + 1), module.layer_idx + 2))


class MharModel(MharPreTrainedModel):
    """The decoder up to the final RMSNorm: [B, T] token ids -> [B, T, d]."""

    def __init__(self, config):
        super().__init__(config)
        d = config.hidden_size
        self.embed_tokens = nn.Embedding(config.vocab_size, d)
        self.layers = nn.ModuleList(MharDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = MharRMSNorm(d, config.rms_norm_eps)
        if config.attnres_mode in FINAL_ROUTED_MODES:
            self.final_res_proj = MharRoutingQuery(d)
            self.final_res_norm = MharRMSNorm(d, config.rms_norm_eps)
        self.rotary_emb = MharRotaryEmbedding(config)
        self.post_init()

    def route_final(self, sources):
        return route(sources, self.final_res_proj.weight, self.final_res_norm, self.config.routing_heads)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None,
                inputs_embeds=None, use_cache=None, past_key_values=None, **kwargs):
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        cache = cache if cache is not None else past_key_values
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        emb = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        if use_cache and cache is None:
            cache = DynamicCache(config=self.config)
        if position_ids is None:
            past = cache.get_seq_length() if cache is not None else 0
            position_ids = (torch.arange(emb.shape[1], device=emb.device) + past).unsqueeze(0)
        mask = attention_mask
        if not isinstance(mask, dict):
            mask = create_causal_mask(config=self.config, inputs_embeds=emb, attention_mask=attention_mask,
                                      cache=cache, position_ids=position_ids)
        else:
            mask = mask["full_attention"]
        position_embeddings = self.rotary_emb(emb, position_ids)
        depth = DEPTH_STATES[self.config.attnres_mode](self, emb)
        for layer in self.layers:
            layer(depth, position_embeddings, mask, cache=cache, **kwargs)
        return BaseModelOutputWithPast(last_hidden_state=self.norm(depth.final()),
                                       cache=cache if use_cache else None)


class MharForCausalLM(MharPreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config):
        super().__init__(config)
        self.model = MharModel(config)
        self.vocab_size = config.vocab_size
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None,
                inputs_embeds=None, labels=None, use_cache=None, logits_to_keep=0,
                past_key_values=None, **kwargs):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         cache=cache if cache is not None else past_key_values,
                         inputs_embeds=inputs_embeds, use_cache=use_cache, **kwargs)
        hidden = out.last_hidden_state
        if isinstance(logits_to_keep, int) and logits_to_keep > 0:
            hidden = hidden[:, -logits_to_keep:]
        elif not isinstance(logits_to_keep, int):
            hidden = hidden[:, logits_to_keep]
        logits = self.lm_head(hidden)
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        return CausalLMOutputWithPast(loss=loss, logits=logits, cache=out.cache)


__all__ = ["MharForCausalLM", "MharModel", "MharPreTrainedModel"]
