"""The runner end to end: the smoke config, resuming after a kill, error and timeout
rows, the results tables, and the report built from them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.case import ExperimentError
from experiments.config import load_config, parse_config
from experiments.report import build_report
from experiments.runner import read_journal

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "experiments" / "configs" / "smoke.yaml"


def _cli(*args, timeout=600, **kw):
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)  # workers set their own device counts
    return subprocess.run([sys.executable, "-m", "experiments", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, **kw)


def _children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d.name))
    return out


def _journal_lines(d: Path) -> list[dict]:
    return [json.loads(x) for x in (d / "rows.jsonl").read_text().splitlines() if x.strip()]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("smoke")
    r = _cli("run", SMOKE, "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    return out, json.loads(r.stdout)


# -- the smoke config ----------------------------------------------------------------------
def test_smoke_runs_end_to_end(smoke):
    out, summary = smoke
    cfg = load_config(SMOKE)
    expected = {i for u in cfg.units() for i in u.ids}
    lines = _journal_lines(out)
    ids = [r["id"] for r in lines]
    assert len(ids) == len(set(ids)) == len(expected) == summary["rows_written"]
    assert set(ids) == expected
    bad = [(r["case"], r["planner"], r["error"]) for r in lines if r["status"] != "ok"]
    # Shardy's reshard-to-collectives baseline reads even types without pending sums only,
    # and says so in one line; nothing else fails
    assert all(p == "shardy-r2c" and "even types without pending sums" in e for _, p, e in bad), bad
    assert {c for c, _, _ in bad} <= {c.name for c in cfg.cases if c.parsed()[1].unreduced
                                      or not c.parsed()[1].is_even(c.parsed()[0])
                                      or c.parsed()[2].unreduced or not c.parsed()[2].is_even(c.parsed()[0])}
    df = pd.read_parquet(out / "results.parquet")
    csv = pd.read_csv(out / "results.csv")
    assert len(df) == len(csv) == len(expected)
    assert set(df["planner"]) == {"auto", "easy", "normal", "xla-shardy", "xla-gspmd", "shardy-r2c"}
    assert set(df["machine"]) == {"tpu-v4", "dgx-h100"}
    assert set(df["bandwidth_scale"]) == {1.0, 2.0}


def test_smoke_rows_mean_what_they_say(smoke):
    out, _ = smoke
    df = pd.read_parquet(out / "results.parquet")
    ok = df[df["status"] == "ok"]
    # Our plans keep the memory bound; every strategy is at least the lower bound.
    ours = ok[ok["planner"] == "normal"]
    assert (ours["max_shard_bytes"] <= ours["bound_bytes"]).all()
    assert (ok["time_s"] >= ok["lower_bound_s"] * (1 - 1e-9)).all()
    assert (ok["recv_bytes_max_device"] >= ok["recv_lower_bound_bytes"]).all()
    # Twice the bandwidth never makes a schedule slower.
    key = ["case", "machine", "planner"]
    a = ok[ok["bandwidth_scale"] == 1.0].set_index(key)["time_s"]
    b = ok[ok["bandwidth_scale"] == 2.0].set_index(key)["time_s"]
    assert (b <= a.loc[b.index] * (1 + 1e-9)).all()
    # The easy plan gathers the whole array on the way.
    easy = ok[ok["planner"] == "easy"]
    assert (easy["max_shard_bytes"] == easy["array_bytes"]).all()
    # Every measured unit was measured (Shardy's plan too), and checked element by element.
    assert not ok["notes"].fillna("").str.contains("measure failed").any()
    assert ok[ok["measured_correct"].notna()]["measured_correct"].astype(bool).all()
    assert ok[ok["planner"] == "shardy-r2c"]["measured_correct"].notna().any()
    # XLA rows carry its full-remat verdict; ours do not.
    xla = ok[ok["planner"].str.startswith("xla")]
    assert xla["full_remat"].notna().all()
    # The 4x2 case: XLA's schedule goes above max(src, dst), ours does not.
    j = ok[(ok["case"] == "jax-21562-4x2") & ok["baseline"]]
    assert (j[j["planner"].str.startswith("xla")]["max_shard_over_bound"] > 1).all()
    assert (j[j["planner"] == "normal"]["max_shard_over_bound"] <= 1).all()


def test_rerun_skips_everything(smoke, tmp_path):
    out, summary = smoke
    before = (out / "rows.jsonl").read_text()
    r = _cli("run", SMOKE, "--out", out, "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["units_run"] == 0 and s["units_skipped"] == summary["units_total"]
    assert (out / "rows.jsonl").read_text() == before


def test_report_html_and_summary(smoke, tmp_path):
    out, _ = smoke
    html = tmp_path / "r.html"
    rep = build_report(out, html_path=html, planner="auto")
    text = html.read_text()
    assert "plotly" in text.lower() and len(text) > 1_000_000  # plotly.js is inlined
    for title in ("Speedup of auto over each baseline", "relative to max(src shard, dst shard)",
                  "over the lower bound", "What-if: geomean speedup as bandwidth_scale varies"):
        assert title in text, title
    vs = {s["vs"]: s for s in rep.summary}
    assert {"xla-shardy", "xla-gspmd", "shardy-r2c", "easy", "normal"} <= set(vs)
    df = pd.read_parquet(out / "results.parquet")
    b = df[(df["status"] == "ok") & df["baseline"]]
    # every row names the compiler of its schedule; auto and XLA share libtpu on TPU rows
    assert b["compiler"].notna().all()
    tpu_rows = b[b["machine"] == "tpu-v4"]
    assert set(tpu_rows[tpu_rows["planner"].isin(["auto", "xla-shardy", "xla-gspmd", "shardy-r2c"])]["compiler"]) \
        == {"libtpu"}
    assert set(b[b["planner"].isin(["normal", "easy"])]["compiler"]) == {"none"}
    assert (b["local_time_s"] >= 0).all()
    assert (b["comm_time_s"] + b["local_time_s"]).to_numpy() == pytest.approx(b["time_s"].to_numpy(), rel=1e-6)
    key = ["case", "machine"]
    ours = b[b["planner"] == "auto"].set_index(key)
    for p in ("xla-shardy", "xla-gspmd"):
        other = b[b["planner"] == p].set_index(key)
        same = other["compiler"] == ours.loc[other.index, "compiler"]
        # the total is compared only where both schedules come from one compiler
        sp = (other["time_s"] / ours.loc[other.index, "time_s"])[same].to_numpy()
        assert vs[p]["cases"] == len(other) and vs[p]["total_pairs"] == len(sp) > 0
        assert vs[p]["geomean_speedup"] == pytest.approx(float(np.exp(np.log(sp).mean())))
        assert vs[p]["min_speedup"] == pytest.approx(sp.min())
        co, cx = ours.loc[other.index, "comm_time_s"], other["comm_time_s"]
        cs = (cx / co)[(cx > 0) & (co > 0)].to_numpy()
        assert vs[p]["geomean_comm_speedup"] == pytest.approx(float(np.exp(np.log(cs).mean())))
        assert vs[p]["other_over_bound_share"] == pytest.approx(
            float((other["max_shard_bytes"] > other["bound_bytes"]).mean()))
        # rows never mix compilers: one per machine and pair of compilers
        per = [s for s in rep.by_machine if s["vs"] == p]
        assert all(" + " not in s["compilers"] for s in per)
        gpu = [s for s in per if s["machine"] == "dgx-h100"]
        if any(s["compilers"].startswith("none") for s in gpu):  # no GPU compiler here: collectives only
            assert all(s["total_pairs"] == 0 and s["geomean_speedup"] != s["geomean_speedup"] for s in gpu)
    md = rep.markdown()
    assert md.splitlines()[0].startswith("| auto vs | machine | compilers (auto / other) | pairs |")
    assert "| xla-shardy | tpu-v4 | libtpu / libtpu |" in md
    # compiled rows carry the compiler's own peak (memory_analysis), which the remat column counts
    assert (tpu_rows[tpu_rows["planner"].isin(["auto", "xla-shardy"])]["compiled_peak_bytes"] > 0).all()
    for s in (x for x in rep.by_machine if x["machine"] == "tpu-v4" and x["vs"] == "xla-shardy"):
        o = ours.xs("tpu-v4", level="machine")
        x = b[(b["planner"] == "xla-shardy") & (b["machine"] == "tpu-v4")].set_index("case")
        rm = x[x["full_remat"].astype(bool)]
        lower = int((o.loc[rm.index, "compiled_peak_bytes"] < rm["compiled_peak_bytes"]).sum())
        assert s["peak_lt_remat"] == (f"{lower}/{len(rm)}" if len(rm) else "-")
        assert f"| {s['temp_le']} | {s['temp_lt_remat']} / {s['peak_lt_remat']} |" in md
        over = {t["case"] for t in s["temp_over"]}
        assert over == set(x.index[x["temp_bytes"] < o.loc[x.index, "temp_bytes"]])


def test_temp_over_says_why():
    """Temp above the other side's: a few hundred bytes are the async collectives'
    bookkeeping; more is the plan's intermediates."""
    from experiments.report import temp_over

    j = pd.DataFrame([
        {"case": "a", "machine": "dgx-h100", "temp_bytes_ours": 8389888, "temp_bytes_other": 8389120,
         "num_collectives_ours": 3, "num_collectives_other": 1},
        {"case": "b", "machine": "dgx-h100", "temp_bytes_ours": 16777732, "temp_bytes_other": 2097920,
         "num_collectives_ours": 1, "num_collectives_other": 2},
        {"case": "c", "machine": "dgx-h100", "temp_bytes_ours": 8389632, "temp_bytes_other": 4194560,
         "num_collectives_ours": 2, "num_collectives_other": 1, "speedup": 0.45,
         "notes_ours": "auto: the work budget of 6250 moves ran out; this is the best plan found"},
        {"case": "d", "machine": "dgx-h100", "temp_bytes_ours": 16777732, "temp_bytes_other": 2097920,
         "num_collectives_ours": 1, "num_collectives_other": 2, "speedup": 1.133, "notes_ours": ""}])
    a, b, c, d = temp_over(j)
    assert a["why"] == "768 B of async-collective bookkeeping (3 collectives against 1)"
    assert b["why"] == "a different plan (1 collective against 2): its intermediates need 14.0 MiB more"
    assert c["why"] == ("a different plan (2 collectives against 1): its intermediates need 4.0 MiB more; its "
                        "simulated total time is 2.22x the other's; its search was cut by the work budget")
    assert d["why"].endswith("need 14.0 MiB more; its simulated total time is 0.88x the other's")


