"""``xla-issues``: reshardings reported in public issues as slow or memory-hungry.

Each case carries the issue it comes from. Where the issue gives the exact shape
and sharding, the case uses it; where it gives only the sharding (an XLA warning
or a DTensor placement), the shape is chosen here and the description says so.
XLA tile assignments are translated to mesh axes: ``{devices=[a,b]<=[n]}`` tiles
dim 0 ``a`` ways (major) and dim 1 ``b`` ways; ``last_tile_dim_replicate`` leaves
the minor mesh factor unused (replicated). DTensor placements ``[S(i), S(j)]`` on a
2-D mesh ``(a, b)`` split dim ``i`` over ``a`` and dim ``j`` over ``b``.
"""

from __future__ import annotations

from experiments.case import Case

SUITE = "xla-issues"


def _c(name, mesh, src, dst, layout, description, ref, dtype="float32"):
    return Case(name=name, suite=SUITE, mesh=mesh, src=src, dst=dst, dtype=dtype,
                layout=layout, description=description, ref=ref)


def cases() -> list[Case]:
    return [
        _c("jax-21562-4x2", "x=4,y=2",
           "[16{y}, 16, 16{x}]", "[16, 16{x,y}, 16]",
           "P('y', None, 'x') -> P(None, ('x','y'), None) on a 4x2 mesh",
           "The exact reproducer: float32[16,16,16]; XLA warns 'Involuntary full "
           "rematerialization' and replicates the whole array.",
           "https://github.com/jax-ml/jax/issues/21562 (ported as "
           "https://github.com/openxla/xla/issues/15207)"),
        _c("jax-21562-4x2-large", "x=4,y=2",
           "[1024{y}, 4096, 4096{x}]", "[1024, 4096{x,y}, 4096]",
           "P('y', None, 'x') -> P(None, ('x','y'), None), realistic size",
           "The same sharding change on a bfloat16[1024,4096,4096] array (shape chosen "
           "here) so that bandwidth, not latency, dominates.",
           "https://github.com/jax-ml/jax/issues/21562", dtype="bfloat16"),
        _c("jax-18591-256", "a=64,b=4",
           "[16384{a,b}, 4096]", "[16384, 4096{a}]",
           "{devices=[256,1]<=[256]} -> {devices=[1,64,4]<=[256] last_tile_dim_replicate}",
           "The full-remat warning quoted in the issue; the shape float32[16384,4096] is "
           "chosen here.", "https://github.com/jax-ml/jax/issues/18591"),
        _c("alpa-701-4", "x=2,y=2",
           "[256{x,y}, 56, 56, 64]", "[256{x}, 56, 56, 64]",
           "{devices=[4,1,1,1]0,1,2,3} -> {devices=[2,1,1,2]0,1,2,3 last_tile_dim_replicate}",
           "Wide-ResNet activations (NHWC; shape chosen here) from the full-remat warnings "
           "in the issue's log.", "https://github.com/alpa-projects/alpa/issues/701"),
        _c("xla-13306-32", "a=2,b=2,c=8",
           "[2{a}, 4{b}, 2048]", "[2, 4{a,b}, 2048]",
           "sharding (2,2,1,8) -> (1,4,1,8) after a reshape for gradient accumulation",
           "The reshape in the issue splits a 4-way batch sharding into (2,2); going back "
           "to (1,4) needs all-to-alls and permutes. bfloat16[2,4,2048] as reported.",
           "https://github.com/openxla/xla/issues/13306", dtype="bfloat16"),
        _c("dtensor-132751-2d", "a=4,b=4",
           "[8192{a}, 8192{b}]", "[8192{b}, 8192{a}]",
           "DTensor [S(0), S(1)] -> [S(1), S(0)] on a 2-D mesh",
           "The issue asks for this without gathering the whole tensor; the shape is "
           "chosen here.", "https://github.com/pytorch/pytorch/issues/132751"),
        _c("dtensor-132751-3d", "a=2,b=2,c=2",
           "[512{a,b}, 512{c}, 512]", "[512{a}, 512{b}, 512{c}]",
           "DTensor [S(0), S(0), S(1)] -> [S(0), S(1), S(2)] on a 3-D mesh",
           "The second example in the issue; shape bfloat16[512,512,512] chosen here.",
           "https://github.com/pytorch/pytorch/issues/132751", dtype="bfloat16"),
        _c("dtensor-131210-nested", "a=4,b=2",
           "[8, 4096{a,b}, 4096]", "[8, 4096{a}, 4096{b}]",
           "DTensor (S(1), S(1)) -> (S(1), S(2)) on a 2-D mesh",
           "The pull request's example: the old algorithm all-gathered both mesh dims; "
           "shape chosen here.", "https://github.com/pytorch/pytorch/pull/131210",
           dtype="bfloat16"),
        _c("autoparallel-462-llama8b-128", "dp=16,tp=8",
           "[4096{dp}, 14336{tp}]", "[4096{tp}, 14336{dp}]",
           "DTensor multi-dim Shard->Shard (S(0)S(1) -> S(1)S(0)) at dp=16, tp=8",
           "LLaMA-3 8B on 128 GPUs: the greedy DTensor planner went through a replicated "
           "intermediate (all-gather + all-to-all). Weight shape from the model.",
           "https://github.com/meta-pytorch/autoparallel/pull/462", dtype="bfloat16"),
        _c("transformers-48802-strided", "dp=2,tp=4",
           "[8192{tp,dp}, 2048]", "[8192{dp,tp}, 2048]",
           "DTensor (_StridedShard(0, sf=2), Shard(0)) -> (Shard(0), Shard(0))",
           "FSDP x TP state-dict loading: DTensor runs 2 sequential all-gathers; the "
           "change is a pure permutation of shards. Shape chosen here.",
           "https://github.com/huggingface/transformers/pull/48802"),
        _c("physicsnemo-1779-transpose", "x=8",
           "[64{x}, 4096, 1024]", "[64, 4096{x}, 1024]",
           "ShardTensor Shard(0) -> Shard(1) transpose",
           "One all-to-all is optimal; the issue removed a second (shape-negotiation) "
           "all-to-all. Shape chosen here.", "https://github.com/NVIDIA/physicsnemo/pull/1779"),
    ]
