"""Resharding across two meshes (synth.crossmesh): meshes with device ids, the planner,
its memory bound and receive bound, and the plan JSON. Every plan is run through the
numpy data rules and checked element by element (CrossPlan.check)."""

import json

import numpy as np
import pytest

from synth import Mesh, MeshError, PlanError, RedistributionError
from synth.crossmesh import (
    CrossPlan,
    StagingError,
    cross_recv_lower_bound_bytes,
    plan_crossmesh,
    seeded_cases,
)
from synth.interp import InterpreterError

CASES = seeded_cases(20, seed=0)


# -- meshes with device ids -------------------------------------------------------------------
def test_mesh_without_ids_is_unchanged():
    m = Mesh.parse("x=2,y=4")
    assert repr(m) == "Mesh((('x', 2), ('y', 4)))"
    assert str(m) == "x=2,y=4"
    assert m.device_ids == tuple(range(8))
    assert m == Mesh((("x", 2), ("y", 4)))
    assert Mesh.parse("x=2@0-1") == Mesh.parse("x=2")  # the default ids are the default


@pytest.mark.parametrize("text,ids,back", [
    ("a=4@4-7", (4, 5, 6, 7), "a=4@4-7"),
    ("x=2,y=2@0,2,4,6", (0, 2, 4, 6), "x=2,y=2@0,2,4,6"),
    ("p=8@0,2,4,6,1,3,5,7", (0, 2, 4, 6, 1, 3, 5, 7), "p=8@0,2,4,6,1,3,5,7"),
    ("u=3@ 9, 1-2", (9, 1, 2), "u=3@9,1,2"),
])
def test_mesh_device_ids_round_trip(text, ids, back):
    m = Mesh.parse(text)
    assert m.device_ids == ids
    assert str(m) == back
    assert Mesh.parse(str(m)) == m
    assert eval(repr(m), {"Mesh": Mesh}) == m  # the repr reads like the constructor
    assert m.local() == Mesh(m.axes)


@pytest.mark.parametrize("text,words", [
    ("a=4@4-6", "3 device ids for a mesh of 4"),
    ("a=4@1,1,2,3", "appear more than once"),
    ("a=2@x", "is not an id or a range"),
    ("a=2@", "no device ids"),
    ("a=2@3-1", "runs backwards"),
    ("a=2@0-5", "more than the mesh's 2"),
])
def test_mesh_device_id_errors(text, words):
    with pytest.raises(MeshError, match=words):
        Mesh.parse(text)