def test_remat_pairs_not_lower_in_temp_say_which_measure_shows_it():
    """Where XLA rematerialises but both temps are 0 B (libtpu kept the whole array out of
    HBM temporaries), the pair is listed with the compiled peaks that show the difference."""
    from experiments.report import remat_not_lower

    ev = ("all-gather %all-gather.1 builds the whole array (67108864 bytes) on each device in memory space S(3), "
          "which the compiler's temp bytes do not count (its compiled peak does); the result is 4194304 bytes")
    j = pd.DataFrame([
        {"case": "random-0-015", "machine": "tpu-v4", "temp_bytes_ours": 0, "temp_bytes_other": 0,
         "compiled_peak_bytes_ours": 16777216, "compiled_peak_bytes_other": 142606848, "notes_other": ev},
        {"case": "same", "machine": "tpu-v4", "temp_bytes_ours": 0, "temp_bytes_other": 0,
         "compiled_peak_bytes_ours": 4096, "compiled_peak_bytes_other": 4096, "notes_other": ""}])
    a, b = remat_not_lower(j)
    assert a["lower_in_peak"] and a["shown_by"] == ("compiled peak: 16.00 MiB against 136.00 MiB "
                                                    "(temp 0 B against 0 B)")
    assert a["xla_evidence"].endswith("(its compiled peak does)") and "the result" not in a["xla_evidence"]
    assert not b["lower_in_peak"] and b["shown_by"].startswith("neither measure")


