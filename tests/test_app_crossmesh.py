"""AppTest checks of the Cross-mesh page: its figures come from the packages' own results
(compared with direct calls), its plan is checked element by element, bad input is one
st.error and the page keeps running."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from ui import crossmesh as cx  # noqa: E402
from ui.fmt import fmt_bytes, fmt_seconds  # noqa: E402


def _page():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.switch_page("ui/pages/crossmesh.py")
    return at


def test_default_page_matches_the_simulator_and_the_plan_is_exact():
    from simulator.crossmesh import plan_on_machine, simulate_crossmesh

    at = _page().run()
    assert not at.exception and not at.error
    ex = cx.EXAMPLE
    plan = plan_on_machine(ex["src_mesh"], ex["src"], ex["dst_mesh"], ex["dst"], ex["machine"], ex["itemsize"])
    plan.check(np.arange(16384 * 4096, dtype=np.int32).reshape(16384, 4096))
    res = simulate_crossmesh(plan, ex["machine"])
    got = {m.label: m.value for m in at.metric}
    assert got["simulated time"] == fmt_seconds(res.time_s)
    assert got["lower bound"] == fmt_seconds(res.lower_bound_s)
    assert got["peak (max device)"] == fmt_bytes(plan.metrics()["peak_bytes_max_device"])
    rows = at.table[-1].value
    assert list(rows["schedule"])[0] == "ours" and any(s.startswith("published") for s in rows["schedule"])
    # the pictures (Vega-Lite: no plotly.js) read back against the plan and the simulation
    import json

    import altair as alt

    assert not at.get("plotly_chart")
    specs = [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]
    assert len(specs) == 4
    for spec in specs:
        alt.Chart.from_dict(spec)  # valid Vega-Lite (altair's schema)
    src, dst, matrix, timeline = specs
    for spec, mesh, t in ((src, plan.src_mesh, plan.src), (dst, plan.dst_mesh, plan.dst)):
        tiles = spec["layer"][0]["data"]["values"]
        assert [v["device"] for v in tiles] == [f"dev {d}" for d in mesh.device_ids]
        # two devices share a colour exactly when they hold the same block
        starts, _ = type(t)(t.dims).regions(mesh.local())
        for a, va in enumerate(tiles):
            for b, vb in enumerate(tiles):
                assert (va["block"] == vb["block"]) == bool((starts[a] == starts[b]).all())
    snd, rcv, mat = plan.transfer.matrix()
    got = {(v["from"], v["to"]): v["MiB"] for v in matrix["layer"][0]["data"]["values"]}
    assert got == {(str(s), str(r)): mat[i, j] / 2**20 for i, s in enumerate(snd) for j, r in enumerate(rcv)}
    assert [(v["phase"], v["start"], v["end"]) for v in timeline["layer"][0]["data"]["values"]] == [
        (r["phase"], r["start_s"] * 1e3, r["end_s"] * 1e3) for r in res.timeline_rows()]


def test_bad_meshes_are_one_error_and_the_page_runs_on():
    at = _page().run()
    at.text_input(key="xm_dst_mesh").set_value("dp=2,tp=4@8,8,9,10,11,12,13,14").run()
    assert not at.exception
    assert len(at.error) == 1 and "appear more than once" in at.error[0].value
    at.text_input(key="xm_dst_mesh").set_value("dp=2,tp=4@12-19").run()
    assert len(at.error) == 1 and "names device 19" in at.error[0].value
    assert at.table  # the weight-sync table is still there


def test_markdown_in_user_text_is_escaped():
    assert cx.md_escape("a*b_[x]") == "a\\*b\\_\\[x\\]"