# -- the planner ------------------------------------------------------------------------------
def test_worked_example_pieces():
    p = plan_crossmesh("a=4@0-3", "[8{a}]", "b=2@4-5", "[8{b}]")
    got = sorted((q.dst, q.src, q.start, q.stop) for q in p.transfer.pieces)
    assert got == [(4, 0, (0,), (2,)), (4, 1, (2,), (4,)), (5, 2, (4,), (6,)), (5, 3, (6,), (8,))]
    blocks = p.check(np.arange(8))
    assert [b.tolist() for b in blocks] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert p.recv_lower_bound_bytes == 16 == p.metrics()["recv_bytes_max_device"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_seeded_cases_exact_and_within_bound(case):
    p = plan_crossmesh(case["src_mesh"], case["src"], case["dst_mesh"], case["dst"])
    p.check(seed=1)  # element by element, every step of every phase
    m = p.metrics()
    assert m["bound_holds"]
    for d, mem in p.device_memory.items():
        assert mem["peak_bytes"] <= mem["own_bound_bytes"] + m["staging_bytes"], d
    # the receive bound never exceeds what the plan makes its busiest device receive
    assert m["recv_lower_bound_bytes"] <= m["recv_bytes_max_device"]


def test_seeded_cases_cover_the_kinds():
    kinds = {c["kind"] for c in CASES}
    assert kinds == {"disjoint", "overlapping", "reshaped"}
    assert any("{U:" in c["src"] for c in CASES) and any("{U:" in c["dst"] for c in CASES)
    assert any(any(s in c["src"] for s in ("21", "30", "35")) for c in CASES)


def test_replicated_source_on_overlapping_devices_moves_nothing():
    p = plan_crossmesh("x=8", "[24, 35]", "y=6@2-7", "[24, 35]")
    assert p.metrics()["transfer_bytes"] == 0
    assert p.staging_bytes == 0  # each device's buffer serves both meshes
    p.check()


def test_broadcast_sends_each_element_across_once():
    # B = dp=2 replicas of tp=2: 'broadcast' splits over dp for the transfer, then gathers on B
    p = plan_crossmesh("a=4@0-3", "[16{a}, 8]", "dp=2,tp=2@4-7", "[16, 8{tp}]")
    assert p.mode == "broadcast"
    assert p.metrics()["transfer_bytes"] == 16 * 8 * 4  # the array once across the groups
    direct = plan_crossmesh("a=4@0-3", "[16{a}, 8]", "dp=2,tp=2@4-7", "[16, 8{tp}]", mode="direct")
    assert direct.metrics()["transfer_bytes"] == 2 * 16 * 8 * 4
    p.check()
    direct.check()


def test_replicas_share_the_sending():
    # every device of A holds the whole array; the 4 receivers are served by 4 senders
    p = plan_crossmesh("a=4@0-3", "[16, 8]", "b=4@4-7", "[16{b}, 8]")
    send = p.transfer.send_bytes()
    assert sorted(send) == [0, 1, 2, 3] and len(set(send.values())) == 1
    p.check()


def test_pending_target_members_share_the_block():
    p = plan_crossmesh("x=4@0-3", "[16{x}, 4]", "y=2,z=2@4-7", "[16{y}, 4]{U:z}")
    m = p.metrics()
    assert m["recv_bytes_max_device"] == m["recv_lower_bound_bytes"] == 4 * 4 * 4
    p.check(seed=3)


def test_check_catches_a_wrong_piece():
    p = plan_crossmesh("a=4@0-3", "[8{a}]", "b=2@4-5", "[8{b}]")
    bad = p.transfer.pieces[0]
    from dataclasses import replace

    wrong = replace(p.transfer, pieces=(replace(bad, src=3),) + p.transfer.pieces[1:])
    with pytest.raises(InterpreterError):
        replace(p, transfer=wrong).check()


def test_json_records_both_meshes_and_the_receives():
    p = plan_crossmesh("x=2,y=2@0-3", "[8{x}, 6]{U:y}", "p=2,q=2@4-7", "[8, 6{q}]")
    d = json.loads(p.to_json())
    assert d["src_mesh"]["devices"] == [0, 1, 2, 3] and d["dst_mesh"]["devices"] == [4, 5, 6, 7]
    assert d["src_mesh"]["text"] == "x=2,y=2" and d["dst_mesh"]["text"] == "p=2,q=2@4-7"
    xfer = [s for s in d["steps"] if s["op"] == "cross_mesh_transfer"]
    assert len(xfer) == 1
    rec = {r["device"]: r["pieces"] for r in xfer[0]["receives"]}
    assert sorted(rec) == [4, 5, 6, 7]
    assert all(q["from"] in (0, 1, 2, 3) and q["bytes"] > 0 for ps in rec.values() for q in ps)
    assert [s["mesh"] for s in d["steps"]][0] == "src"
    assert isinstance(CrossPlan, type)


# -- bad input --------------------------------------------------------------------------------
def test_unreachable_target_is_a_user_error():
    with pytest.raises(PlanError, match="cannot be reached"):
        plan_crossmesh("a=4@0-3", "[8{a}]", "b=2@4-5", "[16{b}]")


def test_staging_cap_below_the_largest_piece_chunks_the_pieces():
    # pieces of 2 rows x 4 (32 bytes) under caps of 16, 12 and 4 bytes: cut into chunks that
    # fit, checked element by element, every chunk and the staging within the cap
    whole = plan_crossmesh("a=4@0-3", "[8{a}, 4]", "b=2@4-5", "[8{b}, 4]")
    assert whole.transfer.largest_piece_bytes == 32
    for cap, chunks in ((16, 8), (12, 16), (4, 32)):
        p = plan_crossmesh("a=4@0-3", "[8{a}, 4]", "b=2@4-5", "[8{b}, 4]", staging_cap_bytes=cap)
        assert len(p.transfer.remote) == chunks
        assert p.transfer.largest_piece_bytes <= cap and p.staging_bytes <= cap and p.bound_holds
        assert p.transfer.recv_bytes() == whole.transfer.recv_bytes()  # the same bytes, cut finer
        out = p.check()
        x = np.arange(32, dtype=np.int64).reshape(8, 4)
        assert np.array_equal(out[0], x[:4]) and np.array_equal(out[1], x[4:])


def test_split_piece_worked_example():
    from synth.crossmesh import Piece, split_piece

    p = Piece(9, 1, (0, 0), (4, 6), 96)
    assert [(c.start, c.stop) for c in split_piece(p, 48, 4)] == [((0, 0), (2, 6)), ((2, 0), (4, 6))]
    assert len(split_piece(p, 40, 4)) == 4
    got = split_piece(p, 20, 4)
    assert [(c.start, c.stop) for c in got[:2]] == [((0, 0), (1, 5)), ((0, 5), (1, 6))] and len(got) == 8
    assert sum(c.nbytes for c in got) == 96


@pytest.mark.parametrize("case", seeded_cases(20, 0), ids=lambda c: c["name"])
def test_seeded_cases_chunked_under_a_third_of_the_largest_piece(case):
    whole = plan_crossmesh(case["src_mesh"], case["src"], case["dst_mesh"], case["dst"], objective="memory")
    cap = max(4, whole.transfer.largest_piece_bytes // 3)
    try:
        p = plan_crossmesh(case["src_mesh"], case["src"], case["dst_mesh"], case["dst"], objective="memory",
                           staging_cap_bytes=cap)
    except StagingError as e:
        # only a device in both meshes holding the other phase's shard can need more than the cap
        assert "other phase" in str(e)
        assert whole.transfer.shared_devices() or set(whole.src_mesh.device_ids) & set(whole.dst_mesh.device_ids)
        return
    assert p.transfer.largest_piece_bytes <= cap and p.staging_bytes <= cap and p.bound_holds
    p.check()


def test_staging_cap_below_one_element():
    with pytest.raises(StagingError, match="below one element"):
        plan_crossmesh("a=4@0-3", "[8{a}, 4]", "b=2@4-5", "[8{b}, 4]", staging_cap_bytes=2)


def test_mesh_beyond_the_machine():
    with pytest.raises(PlanError, match="names device 9, but the machine has 8"):
        plan_crossmesh("a=4@0-3", "[8{a}]", "b=2@8-9", "[8{b}]", num_devices=8)


def test_errors_are_redistribution_errors():
    assert issubclass(StagingError, RedistributionError)


def test_receive_bound_of_a_disjoint_copy():
    # B devices hold nothing: each must receive its whole target block
    assert cross_recv_lower_bound_bytes("a=2@0-1", "[8{a}, 4]", "b=4@2-5", "[8, 4{b}]", 2) == 8 * 1 * 2


# -- on a machine -----------------------------------------------------------------------------
def test_simulated_on_two_nodes_against_the_cut_bound():
    from simulator.crossmesh import plan_on_machine, simulate_crossmesh

    p = plan_on_machine("a=8@0-7", "[4096{a}, 1024]", "dp=2,tp=4@8-15", "[4096, 1024{tp}]", "h100-multinode:2")
    p.check(np.arange(4096 * 1024, dtype=np.int32).reshape(4096, 1024))
    r = simulate_crossmesh(p, "h100-multinode:2")
    # node 1 must take the whole array (16 MiB) through its 8 NICs (8 x 50 GB/s line rate)
    assert r.lower_bound_kind == "nic_in(node 1)"
    assert r.lower_bound_s == pytest.approx(4096 * 1024 * 4 / 400e9)
    assert r.lower_bound_s <= r.time_s
    assert [ph["phase"] for ph in r.phases] == ["on A", "transfer", "on B"]
    assert r.bound_holds


def test_simulator_cli_dst_mesh(capsys):
    from simulator.cli import main

    rc = main(["run", "--hardware", "h100-multinode:2", "--mesh", "a=8@0-7", "--src", "[64{a}, 16]",
               "--dst-mesh", "b=4@8-11", "--dst", "[64, 16{b}]", "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["plan"]["dst_mesh"]["devices"] == [8, 9, 10, 11] and d["time_s"] >= d["lower_bound_s"] > 0
    rc = main(["run", "--hardware", "h100-multinode:2", "--mesh", "a=8@0-7", "--src", "[64{a}, 16]",
               "--dst-mesh", "b=4@14-17", "--dst", "[64, 16{b}]"])
    err = capsys.readouterr().err
    assert rc == 2 and "names device 17, but the machine has 16" in err and len(err.strip().splitlines()) == 1


def test_synth_cli_dst_mesh(capsys):
    from synth.cli import main

    assert main(["plan", "--mesh", "a=4@0-3", "--src", "[8{a}, 4]", "--dst-mesh", "b=2,c=2@4-7",
                 "--dst", "[8{b}, 4]", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["src_mesh"]["devices"] == [0, 1, 2, 3] and d["dst_mesh"]["text"] == "b=2,c=2@4-7"
    assert main(["plan", "--mesh", "a=4@0-3", "--src", "[8{a}, 4]", "--dst-mesh", "b=2,c=2@4,4,5,6",
                 "--dst", "[8{b}, 4]"]) == 2
    err = capsys.readouterr().err
    assert "appear more than once" in err and len(err.strip().splitlines()) == 1


def test_two_device_orders_keep_within_the_bound_as_shardy_does():
    """Shardy's slice_then_reorder_device_ids_then_all_to_all: between two device orders of
    ``x=2,y=2``, the direct transfer to ``[16, 8{x,y}]`` (64 B) stages 192 B on every device;
    slicing, moving ``[16{x,y}, 8]`` whole onto B (``keep``) and one all-to-all stays within
    max(source shard, target shard) (2 collectives, 224 B, as Shardy). Checked element by
    element; the direct plan is still there when asked for."""
    p = plan_crossmesh("x=2,y=2@3,2,1,0", "[16{x}, 8]", "x=2,y=2@3,1,2,0", "[16, 8{x,y}]", 4)
    p.check()
    m = p.metrics()
    assert p.mode == "keep" and p.staging_bytes == 0 and p.bound_holds
    assert (m["num_collectives"], m["recv_bytes_max_device"]) == (2, 224)
    d = plan_crossmesh("x=2,y=2@3,2,1,0", "[16{x}, 8]", "x=2,y=2@3,1,2,0", "[16, 8{x,y}]", 4, mode="direct")
    d.check()
    assert d.metrics()["recv_bytes_max_device"] == 64 and d.staging_bytes == 192


def test_keep_needs_the_axes_on_the_target_mesh():
    with pytest.raises(RedistributionError, match="keep"):
        plan_crossmesh("x=4@0-3", "[16{x}, 8]", "a=2,b=2@4-7", "[16{a}, 8{b}]", 4, mode="keep")
