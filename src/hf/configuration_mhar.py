"""Configuration of an mhar run directory for Hugging Face transformers.

mhar writes this file, with modeling_mhar.py, into every run directory whose
residual scheme is not the plain baseline, so that

    AutoModelForCausalLM.from_pretrained(RUN, trust_remote_code=True)

computes the same logits as mhar. The config.json keys are the HF Qwen3 (or
Llama) keys plus the residual scheme (attnres_mode, attnres_num_heads,
attnres_num_blocks, route_query_init) and the base family (mhar_family).

config.json lists one "mhar_<scheme>" entry per layer in layer_types, which a
plain Qwen3Config or LlamaConfig refuses, so a routed run cannot be loaded
into a model that would drop its routing tensors. Inside this config the
attribute holds what transformers' caches and masks need to know, which is
that every layer is full causal attention; to_dict writes the "mhar_" form
back.
"""
from huggingface_hub.dataclasses import strict
from transformers.configuration_utils import PreTrainedConfig
from transformers.modeling_rope_utils import RopeParameters

MODES = ("baseline", "hc", "denseformer", "attnres", "mhar", "block", "delta_mh")
FAMILIES = ("qwen3", "llama")
# Residual schemes whose sources are block sums; they need attnres_num_blocks.
BLOCK_MODES = ("block", "delta_mh")
LAYER_TYPE_PREFIX = "mhar_"
# RoPE variants mhar computes: plain, and the two scalings of Llama checkpoints.
ROPE_TYPES = ("default", "linear", "llama3")


@strict
class MharConfig(PreTrainedConfig):
    model_type = "mhar"
    # "past_key_values" is what older generation code looks for.
    keys_to_ignore_at_inference = ["past_key_values"]

    vocab_size: int = 512
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 4
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    hidden_act: str = "silu"
    max_position_embeddings: int = 2048
    initializer_range: float = 0.02
    rms_norm_eps: float = 1e-6
    use_cache: bool = True
    tie_word_embeddings: bool = True
    rope_parameters: RopeParameters | dict | None = None
    attention_bias: bool = False
    attention_dropout: float | int = 0.0
    layer_types: list[str] | None = None
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    mhar_family: str = "qwen3"
    attnres_mode: str = "mhar"
    attnres_num_heads: int = 1
    attnres_num_blocks: int = 0
    # How mhar initialised the routing queries ("zero" or "normal"); a record
    # of the run, it changes nothing once the weights are loaded.
    route_query_init: str = "zero"

    def __post_init__(self, **kwargs):
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        if self.head_dim is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if self.layer_types is not None:
            want = self.mhar_layer_type
            stray = [t for t in self.layer_types if t not in (want, "full_attention")]
            if stray:
                raise ValueError(f"layer_types {stray[:2]} do not match attnres_mode "
                                 f"{self.attnres_mode!r} (expected {want!r})")
        self.layer_types = ["full_attention"] * self.num_hidden_layers
        super().__post_init__(**kwargs)

    @property
    def mhar_layer_type(self):
        return LAYER_TYPE_PREFIX + self.attnres_mode

    @property
    def routing_heads(self):
        """H of the routing read: attnres is single-head whatever the key says."""
        return 1 if self.attnres_mode == "attnres" else self.attnres_num_heads

    @property
    def block_layers(self):
        """Layers per block, ceil(L / N), for block routing and delta_mh."""
        return -(-self.num_hidden_layers // self.attnres_num_blocks)

    def validate_layer_type(self):
        """Part of @strict validation: one entry per layer, each full causal
        attention or this scheme's "mhar_" type (the base class would refuse
        the latter)."""
        types = self.layer_types
        if types is None:
            return
        if len(types) != self.num_hidden_layers:
            raise ValueError(f"layer_types has {len(types)} entries for {self.num_hidden_layers} layers")
        bad = [t for t in types if t not in ("full_attention", self.mhar_layer_type)]
        if bad:
            raise ValueError(f"layer_types entries must be {self.mhar_layer_type!r}, got {bad[:2]}")

    def validate_architecture(self):
        """Part of @strict validation: the shapes and the scheme make sense."""
        if self.attnres_mode not in MODES:
            raise ValueError(f"attnres_mode {self.attnres_mode!r} is not one of {MODES}")
        if self.mhar_family not in FAMILIES:
            raise ValueError(f"mhar_family {self.mhar_family!r} is not one of {FAMILIES}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"num_key_value_heads {self.num_key_value_heads} does not divide "
                             f"num_attention_heads {self.num_attention_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} is odd; rotate-half RoPE needs it even")
        if self.routing_heads < 1 or self.hidden_size % self.routing_heads:
            raise ValueError(f"attnres_num_heads {self.routing_heads} does not divide "
                             f"hidden_size {self.hidden_size}")
        if self.attnres_mode in BLOCK_MODES and self.attnres_num_blocks < 1:
            raise ValueError(f"attnres_mode {self.attnres_mode!r} needs attnres_num_blocks >= 1")
        rope_type = (self.rope_parameters or {}).get("rope_type", "default")
        if rope_type not in ROPE_TYPES:
            raise ValueError(f"RoPE type {rope_type!r} is not supported (expected one of {ROPE_TYPES})")

    def to_dict(self):
        out = super().to_dict()
        out["layer_types"] = [self.mhar_layer_type] * self.num_hidden_layers
        return out

    def to_diff_dict(self):
        # The identity keys are written even where they equal the defaults:
        # without them a plain Qwen3Config would accept the directory.
        out = super().to_diff_dict()
        full = self.to_dict()
        for key in ("layer_types", "attnres_mode", "attnres_num_heads", "attnres_num_blocks",
                    "mhar_family", "tie_word_embeddings"):
            out[key] = full[key]
        return out


__all__ = ["MharConfig"]
