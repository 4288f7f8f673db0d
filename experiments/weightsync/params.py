"""Parameter lists of public models, by formula from their published configs (nothing is
downloaded). Each entry is ``(name, shape, role, layer)``; ``role`` decides the sharding
(``expert``: stacked experts ``[E, out, in]``; ``col``: split the output dim (q/k/v,
gate/up, MLA up-projections); ``row``: split the input dim (o_proj, down); ``embed``:
the vocabulary dim; ``vector``: norms and biases; ``router``), ``layer`` is the decoder
layer (``-1`` before the first, ``L`` after the last).

Fused inference layouts (QKV, gate/up, the experts' w13) are concatenations along the
split dim: each component is planned on its own and placed side by side in the fused
buffer by a local copy, so they are listed as components with ``fused`` naming the
buffer.

Sources (the models' public ``config.json`` on Hugging Face):
* Llama-3 8B/70B, Llama-3.1 405B: https://huggingface.co/meta-llama/Meta-Llama-3-8B,
  .../Meta-Llama-3-70B, .../Llama-3.1-405B (hidden, layers, heads, kv heads, FFN, vocab);
* Qwen3-235B-A22B: https://huggingface.co/Qwen/Qwen3-235B-A22B (94 layers, 128 experts,
  moe_intermediate 1536, 64 heads, 4 kv heads, head_dim 128, vocab 151936);
* DeepSeek-V3: https://huggingface.co/deepseek-ai/DeepSeek-V3 (61 layers, first 3 dense,
  256 routed + 1 shared expert, MLA q_lora 1536, kv_lora 512, rope 64, nope 128, v 128,
  vocab 129280; the multi-token-prediction layer is not synced);
* Kimi-K2: https://huggingface.co/moonshotai/Kimi-K2-Instruct (the DeepSeek-V3
  architecture with 384 experts, 64 heads, first 1 dense, vocab 163840).
"""

from __future__ import annotations

from dataclasses import dataclass

from synth.errors import RedistributionError


