"""Whole-model weight sync (python -m experiments weight-sync): parameter lists by formula,
the bucketed schedule against the cut lower bound and the baselines, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.weightsync import load_sync_config, plan_sync
from experiments.weightsync.params import model_params

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "experiments/configs/weight-sync").glob("*.yaml"))

SMALL = """
name: small
model: llama3-8b
source: "a test"
dtype: bf16
target_dtype: fp8
machine: h100-multinode:2
staging_cap_bytes: {cap}
train:
  mesh: "fsdp=8@0-7"
  rules: {{expert: [[fsdp], [], []], col: [[fsdp], []], row: [[], [fsdp]], embed: [[fsdp], []], vector: [[]],
          router: [[], []]}}
infer:
  mesh: "{infer}"
  rules: {{expert: [[tp], [], []], col: [[tp], []], row: [[], [tp]], embed: [[tp], []], vector: [[]],
          router: [[], []]}}
"""


def _write(tmp_path, cap=1 << 30, infer="dp=2,tp=4@8-15", extra=""):
    p = tmp_path / "c.yaml"
    p.write_text(SMALL.format(cap=cap, infer=infer) + extra)
    return p


@pytest.mark.parametrize("model,billions", [("llama3-8b", 8.03), ("llama3-70b", 70.55), ("llama3-405b", 405.85),
                                            ("qwen3-235b", 235.09), ("deepseek-v3", 671.03)])
def test_parameter_counts_match_the_published_sizes(model, billions):
    n = sum(p.elems for p in model_params(model)) / 1e9
    assert n == pytest.approx(billions, rel=5e-3)


def test_kimi_k2_has_about_a_thousand_arrays():
    ps = model_params("kimi-k2")
    assert 1000 <= len(ps) <= 1100
    assert sum(p.elems for p in ps) / 1e12 == pytest.approx(1.03, rel=0.01)


def test_small_sync_against_bound_and_baselines(tmp_path):
    r = plan_sync(load_sync_config(_write(tmp_path))).to_dict()
    assert r["arrays"] == len(model_params("llama3-8b"))
    assert r["lower_bound_s"] > 0 and r["time_s"] >= r["lower_bound_s"]
    assert r["ratio_to_bound"] <= 1.5  # 2 nodes, 16 MiB arrays: launch and latency weigh
    assert r["bound_holds"]
    for k in ("gather_broadcast", "bucketed_broadcast", "p2p", "device_put"):
        assert r["baselines"][k]["time_s"] >= r["lower_bound_s"], k
    assert r["baselines"]["gather_broadcast"]["time_s"] > r["time_s"]


def test_every_shipped_config_loads_and_names_its_source():
    assert {c.stem for c in CONFIGS} >= {"perplexity-kimi-k2", "nemo-rl-deepseek-v3", "nemo-rl-qwen3-235b",
                                         "checkpoint-engine-kimi-k2", "openrlhf-llama3-70b"}
    for c in CONFIGS:
        cfg = load_sync_config(c)
        assert cfg["source"].startswith(("http", "NVIDIA", "Perplexity", "MoonshotAI", "OpenRLHF"))
        assert cfg["published"]["source"].startswith("https://")


def test_cli_json(tmp_path, capsys):
    from experiments.cli import main

    assert main(["weight-sync", str(_write(tmp_path)), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for k in ("time_s", "lower_bound_s", "peak_bytes_max_device", "bound_bytes", "baselines"):
        assert k in d


@pytest.mark.parametrize("kw,words", [
    ({"cap": 1024}, "staging cap of 1024 bytes is below"),
    ({"infer": "dp=2,tp=4@12-19"}, "names device 19, but the machine has 16"),
    ({"infer": "dp=2,tp=4@8,8,9,10,11,12,13,14"}, "appear more than once"),
    ({"extra": "bogus: 1\n"}, "bogus"),
])
def test_bad_input_one_line_exit_2(tmp_path, capsys, kw, words):
    from experiments.cli import main

    assert main(["weight-sync", str(_write(tmp_path, **kw))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err


def test_published_llama_70b_config_within_1_2x_of_the_bound():
    r = plan_sync(load_sync_config(ROOT / "experiments/configs/weight-sync/openrlhf-llama3-70b.yaml")).to_dict()
    assert r["lower_bound_s"] <= r["time_s"] <= 1.2 * r["lower_bound_s"]
    assert r["bound_holds"]
    assert r["baselines"]["gather_broadcast"]["time_s"] > 10 * r["time_s"]


def test_plans_shared_up_to_renaming_whole_nodes_change_nothing(tmp_path, monkeypatch):
    # a pipelined trainer: each stage's sub-mesh is the first one shifted by whole nodes, so
    # one plan per array class serves every stage; the result must equal planning each
    # stage's meshes on their own (the renaming is a symmetry of h100-multinode)
    from experiments.weightsync import sync

    cfg = SMALL.format(cap=1 << 30, infer="dp=2,tp=4@16-23").replace('"fsdp=8@0-7"', '"pp=2,fsdp=8@0-15"')
    cfg = cfg.replace("h100-multinode:2", "h100-multinode:3")
    p = tmp_path / "pp.yaml"
    p.write_text(cfg)
    shared = plan_sync(load_sync_config(p)).to_dict()
    monkeypatch.setattr(sync.Relabeler, "canonical", lambda self, am, bm: (am, bm, None))
    alone = plan_sync(load_sync_config(p)).to_dict()
    assert shared["distinct_plans"] < alone["distinct_plans"]
    for k in ("time_s", "lower_bound_s", "lower_bound_kind", "peak_bytes_max_device", "bound_bytes"):
        assert shared[k] == alone[k], k
    assert shared["baselines"] == alone["baselines"]


def test_relabelled_plan_is_the_plan_of_the_renamed_meshes():
    from synth.crossmesh import plan_crossmesh, relabel

    p = plan_crossmesh("x=2,y=4@0-7", "[64{y}, 32{x}]", "tp=4@8-11", "[64, 32{tp}]", itemsize=2)
    ids = {d: d + 16 for d in p.devices}
    q = relabel(p, ids)
    direct = plan_crossmesh("x=2,y=4@16-23", "[64{y}, 32{x}]", "tp=4@24-27", "[64, 32{tp}]", itemsize=2)
    assert q.to_dict() == direct.to_dict()
    q.check()  # every phase and the transfer, element by element


@pytest.mark.parametrize("path", [c for c in CONFIGS if "kimi" not in c.name], ids=lambda p: p.stem)
def test_published_method_within_30pct_or_a_stated_reason(path):
    # the published method's own schedule, simulated, against the figure: within 30% or the
    # config says why not (the Kimi-K2 configs take longest to plan; they are run by the CLI)
    r = plan_sync(load_sync_config(path)).to_dict()
    c = r["published_check"]
    assert c["method"] == r["published"]["method"]
    assert c["simulated_s"] == r["baselines"][c["method"]]["time_s"]
    assert c["within_30pct"] == (0.7 <= c["ratio"] <= 1.3)
    assert c["within_30pct"] or len(c["differs"] or "") > 80
