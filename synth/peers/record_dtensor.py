"""Record DTensor's own plans for ``dtensor.json`` (not imported by the project).

Runs PyTorch DTensor's redistribute planner in one process, on a fake process group
(no devices, no communication), for the (mesh, global shape, placements) of each
redistribute in ``test/distributed/tensor/test_redistribute.py``, and prints the suite
JSON: per case the greedy plan (``ops``) and the min-cost plan (``alt.min_cost``), each
op with our type after it. Needs torch (tested with 2.13.0 CPU) in a separate
environment, never the project's::

    python -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0
    /tmp/torchvenv/bin/python synth/peers/record_dtensor.py > dtensor_raw.json

(then one case per line, ``[k]`` numbering repeated tests; see the suite's ``source``).
"""


def main():
    import itertools
    import json
    import logging

    import torch
    import torch.distributed as dist
    import torch.testing._internal.distributed.fake_pg  # noqa: F401 (registers the "fake" backend)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard
    from torch.distributed.tensor._dtensor_spec import DTensorSpec, ShardOrderEntry, TensorMeta
    from torch.distributed.tensor._redistribute import (
        _FlattenedTransformInfo,
        _gen_transform_infos_non_cached,
        _optimize_transform_infos,
    )
    logging.disable(logging.WARNING)
    R, P = Replicate(), Partial()
    S = Shard
    NAMES = "abc"
    T = "test_redistribute.py"

    cases = []
    def add(test, mesh, shape, src, dst, src_order=None, dst_order=None, flatten=(), note=None):
        cases.append(dict(test=test, mesh=mesh, shape=shape, src=src, dst=dst, src_order=src_order,
                          dst_order=dst_order, flatten=flatten, note=note))

    # RedistributeTest (world 4)
    for shp, d in [((12, 3), 0), ((13, 3), 0), ((14, 3), 0), ((3, 12), 1), ((3, 13), 1), ((3, 14), 1)]:
        add("test_shard_to_replicate_forward_backward", (4,), shp, [S(d)], [R])
        add("test_replicate_to_shard_forward_backward", (4,), shp, [R], [S(d)])
        add("test_partial_to_shard", (4,), shp, [P], [S(d)])
    add("test_replicate_to_replicate_forward_backward", (4,), (12, 3), [R], [R])
    add("test_partial_to_partial_forward_backward", (4,), (12, 3), [P], [P])
    add("test_partial_to_replicate_forward_backward", (4,), (12, 3), [P], [R])
    add("test_replicate_to_partial", (4,), (12, 3), [R], [P])
    add("test_replicate_to_partial", (2, 2), (12, 3), [R, R], [P, P])
    for shp, s, d in [((1, 64, 48), [S(1), S(1)], [S(1), R]), ((1, 64, 48), [S(2), S(2)], [S(2), R]),
                      ((4, 64, 48), [S(1), S(1)], [S(1), R])]:
        add("test_all_gather_optimization", (2, 2), shp, s, d,
            note=f"shape scaled down from ({shp[0]}, 8192, 6144) so every plan is checked element by "
                 "element; the dims still divide the mesh, so the plans are the same")
    for shp in [(10, 5), (9, 5), (3, 5), (1, 3)]:
        for pl in ([S(0), S(0)], [S(0), S(1)]):
            add("test_redistribute_uneven_sharding", (2, 2), shp, pl, [R, R], note="full_tensor() of the sharded tensor")
    for shp in [(8, 8), (8, 8, 8), (8, 5), (5, 8), (5, 5)]:
        for s, d in [([S(0)], [S(1)]), ([S(1)], [S(0)])]:
            add("test_redistribute_shard_dim_change", (4,), shp, s, d)
        pairs = [([S(0), S(1)], [S(0), S(0)]), ([S(0), S(1)], [S(1), S(0)]), ([S(0), S(0)], [S(1), S(1)])]
        if len(shp) > 2:
            pairs += [([S(0), S(2)], [S(1), S(0)]), ([S(1), S(1)], [S(1), S(2)])]
        for s, d in pairs:
            add("test_redistribute_shard_dim_change", (2, 2), shp, s, d)
    for src in [S(1), R, P]:
        for dst in [S(0), S(1), R]:
            add("test_one_chunk_mesh", (4, 1), (64, 8), [S(0), src], [S(0), dst])
    for s, d, shp in [([P, S(0)], [P, S(0)], (24, 8)), ([P, S(0)], [P, S(1)], (24, 8)), ([S(0), P], [R, P], (24, 8))]:
        add("test_redistribute_to_partial", (2, 2), shp, s, d)
    # MultiDimRedistributeTest (world 8)
    poss = [R, S(0), S(1)]
    for ins in itertools.product(poss + [P], repeat=2):
        for outs in itertools.product(poss, repeat=2):
            add("test_multi_dim_mesh", (4, 2), (16, 24), list(ins), list(outs))
    for s, d in [([S(0), S(0), S(0)], [S(1), S(1), S(1)]), ([S(0), S(1), S(0)], [S(1), S(0), S(0)]),
                 ([S(0), S(1), S(2)], [S(2), S(1), S(0)]), ([S(1), S(0), S(0)], [R, S(0), S(0)]),
                 ([S(1), R, S(0)], [R, S(0), S(0)]), ([S(0), S(0), S(1)], [S(0), S(1), S(2)])]:
        add("test_redistribute_shard_dim_multi_dim_mesh", (2, 2, 2), (8, 8, 8), s, d)
    # DistributeWithDeviceOrderTest
    E = ShardOrderEntry
    for (s, so), (d, do) in [
            (([S(0)] * 3, (E(0, (0, 1, 2)),)), ([R, S(0), S(0)], (E(0, (1, 2)),))),
            (([S(0)] * 3, (E(0, (1, 0, 2)),)), ([R, S(0), S(0)], (E(0, (1, 2)),))),
            (([S(0)] * 3, (E(0, (1, 0, 2)),)), ([S(0), S(0), R], (E(0, (0, 1)),))),
            (([S(0), S(0), R], (E(0, (0, 1)),)), ([R, S(1), S(0)], (E(0, (2,)), E(1, (1,))))),
            (([S(0)] * 3, (E(0, (0, 1, 2)),)), ([S(1)] * 3, (E(1, (0, 1, 2)),)))]:
        add("test_ordered_redistribute" if d != [S(1)] * 3 else "test_force_min_cost_redistribution_plan",
            (2, 2, 2), (8, 8, 8), s, d, so, do)
    # MultiDimRedistributeOptimizationTest (flattened meshes)
    for mshape, fl, s, d in [
            ((4, 2), [("a", "b")], [P, P], [R, R]), ((4, 2), [("a", "b")], [P, P], [S(0), S(0)]),
            ((4, 2), [("a", "b")], [P, P], [S(0), S(1)]), ((2, 2, 2), [("a", "b")], [P, P, S(0)], [S(0), S(0), S(0)]),
            ((2, 2, 2), [("a", "b", "c")], [P, P, P], [R, R, R]), ((2, 2, 2), [("a", "c")], [P, S(0), P], [R, R, R]),
            ((2, 2, 2), [("a", "c")], [P, R, P], [R, R, R]), ((4, 2), [("a", "b")], [S(0), S(0)], [R, R]),
            ((4, 2), [("a", "b")], [S(0), S(1)], [R, R]), ((2, 2, 2), [("a", "b")], [P, P, R], [S(0), S(1), R])]:
        add("test_multi_dim_redistribute", mshape, (16,) * max(3, len(mshape)), s, d, flatten=fl)

    def ptext(p):
        if isinstance(p, Shard):
            return f"S({p.dim})"
        return "R" if p.is_replicate() else "P"

    def our_type(shape, placements, order):
        # order: {tensor_dim: [mesh dims major..minor]}; partial mesh dims -> unreduced
        dims = [[] for _ in shape]
        for d, mds in order.items():
            dims[d] = [NAMES[m] for m in mds]
        unred = [NAMES[i] for i, p in enumerate(placements) if p.is_partial()]
        s = "[" + ", ".join(str(n) + ("{" + ",".join(a) + "}" if a else "") for n, a in zip(shape, dims)) + "]"
        return s + ("{U:" + ",".join(unred) + "}" if unred else "")

    def default_order(placements, given=None):
        order = {}
        if given:
            for e in given:
                order[e.tensor_dim] = list(e.mesh_dims)
            return order
        for i, p in enumerate(placements):
            if isinstance(p, Shard):
                order.setdefault(p.dim, []).append(i)
        return order

    def step_ops(infos, mesh, shape, src_pl, src_order):
        """Our op records for DTensor's transform infos, with the type after each."""
        order = {k: list(v) for k, v in default_order(src_pl, src_order).items()}
        pl = list(src_pl)
        out = []
        for info in infos:
            dims = list(info.original_mesh_dims) if isinstance(info, _FlattenedTransformInfo) else [info.mesh_dim]
            a, b = info.src_dst_placements
            axes = [NAMES[m] for m in dims]
            # track placements/order
            for m in dims:
                pa = pl[m]
                if isinstance(pa, Shard):
                    order[pa.dim].remove(m)
                pl[m] = b if not isinstance(b, Shard) else Shard(b.dim)
                if isinstance(b, Shard):
                    order.setdefault(b.dim, []).append(m)
            order = {k: v for k, v in order.items() if v}
            if a.is_partial() and b.is_replicate():
                op = {"op": "all_reduce", "axes": axes}
            elif a.is_partial() and isinstance(b, Shard):
                op = {"op": "reduce_scatter", "dims": [axes if i == b.dim else [] for i in range(len(shape))]}
            elif isinstance(a, Shard) and b.is_replicate():
                op = {"op": "all_gather", "dims": [axes if i == a.dim else [] for i in range(len(shape))]}
            elif isinstance(a, Shard) and isinstance(b, Shard):
                op = {"op": "all_to_all", "moves": [{"axes": axes, "src_dim": a.dim, "dst_dim": b.dim}]}
            elif a.is_replicate() and isinstance(b, Shard):
                op = {"op": "all_slice", "dims": [axes if i == b.dim else [] for i in range(len(shape))]}
            elif a.is_replicate() and b.is_partial():
                op = {"op": "replicated_to_unreduced", "axes": axes}
            elif isinstance(a, Shard) and b.is_partial():
                op = {"op": "sharded_to_unreduced", "dims": [axes if i == a.dim else [] for i in range(len(shape))]}
            else:
                raise ValueError(f"unknown transform {a} -> {b}")
            op["out"] = our_type(shape, pl, order)
            op["note"] = f"DTensor mesh dim(s) {dims}: {ptext(a)} -> {ptext(b)}"
            out.append(op)
        return out

    out_cases, skipped = [], []
    cur_world = None
    for c in cases:
        world = 1
        for n in c["mesh"]:
            world *= n
        if world != cur_world:
            if cur_world is not None:
                dist.destroy_process_group()
            dist.init_process_group(backend="fake", rank=0, world_size=world, store=dist.HashStore())
            cur_world = world
        names = tuple(NAMES[:len(c["mesh"])])
        mesh = init_device_mesh("cpu", c["mesh"], mesh_dim_names=names)
        for fl in c["flatten"]:
            mesh[fl]._flatten("_".join(fl))
        shape = c["shape"]
        meta = TensorMeta(torch.Size(shape), torch.empty(shape, device="meta").stride(), torch.float32)
        kw_s = {"shard_order": c["src_order"]} if c["src_order"] else {}
        kw_d = {"shard_order": c["dst_order"]} if c["dst_order"] else {}
        src = DTensorSpec(mesh, tuple(c["src"]), tensor_meta=meta, **kw_s)
        dst = DTensorSpec(mesh, tuple(c["dst"]), tensor_meta=meta, **kw_d)
        mesh_text = ",".join(f"{n}={s}" for n, s in zip(names, c["mesh"]))
        rec = {"file": T, "test": c["test"], "mesh": mesh_text,
               "src": our_type(shape, c["src"], default_order(c["src"], c["src_order"])),
               "dst": our_type(shape, c["dst"], default_order(c["dst"], c["dst_order"])), "itemsize": 4,
               "note": f"DTensor {[ptext(p) for p in c['src']]} -> {[ptext(p) for p in c['dst']]}"
                       + (f", shard orders {c['src_order']} -> {c['dst_order']}" if c["src_order"] else "")
                       + (f", flattened {c['flatten']}" if c["flatten"] else "") + (f"; {c['note']}" if c["note"] else "")}
        plans = {}
        for key, graph in (("greedy", False), ("min_cost", True)):
            infos = _gen_transform_infos_non_cached(src, dst, use_graph_based_transform=graph)
            opt = _optimize_transform_infos(infos, mesh, src.placements, dst.placements)
            plans[key] = step_ops(opt, mesh, shape, c["src"], c["src_order"])
        rec["ops"] = plans["greedy"]
        rec["alt"] = {"min_cost": plans["min_cost"]}
        out_cases.append(rec)
    dist.destroy_process_group()
    src_note = ("DTensor's own planner, run in one process (torch " + torch.__version__ + ", fake process group) on "
                "the (mesh, shape, placements) of each redistribute in the tests: 'ops' is the default greedy plan "
                "(_gen_transform_infos, then _optimize_transform_infos with the flattened meshes the test creates), "
                "'alt.min_cost' the plan under use_min_cost_redistribution_plan; one op per DTensor collective")
    seen = {}
    for rec in out_cases:  # one case per redistribute: number repeated tests in their order
        k = seen.get(rec["test"], 0)
        seen[rec["test"]] = k + 1
        rec["test"] = f"{rec['test']}[{k}]"
    suite = {"peer": "dtensor", "source": {"repo": "pytorch/pytorch", "torch": torch.__version__,
             "files": ["torch/distributed/tensor/_redistribute.py", "test/distributed/tensor/test_redistribute.py"],
             "note": src_note + "; a test that redistributes several times is one case per redistribute, "
             "numbered [k] in the test's order"}, "cases": out_cases, "not_expressible": skipped}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(suite[k])}," for k in ("peer", "source")]
    for key, last in (("cases", False), ("not_expressible", True)):
        items = suite[key]
        lines.append(f" {json.dumps(key)}: [")
        lines += ["  " + json.dumps(c) + ("," if i < len(items) - 1 else "") for i, c in enumerate(items)]
        lines.append(" ]" + ("" if last else ","))
    print("\n".join(lines + ["}"]))


if __name__ == "__main__":
    main()