@dataclass(frozen=True)
class Param:
    name: str
    shape: tuple[int, ...]
    role: str
    layer: int
    fused: str = ""

    @property
    def elems(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


LLAMA = {
    "llama3-8b": dict(hidden=4096, layers=32, heads=32, kv=8, head_dim=128, ffn=14336, vocab=128256),
    "llama3-70b": dict(hidden=8192, layers=80, heads=64, kv=8, head_dim=128, ffn=28672, vocab=128256),
    "llama3-405b": dict(hidden=16384, layers=126, heads=128, kv=8, head_dim=128, ffn=53248, vocab=128256),
}
QWEN3 = {"qwen3-235b": dict(hidden=4096, layers=94, heads=64, kv=4, head_dim=128, experts=128, moe_ffn=1536,
                            vocab=151936)}
MLA = {
    "deepseek-v3": dict(hidden=7168, layers=61, dense=3, ffn=18432, experts=256, shared=1, moe_ffn=2048,
                        heads=128, q_lora=1536, kv_lora=512, nope=128, rope=64, v=128, vocab=129280),
    "kimi-k2": dict(hidden=7168, layers=61, dense=1, ffn=18432, experts=384, shared=1, moe_ffn=2048,
                    heads=64, q_lora=1536, kv_lora=512, nope=128, rope=64, v=128, vocab=163840),
}
MODELS = sorted(LLAMA) + sorted(QWEN3) + sorted(MLA)


def model_params(model: str) -> list[Param]:
    if model in LLAMA:
        return _llama(**LLAMA[model])
    if model in QWEN3:
        return _qwen3(**QWEN3[model])
    if model in MLA:
        return _mla(**MLA[model])
    raise RedistributionError(f"weight-sync: unknown model {model!r}; choose one of {MODELS}")


def _ends(hidden, vocab, layers) -> tuple[list, list]:
    head = [Param("embed_tokens", (vocab, hidden), "embed", -1)]
    tail = [Param("norm", (hidden,), "vector", layers), Param("lm_head", (vocab, hidden), "embed", layers)]
    return head, tail


def _gqa(p, i, hidden, heads, kv, head_dim, qk_norm=False) -> list[Param]:
    """Layer ``i``'s grouped-query attention block and the norms around it (Llama 3; Qwen3
    adds per-head q/k norms); q, k and v are fused as ``qkv_proj`` for inference."""
    out = [Param(p + "input_layernorm", (hidden,), "vector", i),
           Param(p + "q_proj", (heads * head_dim, hidden), "col", i, "qkv_proj"),
           Param(p + "k_proj", (kv * head_dim, hidden), "col", i, "qkv_proj"),
           Param(p + "v_proj", (kv * head_dim, hidden), "col", i, "qkv_proj")]
    if qk_norm:
        out += [Param(p + "q_norm", (head_dim,), "vector", i), Param(p + "k_norm", (head_dim,), "vector", i)]
    return out + [Param(p + "o_proj", (hidden, heads * head_dim), "row", i),
                  Param(p + "post_attention_layernorm", (hidden,), "vector", i)]


def _llama(hidden, layers, heads, kv, head_dim, ffn, vocab) -> list[Param]:
    head, tail = _ends(hidden, vocab, layers)
    out = head
    for i in range(layers):
        p = f"layers.{i}."
        out += _gqa(p, i, hidden, heads, kv, head_dim)
        out += [Param(p + "gate_proj", (ffn, hidden), "col", i, "gate_up_proj"),
                Param(p + "up_proj", (ffn, hidden), "col", i, "gate_up_proj"),
                Param(p + "down_proj", (hidden, ffn), "row", i)]
    return out + tail


def _qwen3(hidden, layers, heads, kv, head_dim, experts, moe_ffn, vocab) -> list[Param]:
    head, tail = _ends(hidden, vocab, layers)
    out = head
    for i in range(layers):
        p = f"layers.{i}."
        out += _gqa(p, i, hidden, heads, kv, head_dim, qk_norm=True)
        out += [Param(p + "mlp.gate", (experts, hidden), "router", i),
                Param(p + "mlp.experts.gate_proj", (experts, moe_ffn, hidden), "expert", i, "experts.w13"),
                Param(p + "mlp.experts.up_proj", (experts, moe_ffn, hidden), "expert", i, "experts.w13"),
                Param(p + "mlp.experts.down_proj", (experts, hidden, moe_ffn), "expert", i)]
    return out + tail


def _mla(hidden, layers, dense, ffn, experts, shared, moe_ffn, heads, q_lora, kv_lora, nope, rope, v,
         vocab) -> list[Param]:
    head, tail = _ends(hidden, vocab, layers)
    out = head
    for i in range(layers):
        p = f"layers.{i}."
        out += [Param(p + "input_layernorm", (hidden,), "vector", i),
                Param(p + "self_attn.q_a_proj", (q_lora, hidden), "col", i),
                Param(p + "self_attn.q_a_layernorm", (q_lora,), "vector", i),
                Param(p + "self_attn.q_b_proj", (heads * (nope + rope), q_lora), "col", i),
                Param(p + "self_attn.kv_a_proj_with_mqa", (kv_lora + rope, hidden), "col", i),
                Param(p + "self_attn.kv_a_layernorm", (kv_lora,), "vector", i),
                Param(p + "self_attn.kv_b_proj", (heads * (nope + v), kv_lora), "col", i),
                Param(p + "self_attn.o_proj", (hidden, heads * v), "row", i),
                Param(p + "post_attention_layernorm", (hidden,), "vector", i)]
        if i < dense:
            out += [Param(p + "mlp.gate_proj", (ffn, hidden), "col", i, "gate_up_proj"),
                    Param(p + "mlp.up_proj", (ffn, hidden), "col", i, "gate_up_proj"),
                    Param(p + "mlp.down_proj", (hidden, ffn), "row", i)]
        else:
            sf = shared * moe_ffn
            out += [Param(p + "mlp.gate.weight", (experts, hidden), "router", i),
                    Param(p + "mlp.gate.e_score_correction_bias", (experts,), "vector", i),
                    Param(p + "mlp.experts.gate_proj", (experts, moe_ffn, hidden), "expert", i, "experts.w13"),
                    Param(p + "mlp.experts.up_proj", (experts, moe_ffn, hidden), "expert", i, "experts.w13"),
                    Param(p + "mlp.experts.down_proj", (experts, hidden, moe_ffn), "expert", i),
                    Param(p + "mlp.shared_experts.gate_proj", (sf, hidden), "col", i, "shared.gate_up_proj"),
                    Param(p + "mlp.shared_experts.up_proj", (sf, hidden), "col", i, "shared.gate_up_proj"),
                    Param(p + "mlp.shared_experts.down_proj", (hidden, sf), "row", i)]
    return out + tail
