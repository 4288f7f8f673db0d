"""``pending-sums``: redistributions whose source is an unreduced (pending) sum.

Each comes from a step of real training where a matmul or a backward pass leaves every
device a partial result: Megatron's row-parallel matmul (tensor parallelism), data
parallel and FSDP gradients, expert-parallel combines. The target says which sums are
reduced on the way (``{U:...}`` names those still pending). Shapes follow the
``transformer`` suite's sources (Llama 3, GPT-2, DeepSeek-V3).
"""

from __future__ import annotations

from experiments.case import Case
from experiments.suites.transformer import DEEPSEEK, LLAMA3, MEGATRON_SP, ZERO

SUITE = "pending-sums"


def _c(name, mesh, src, dst, layout, description, dtype="bfloat16", ref=""):
    return Case(name=name, suite=SUITE, mesh=mesh, src=src, dst=dst, dtype=dtype,
                layout=layout, description=description, ref=ref)


def cases() -> list[Case]:
    return [
        _c("tp-to-sp-8", "dp=2,tp=4", "[8{dp}, 2048, 1024]{U:tp}", "[8{dp}, 2048{tp}, 1024]",
           "Megatron TP -> SP: one reduce-scatter",
           "Row-parallel matmul partial sums become sequence shards.", ref=MEGATRON_SP),
        _c("tp-allreduce-8", "dp=2,tp=4", "[8{dp}, 2048, 1024]{U:tp}", "[8{dp}, 2048, 1024]",
           "Megatron TP without SP: one all-reduce",
           "Row-parallel matmul partial sums become the replicated activation.", ref=MEGATRON_SP),
        _c("tp-to-batch-reduce-early-8", "dp=2,tp=4",
           "[8{dp}, 2048, 1024]{U:tp}", "[8, 2048{tp}, 1024{dp}]",
           "Reduce early: reduce-scatter, then an all-to-all on a quarter of the data",
           "The partial sums are reduce-scattered along the sequence before the data axis "
           "moves to the hidden dim, so the all-to-all carries reduced shards.", ref=MEGATRON_SP),
        _c("fsdp-grad-8", "fsdp=8", "[14336, 4096]{U:fsdp}", "[14336{fsdp}, 4096]",
           "FSDP gradient reduce-scatter", "Llama-3-8B MLP weight gradient.",
           dtype="float32", ref=ZERO),
        _c("hsdp-grad-8", "replica=2,fsdp=4", "[14336, 4096]{U:fsdp,replica}", "[14336{fsdp}, 4096]",
           "HSDP gradient: reduce-scatter over FSDP, all-reduce over replicas",
           "Llama-3-8B MLP weight gradient on 2 replicas x 4-way FSDP.", dtype="float32", ref=ZERO),
        _c("ddp-grad-allreduce-8", "data=8", "[4096, 4096]{U:data}", "[4096, 4096]",
           "Data-parallel gradient all-reduce", "Llama-3-8B attention output projection gradient.",
           dtype="float32", ref=ZERO),
        _c("embedding-grad-uneven-8", "data=8", "[50257, 1024]{U:data}", "[50257{data}, 1024]",
           "ZeRO embedding gradient, uneven vocabulary (50257 over 8)",
           "GPT-2-medium embedding gradient reduce-scattered into padded row shards.",
           dtype="float32", ref=ZERO),
        _c("grad-accumulate-relayout-8", "dp=2,tp=4",
           "[2048{tp}, 1024]{U:dp}", "[2048, 1024{tp}]{U:dp}",
           "Pending gradient moved to another layout before its reduction",
           "A data-parallel partial gradient changes its tensor-parallel layout while the "
           "sum stays pending (gradient accumulation in the optimizer's layout).", ref=ZERO),
        _c("subaxis-grad-8", "fsdp=8", "[4096, 14336]{U:fsdp}",
           "[4096{fsdp:(1)2}, 14336{fsdp:(2)4}]",
           "Gradient reduce-scattered onto a 2 x 4 split of one axis (sub-axes)",
           "An 8-way data-parallel gradient lands in a 2-way FSDP x 4-way TP layout of the "
           "same axis.", dtype="float32", ref=LLAMA3),
        _c("tp-to-sp-512", "data=64,tensor=8",
           "[64{data}, 8192, 8192]{U:tensor}", "[64{data}, 8192{tensor}, 8192]",
           "Megatron TP -> SP at scale", "Llama-3-70B activations on 512 devices.", ref=MEGATRON_SP),
        _c("moe-combine-partial-64", "expert=8,tensor=8",
           "[8{expert}, 4096, 7168]{U:tensor}", "[8{expert}, 4096{tensor}, 7168]",
           "Expert x tensor parallel combine: reduce-scatter of the experts' partial outputs",
           "DeepSeek-V3 hidden 7168: each tensor-parallel rank of an expert holds a partial "
           "sum of the expert's output.", ref=DEEPSEEK),
        _c("hsdp-grad-4096", "replica=16,fsdp=256", "[28672, 8192]{U:fsdp,replica}",
           "[28672{fsdp}, 8192]", "HSDP gradient at scale",
           "Llama-3-70B MLP gradient on 16 replicas x 256-way FSDP.", dtype="float32", ref=LLAMA3),
    ]