def test_report_cli_forms(smoke, tmp_path):
    out, _ = smoke
    r = _cli("report", out, "--json", "--html", tmp_path / "x.html")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert {s["vs"] for s in d["summary"]} >= {"xla-shardy", "xla-gspmd"}
    r = _cli("report", out, "--markdown", "--html", tmp_path / "y.html")
    assert r.returncode == 0 and r.stdout.startswith("| auto vs |")  # the CLI compares auto by default
    r = _cli("report", out, "--html", tmp_path / "z.html")
    assert r.returncode == 0 and "geo speedup" in r.stdout and "HTML report:" in r.stdout


# -- resumability, errors, timeouts ----------------------------------------------------------------
FAST = """
name: fast
suites:
  - random: {count: 12, seed: 5, max_devices: 16}
machines: [tpu-v4]
planners: [easy, normal]
runner: {workers: 2, timeout_s: 60, unit_delay_s: 0.4, simulator: analytic}
"""


def test_killed_run_resumes_without_losing_or_duplicating_rows(tmp_path):
    cfg_path = tmp_path / "fast.yaml"
    cfg_path.write_text(FAST)
    out = tmp_path / "out"
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    p = subprocess.Popen([sys.executable, "-m", "experiments", "run", str(cfg_path), "--out", str(out),
                          "--no-progress"], cwd=ROOT, env=env, start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    expected = {i for u in load_config(cfg_path).units() for i in u.ids}
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            j = out / "rows.jsonl"
            if j.exists() and len(j.read_text().splitlines()) >= 5:
                workers = _children(p.pid)
                break
            time.sleep(0.05)
        else:
            pytest.fail("the run wrote no rows in 120 s")
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    partial = read_journal(out)
    assert 5 <= len(partial) < len(expected)
    # The workers notice their parent is gone and stop within about a second.
    deadline = time.monotonic() + 10
    while workers and time.monotonic() < deadline:
        workers = [w for w in workers if Path(f"/proc/{w}").exists() and
                   b"multiprocessing" in Path(f"/proc/{w}/cmdline").read_bytes()]
        time.sleep(0.2)
    assert not workers, f"worker processes {workers} outlived the killed run"
    r = _cli("run", cfg_path, "--out", out, "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["units_skipped"] > 0 and s["units_run"] > 0
    lines = _journal_lines(out)
    ids = [x["id"] for x in lines]
    assert len(ids) == len(set(ids)), "a row was written twice"
    assert set(ids) == expected, "rows are missing"
    assert all(x["status"] == "ok" for x in lines)
    assert len(pd.read_csv(out / "results.csv")) == len(expected)


BAD = """
name: bad
suites:
  - xla-issues: {names: [jax-21562-4x2]}
cases:
  - {name: no-axis, mesh: "x=4", src: "[8{z}, 8]", dst: "[8, 8]", dtype: float32}
  - {name: fine, mesh: "x=4", src: "[8{x}, 8]", dst: "[8, 8{x}]", dtype: float32}
machines: [tpu-v4, dgx-h100]
planners: [normal]
runner: {workers: 1, timeout_s: 60, simulator: analytic}
"""


def test_bad_case_gives_error_rows_and_the_run_goes_on(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(BAD)
    r = _cli("run", cfg, "--out", tmp_path / "o", "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    rows = {(x["case"], x["machine"]): x for x in _journal_lines(tmp_path / "o")}
    assert len(rows) == 6
    for m in ("tpu-v4", "dgx-h100"):
        assert rows[("no-axis", m)]["status"] == "error"
        assert "which is not in mesh x=4" in rows[("no-axis", m)]["error"]
        assert rows[("fine", m)]["status"] == "ok"
        assert rows[("jax-21562-4x2", m)]["status"] == "ok"
    s = json.loads(r.stdout)
    assert s["rows_ok"] == 4 and s["rows_error"] == 2
    # The report still builds, listing the errors.
    rep = build_report(tmp_path / "o", html_path=tmp_path / "o" / "r.html")
    assert rep.status_counts == {"ok": 4, "error": 2}
    assert "which is not in mesh x=4" in (tmp_path / "o" / "r.html").read_text()
    # --retry-errors reruns only the failed rows (they fail again, the same way).
    r = _cli("run", cfg, "--out", tmp_path / "o", "--json", "--no-progress", "--retry-errors")
    s = json.loads(r.stdout)
    assert s["rows_written"] == 2 and s["rows_error"] == 2
    assert len(read_journal(tmp_path / "o")) == 6


def test_unknown_machine_is_a_config_error(tmp_path):
    """An unknown machine is caught when the config is read (one line, exit 2), before
    any unit runs, as docs/experiments.md says."""
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(BAD.replace("[tpu-v4, dgx-h100]", "[tpu-v4, no-such-machine]"))
    r = _cli("run", cfg, "--out", tmp_path / "o", "--no-progress")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "no-such-machine" in lines[0]
    assert not (tmp_path / "o" / "rows.jsonl").exists()


def test_timeout_gives_timeout_rows_and_the_run_goes_on(tmp_path):
    cfg = tmp_path / "slow.yaml"
    cfg.write_text("""
name: slow
cases:
  - {name: a, mesh: "x=4", src: "[8{x}, 8]", dst: "[8, 8{x}]"}
  - {name: b, mesh: "x=2", src: "[8{x}, 8]", dst: "[8, 8{x}]"}
machines: [tpu-v4]
planners: [easy, normal]
runner: {workers: 2, timeout_s: 0.5, unit_delay_s: 3, simulator: analytic}
""")
    t0 = time.monotonic()
    r = _cli("run", cfg, "--out", tmp_path / "o", "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 60
    rows = _journal_lines(tmp_path / "o")
    assert len(rows) == 4 and all(x["status"] == "timeout" for x in rows)
    assert "timed out after 0.5 s" in rows[0]["error"]


# -- config and CLI errors ---------------------------------------------------------------------
@pytest.mark.parametrize("text, match", [
    ("suites: [transformer]\nplanners: [fast]", "unknown planner"),
    ("suites: [nope]", "unknown suite"),
    ("suites: [transformer]\nwhatif: {bandwidth_scale: [0]}", "positive"),
    ("suites: [transformer]\nspeed: 3", "unknown key"),
    ("machines: [tpu-v4]", "no cases"),
    ("- a\n- b", "top level"),
    ("suites: [transformer]\nrunner: {workers: 0}", "workers"),
    ("suites: [transformer]\nrunner: {simulator: magic}", "simulator"),
])
def test_config_errors_name_the_problem(tmp_path, text, match):
    import yaml

    with pytest.raises(ExperimentError, match=match) as e:
        parse_config(yaml.safe_load(text), "c.yaml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("c.yaml")  # one line that names the file


def test_cli_errors_exit_2_without_traceback(tmp_path):
    def one_line(r):
        lines = [x for x in r.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
        return lines[0]

    r = _cli("run", tmp_path / "missing.yaml", "--out", tmp_path / "o")
    assert r.returncode == 2 and "does not exist" in one_line(r)
    r = _cli("report", tmp_path)
    assert r.returncode == 2 and "no rows" in one_line(r)
    r = _cli("run")
    assert r.returncode == 2 and one_line(r)
    r = _cli("--help")
    assert r.returncode == 0 and "run" in r.stdout and "report" in r.stdout


def test_suites_cli_lists_cases():
    r = _cli("suites", "--suite", "xla-issues", "--json")
    assert r.returncode == 0
    d = json.loads(r.stdout)
    assert any(c["name"] == "jax-21562-4x2" for c in d["xla-issues"])


WHATIF = """
name: w
suites:
  - xla-issues: {names: [jax-21562-4x2]}
machines: [tpu-v4]
planners: [normal, xla-shardy]
whatif: [{bandwidth_scale: [2.0]}, {latency_scale: [10.0]}, {itemsize: [2]}, {placement: [reversed-axes]}]
runner: {workers: 2, timeout_s: 120}
"""


def test_whatif_panel_covers_every_knob(tmp_path):
    cfg = tmp_path / "w.yaml"
    cfg.write_text(WHATIF)
    r = _cli("run", cfg, "--out", tmp_path / "o", "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["rows_ok"] == 2 * 5
    rep = build_report(tmp_path / "o", html_path=tmp_path / "o" / "r.html")
    got = {(w["knob"], w["value"]) for w in rep.whatif}
    assert got == {("bandwidth_scale", 1.0), ("bandwidth_scale", 2.0), ("latency_scale", 1.0),
                   ("latency_scale", 10.0), ("placement", "default"), ("placement", "reversed-axes"),
                   ("itemsize_knob", "case dtype"), ("itemsize_knob", 2)}
    df = pd.read_parquet(tmp_path / "o" / "results.parquet")
    base = df[df["baseline"]].set_index("planner")
    half = df[df["itemsize_knob"] == 2].set_index("planner")  # float32 case at 2 bytes
    for p in ("normal", "xla-shardy"):
        assert half.loc[p, "max_shard_bytes"] * 2 == base.loc[p, "max_shard_bytes"]
    lat = df[df["latency_scale"] == 10.0].set_index("planner")
    assert (lat["time_s"] > base["time_s"]).all()


# -- one run per folder, concurrent runs, a full disk -------------------------------------------
def test_two_runs_into_one_folder_one_waits_out_with_a_clear_error(tmp_path):
    """Two runs started together into one --out: one owns the folder, the other stops
    with one line and exit 2 and writes nothing; the rows end up exactly once."""
    cfg_path = tmp_path / "fast.yaml"
    cfg_path.write_text(FAST)
    out = tmp_path / "out"
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    cmd = [sys.executable, "-m", "experiments", "run", str(cfg_path), "--out", str(out), "--no-progress", "--json"]
    a = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (out / ".lock").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    b = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    ao, ae = a.communicate(timeout=300)
    assert a.returncode == 0, ae
    assert b.returncode == 2, b.stderr
    lines = [x for x in b.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "another run" in lines[0] and str(out) in lines[0], b.stderr
    assert "Traceback" not in b.stderr
    expected = {i for u in load_config(cfg_path).units() for i in u.ids}
    ids = [x["id"] for x in _journal_lines(out)]
    assert len(ids) == len(set(ids)) and set(ids) == expected
    assert json.loads(ao)["rows_written"] == len(expected)
    # the lock goes with its run: a third run finds everything done
    c = _cli("run", cfg_path, "--out", out, "--json", "--no-progress")
    assert c.returncode == 0 and json.loads(c.stdout)["units_run"] == 0


def test_runs_racing_for_one_folder_lose_and_duplicate_no_rows(tmp_path):
    """Three runs into one folder, started one after another while the first still
    works, then resumed: every row exactly once."""
    cfg_path = tmp_path / "fast.yaml"
    cfg_path.write_text(FAST)
    out = tmp_path / "out"
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    cmd = [sys.executable, "-m", "experiments", "run", str(cfg_path), "--out", str(out), "--no-progress", "--json"]
    procs = []
    for _ in range(3):
        procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
        time.sleep(1.0)
    codes = [p.wait(timeout=300) for p in procs]
    assert sorted(codes).count(0) >= 1 and set(codes) <= {0, 2}, codes
    r = _cli("run", cfg_path, "--out", out, "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    expected = {i for u in load_config(cfg_path).units() for i in u.ids}
    ids = [x["id"] for x in _journal_lines(out)]
    assert len(ids) == len(set(ids)), "a row was written twice"
    assert set(ids) == expected, "rows are missing"
    assert len(pd.read_csv(out / "results.csv")) == len(expected)


def test_disk_full_stops_the_run_keeps_its_rows_and_resumes(tmp_path, monkeypatch):
    """The journal's disk fills up mid-run (the third append writes half a line and
    fails): the run stops with one clear error, the rows before stay intact, and a
    rerun completes with every row exactly once."""
    import errno

    from experiments import runner

    cfg_path = tmp_path / "fast.yaml"
    cfg_path.write_text(FAST.replace("unit_delay_s: 0.4", "unit_delay_s: 0.0"))
    out = tmp_path / "out"
    real = runner.Journal.append
    calls = {"n": 0}

    def append(self, rows):
        calls["n"] += 1
        if calls["n"] == 3:
            text = json.dumps(rows[0])
            self.f.write(text[: len(text) // 2])
            self.f.flush()
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, rows)

    monkeypatch.setattr(runner.Journal, "append", append)
    cfg = load_config(cfg_path)
    with pytest.raises(ExperimentError, match="No space left on device.*rerun the same command"):
        runner.run(cfg, out, workers=2, progress=False)
    kept = _journal_lines_tolerant(out)
    assert len(kept) == 2  # the two units appended before the disk filled
    monkeypatch.setattr(runner.Journal, "append", real)
    s = runner.run(cfg, out, workers=2, progress=False)
    expected = {i for u in cfg.units() for i in u.ids}
    ids = [x["id"] for x in _journal_lines(out)]
    assert len(ids) == len(set(ids)) and set(ids) == expected
    assert s.units_skipped == 2 and s.rows_total == len(expected)
    assert [x["id"] for x in kept] == ids[:2]  # the earlier rows are untouched


def _journal_lines_tolerant(d: Path) -> list[dict]:
    out = []
    for x in (d / "rows.jsonl").read_text().splitlines():
        try:
            out.append(json.loads(x))
        except json.JSONDecodeError:
            pass
    return out


def test_out_is_locked_while_a_run_holds_it(tmp_path):
    from experiments.runner import FolderLock

    with FolderLock(tmp_path):
        r = _cli("run", SMOKE, "--out", tmp_path, "--no-progress")
        assert r.returncode == 2
        assert r.stderr.strip().count("\n") == 0 and "another run (pid " in r.stderr
    assert not list(tmp_path.glob("rows.jsonl"))  # the refused run wrote nothing


def test_a_worker_that_dies_gives_error_rows_and_the_run_goes_on(tmp_path):
    """A unit whose worker process dies (here: killed from outside, as the OOM killer
    would) becomes error rows; the others finish."""
    cfg = tmp_path / "die.yaml"
    cfg.write_text("""
name: die
cases:
  - {name: a, mesh: "x=4", src: "[8{x}, 8]", dst: "[8, 8{x}]"}
  - {name: b, mesh: "x=2", src: "[8{x}, 8]", dst: "[8, 8{x}]"}
  - {name: c, mesh: "x=2", src: "[8, 8{x}]", dst: "[8{x}, 8]"}
machines: [tpu-v4]
planners: [normal]
runner: {workers: 1, timeout_s: 60, unit_delay_s: 4, simulator: analytic}
""")
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    out = tmp_path / "o"
    p = subprocess.Popen([sys.executable, "-m", "experiments", "run", str(cfg), "--out", str(out),
                          "--no-progress", "--json"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    # wait for the pool's worker to be busy with the first unit, then kill it
    deadline = time.monotonic() + 60
    victim = None
    while victim is None and time.monotonic() < deadline:
        kids = [k for k in _children(p.pid) if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]
        if kids:
            time.sleep(2.0)  # inside the first unit's 4 s delay
            victim = kids[0]
        time.sleep(0.1)
    assert victim is not None, "no worker appeared"
    os.kill(victim, signal.SIGKILL)
    so, se = p.communicate(timeout=120)
    assert p.returncode == 0, se
    rows = _journal_lines(out)
    assert len(rows) == 3
    dead = [x for x in rows if x["status"] == "error"]
    assert len(dead) == 1 and "worker process died" in dead[0]["error"]
    assert sum(x["status"] == "ok" for x in rows) == 2
