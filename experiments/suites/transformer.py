"""``transformer``: layout changes that real training and serving jobs perform.

Shapes come from published model configurations (hidden size, FFN size, heads,
head dim, vocabulary, experts):

* Llama 3 8B / 70B / 405B: hidden 4096 / 8192 / 16384, FFN 14336 / 28672 / 53248,
  128-dim heads, 8 KV heads, vocabulary 128256 ("The Llama 3 Herd of Models",
  arXiv:2407.21783, Table 3);
* GPT-3 175B: hidden 12288, FFN 49152 (Brown et al. 2020, arXiv:2005.14165, Table 2.1);
* DeepSeek-V3: hidden 7168, 256 routed experts, expert FFN 2048 (arXiv:2412.19437);
* GPT-2: vocabulary 50257 (Radford et al. 2019, "Language Models are Unsupervised
  Multitask Learners"), hidden 1024 for GPT-2 medium.

Types may carry pending sums (``{U:tensor}``: a row-parallel matmul's output or a
gradient before its reduction), uneven dims (50257 over 8) and sub-axes
(``fsdp:(2)4``); see ``docs`` and :mod:`synth.types`.

Activations are ``bfloat16`` unless noted; logits and optimizer state are ``float32``.
Mesh axis names say what each axis is used for (``data``, ``fsdp``, ``tensor``, ``seq``,
``cp``, ``expert``, ``stage``). Meshes range from 8 to 4096 devices.
"""

from __future__ import annotations

from experiments.case import Case

SUITE = "transformer"

MEGATRON_SP = "Korthikanti et al., Reducing Activation Recomputation in Large Transformer Models, arXiv:2205.05198"
ULYSSES = "Jacobs et al., DeepSpeed Ulysses, arXiv:2309.14509"
ZERO = "Rajbhandari et al., ZeRO, arXiv:1910.02054; Zhao et al., PyTorch FSDP, arXiv:2304.11277"
LLAMA3 = "The Llama 3 Herd of Models, arXiv:2407.21783"
POPE = "Pope et al., Efficiently Scaling Transformer Inference, arXiv:2211.05102"
GSHARD = "Lepikhin et al., GShard, arXiv:2006.16668"
DEEPSEEK = "DeepSeek-V3 Technical Report, arXiv:2412.19437"
XU = "Xu et al., GSPMD, arXiv:2105.04663"


def _c(name, mesh, src, dst, layout, description, dtype="bfloat16", ref=""):
    return Case(name=name, suite=SUITE, mesh=mesh, src=src, dst=dst, dtype=dtype,
                layout=layout, description=description, ref=ref)


def cases() -> list[Case]:
    return [
        # -- tensor / sequence parallelism (Megatron) ----------------------------------
        _c("megatron-sp-to-tp-8", "data=2,tensor=4",
           "[8{data}, 4096{tensor}, 4096]", "[8{data}, 4096, 4096]",
           "Megatron sequence-parallel -> tensor-parallel activations",
           "Llama-3-8B activations [batch, seq, hidden]: the sequence-sharded output of a "
           "LayerNorm is gathered along the sequence before the column-parallel QKV/MLP matmul.",
           ref=MEGATRON_SP),
        _c("megatron-sp-to-heads-32", "data=4,tensor=8",
           "[8{data}, 4096{tensor}, 32, 128]", "[8{data}, 4096, 32{tensor}, 128]",
           "Megatron sequence-parallel -> head-parallel attention",
           "Llama-3-8B query [batch, seq, heads, head_dim]: sequence-sharded activations go "
           "straight to head sharding for tensor-parallel attention.", ref=MEGATRON_SP),
        _c("tp-2d-activation-swap-16", "x=4,y=4",
           "[8, 8192{x}, 4096{y}]", "[8, 8192{y}, 4096{x}]",
           "2-D tensor parallelism: swap the mesh axes of sequence and hidden",
           "Activations between two 2-D sharded matmuls whose operands are laid out on "
           "transposed mesh axes (2-D weight-stationary, x<->y).", ref=XU),
        # -- context parallelism / Ulysses ------------------------------------------------
        _c("ulysses-seq-to-heads-128", "data=8,seq=16",
           "[16{data}, 32768{seq}, 64, 128]", "[16{data}, 32768, 64{seq}, 128]",
           "Ulysses context-parallel -> head-parallel attention",
           "Llama-3-70B query at 32k context: all-to-all from sequence sharding to head "
           "sharding before attention.", ref=ULYSSES),
        _c("ulysses-heads-to-seq-512", "data=16,seq=32",
           "[32{data}, 65536, 64{seq}, 128]", "[32{data}, 65536{seq}, 64, 128]",
           "Ulysses head-parallel -> context-parallel (attention output)",
           "Llama-3-70B attention output at 64k context goes back to sequence sharding.",
           ref=ULYSSES),
        _c("cp-kv-allgather-64", "data=8,cp=8",
           "[8{data}, 32768{cp}, 8, 128]", "[8{data}, 32768, 8, 128]",
           "All-gather-based context parallelism: gather K/V over the context axis",
           "Llama-3-70B keys (8 KV heads) at 32k context: Llama 3 gathers K/V over the "
           "context-parallel group before attention.", ref=LLAMA3),
        _c("dp-to-cp-long-context-4096", "data=64,cp=64",
           "[4096{data,cp}, 8192, 16384]", "[4096{data}, 8192{cp}, 16384]",
           "Data-parallel short-context -> context-parallel long-context stage",
           "Llama-3-405B activations when a job switches from pure batch sharding to "
           "sequence sharding over a 64-way context-parallel axis.", ref=LLAMA3),
        # -- FSDP / ZeRO ------------------------------------------------------------------
        _c("fsdp-gather-llama8b-8", "fsdp=8",
           "[14336{fsdp}, 4096]", "[14336, 4096]",
           "FSDP/ZeRO-3 weight all-gather before use",
           "Llama-3-8B MLP down-projection weight gathered from its FSDP shards.", ref=ZERO),
        _c("fsdp-gather-70b-256", "fsdp=256",
           "[8192{fsdp}, 28672]", "[8192, 28672]",
           "FSDP/ZeRO-3 weight all-gather before use",
           "Llama-3-70B MLP up-projection weight gathered over 256-way FSDP.", ref=ZERO),
        _c("fsdp-tp-gather-256", "fsdp=32,tensor=8",
           "[8192{fsdp}, 28672{tensor}]", "[8192, 28672{tensor}]",
           "FSDP x TP: gather the FSDP axis, keep the tensor-parallel split",
           "Llama-3-70B up-projection weight in 2-D (FSDP=32, TP=8) training.", ref=LLAMA3),
        _c("zero3-flat-to-tp-64", "data=16,tensor=4",
           "[4096{data,tensor}, 14336]", "[4096, 14336{tensor}]",
           "ZeRO-3 flat sharding over all devices -> tensor-parallel column split",
           "Llama-3-8B up-projection weight: fully sharded storage to the TP=4 compute "
           "layout.", ref=ZERO),
        _c("zero1-to-fsdp-optimizer-64", "data=64",
           "[14336, 4096{data}]", "[14336{data}, 4096]",
           "ZeRO-1 optimizer-state shards -> FSDP parameter layout",
           "Llama-3-8B float32 master weights sharded along the other dimension.",
           dtype="float32", ref=ZERO),
        _c("pipeline-to-fsdp-stacked-32", "stage=4,fsdp=8",
           "[80{stage}, 8192{fsdp}, 8192]", "[80, 8192{fsdp,stage}, 8192]",
           "Pipeline-parallel checkpoint (layers over stages) -> FSDP over all devices",
           "Llama-3-70B stacked attention output weights [layer, in, out].", ref=LLAMA3),
        # -- 2-D weight-stationary / serving ---------------------------------------------
        _c("weight-2d-transpose-256", "x=16,y=16",
           "[12288{x}, 49152{y}]", "[12288{y}, 49152{x}]",
           "2-D weight-stationary: transposed layout of the same weight",
           "GPT-3 175B MLP weight when the consumer wants x and y swapped (e.g. the "
           "backward matmul of a 2-D sharded layer).", ref=XU),
        _c("serving-2dws-to-weight-gathered-64", "x=4,y=4,z=4",
           "[8192{x}, 28672{y,z}]", "[8192, 28672{y,z}]",
           "Serving: 2-D weight-stationary -> X-weight-gathered for large batches",
           "Llama-3-70B MLP weight on a TPU v4 4x4x4 slice; prefill with a large batch "
           "gathers the x axis.", ref=POPE),
        _c("kv-prefill-to-decode-64", "seq=8,tensor=8",
           "[32, 8192{seq}, 8{tensor}, 128]", "[32{seq}, 8192, 8{tensor}, 128]",
           "Serving: prefill KV cache (sequence-sharded) -> decode (batch-sharded)",
           "Llama-3-70B KV cache handed from a sequence-parallel prefill to batch-sharded "
           "decode on the same slice.", ref=POPE),
        _c("train-to-serve-70b-1024", "data=8,fsdp=16,tensor=8",
           "[8192{fsdp}, 28672{tensor}]", "[8192, 28672{tensor,fsdp}]",
           "Training (FSDP x TP) -> serving (TP=128, data replicas) checkpoint layout",
           "Llama-3-70B up-projection weight re-laid out for tensor-parallel serving "
           "without going through host storage.", ref=LLAMA3),
        _c("fsdp-tp-transpose-405b-4096", "data=16,fsdp=32,tensor=8",
           "[16384{fsdp}, 53248{tensor}]", "[16384{tensor}, 53248{fsdp}]",
           "3-D parallel training: row-parallel <-> column-parallel weight layout",
           "Llama-3-405B MLP weight, whose consumer wants the FSDP and TP axes on the "
           "other dimensions.", ref=LLAMA3),
        _c("tp8-to-tp4-fsdp2-8", "a=2,b=4",
           "[28672{a,b}, 8192]", "[28672{b}, 8192{a}]",
           "Checkpoint resharding: TP=8 row-parallel -> TP=4 x FSDP=2",
           "Llama-3-70B down-projection weight loaded with a smaller tensor-parallel degree.",
           ref=LLAMA3),
        # -- vocabulary / logits -----------------------------------------------------------
        _c("vocab-logits-to-seq-64", "data=8,tensor=8",
           "[8{data}, 4096, 128256{tensor}]", "[8{data}, 4096{tensor}, 128256]",
           "Vocab-parallel logits -> sequence-sharded loss",
           "Llama-3 float32 logits: the cross-entropy is computed on sequence shards with "
           "the whole vocabulary local.", dtype="float32", ref=MEGATRON_SP),
        _c("embedding-vocab-to-fsdp-128", "fsdp=16,tensor=8",
           "[128256{tensor}, 8192]", "[128256, 8192{fsdp}]",
           "Vocab-parallel embedding table -> FSDP (hidden) sharding",
           "Llama-3-70B embedding table moved from Megatron vocab-parallel to FSDP storage.",
           ref=LLAMA3),
        # -- mixture of experts ---------------------------------------------------------------
        _c("moe-dispatch-64", "expert=64",
           "[64, 64{expert}, 1024, 4096]", "[64{expert}, 64, 1024, 4096]",
           "MoE expert-parallel token dispatch (groups -> experts)",
           "GShard-style dispatched tokens [expert, group, capacity, hidden]: all-to-all "
           "from group sharding to expert sharding.", ref=GSHARD),
        _c("moe-combine-128", "data=4,expert=32",
           "[64{expert}, 128{data}, 512, 4096]", "[64, 128{data,expert}, 512, 4096]",
           "MoE expert-parallel combine (experts -> groups)",
           "Expert outputs return to the token groups they came from.", ref=GSHARD),
        _c("moe-dispatch-2d-2048", "data=32,expert=64",
           "[64, 2048{data,expert}, 256, 7168]", "[64{expert}, 2048{data}, 256, 7168]",
           "MoE dispatch on a 2-D (data x expert) mesh",
           "DeepSeek-V3-sized hidden (7168): tokens sharded over all devices are dispatched "
           "to experts while staying data-sharded.", ref=DEEPSEEK),
        _c("moe-expert-weights-ep-to-eptp-256", "expert=32,tensor=8",
           "[256{expert,tensor}, 7168, 2048]", "[256{expert}, 7168, 2048{tensor}]",
           "MoE expert weights: pure expert parallelism -> expert x tensor parallelism",
           "DeepSeek-V3 routed-expert weights [expert, hidden, ffn] when 8 devices share "
           "each expert group.", ref=DEEPSEEK),
        _c("decode-batch-to-hidden-16", "x=16",
           "[16{x}, 8192]", "[16, 8192{x}]",
           "Serving decode: batch-sharded activations -> hidden-sharded (1-D weight-stationary)",
           "Llama-3-70B decode step, one token per sequence.", ref=POPE),
        # -- pending sums: TP <-> SP, FSDP gradients ------------------------------------------
        _c("megatron-tp-to-sp-8", "dp=2,tp=4",
           "[8{dp}, 2048, 1024]{U:tp}", "[8{dp}, 2048{tp}, 1024]",
           "Megatron tensor-parallel -> sequence-parallel (row-parallel matmul output)",
           "The row-parallel output projection leaves each tensor-parallel rank a partial sum; "
           "sequence parallelism reduce-scatters it along the sequence.", ref=MEGATRON_SP),
        _c("megatron-tp-to-sp-64", "data=8,tensor=8",
           "[8{data}, 8192, 8192]{U:tensor}", "[8{data}, 8192{tensor}, 8192]",
           "Megatron tensor-parallel -> sequence-parallel (row-parallel matmul output)",
           "Llama-3-70B hidden 8192 at 8k context: the MLP down-projection's partial sums "
           "become sequence shards.", ref=MEGATRON_SP),
        _c("megatron-tp-allreduce-8", "dp=2,tp=4",
           "[8{dp}, 2048, 1024]{U:tp}", "[8{dp}, 2048, 1024]",
           "Megatron tensor parallelism without SP: all-reduce the row-parallel output",
           "Classic Megatron-LM: the partial sums of the row-parallel matmul are all-reduced "
           "so every rank holds the replicated activation.", ref=MEGATRON_SP),
        _c("fsdp-grad-reduce-scatter-8", "fsdp=8",
           "[14336, 4096]{U:fsdp}", "[14336{fsdp}, 4096]",
           "FSDP/ZeRO gradient reduce-scatter",
           "Llama-3-8B MLP down-projection weight gradient: each rank's local gradient is a "
           "partial sum over the data it saw; FSDP reduce-scatters it into the weight's shards.",
           dtype="float32", ref=ZERO),
        _c("hsdp-grad-8", "replica=2,fsdp=4",
           "[14336, 4096]{U:fsdp,replica}", "[14336{fsdp}, 4096]",
           "Hybrid-sharded data parallelism (HSDP) gradient",
           "Gradient summed over both the FSDP group (reduce-scatter) and the replica groups "
           "(all-reduce of the shards).", dtype="float32", ref=ZERO),
        # -- uneven dims and sub-axes ---------------------------------------------------------
        _c("vocab-50257-logits-to-seq-8", "tensor=8",
           "[4096, 50257{tensor}]", "[4096{tensor}, 50257]",
           "Vocab-parallel logits -> sequence-sharded loss, uneven vocabulary",
           "GPT-2's 50257-token vocabulary does not divide by 8: shards of 6283 columns, the "
           "last holding 6276 and 7 columns of padding.", dtype="float32", ref=MEGATRON_SP),
        _c("vocab-50257-embedding-grad-8", "data=8",
           "[50257, 1024]{U:data}", "[50257{data}, 1024]",
           "ZeRO embedding gradient with an uneven vocabulary",
           "GPT-2-medium embedding table gradient (50257 x 1024) reduce-scattered over 8 "
           "data-parallel ranks: 6283 rows each, padding on the last.", dtype="float32", ref=ZERO),
        _c("heads-6way-ulysses-6", "seq=6",
           "[8, 4096{seq}, 32, 128]", "[8, 4096, 32{seq}, 128]",
           "Ulysses context-parallel -> head-parallel with 6-way parallelism",
           "Llama-3-8B query (32 heads) on a 6-way axis: 32 heads do not divide by 6 (shards "
           "of 6 heads, the last holding 2).", ref=ULYSSES),
        _c("fsdp8-to-fsdp2-tp4-subaxes-8", "fsdp=8",
           "[4096{fsdp}, 14336]", "[4096{fsdp:(1)2}, 14336{fsdp:(2)4}]",
           "8-way FSDP -> 2-way FSDP x 4-way TP on the same axis (sub-axes)",
           "Llama-3-8B up-projection weight: the minor factor of the FSDP axis becomes a "
           "tensor-parallel split of the other dim; only that factor moves.", ref=LLAMA3),
    ]
