"""The design review: report.html / report.md of a build, `topo report` of one design or several,
the what-if table and the plots."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from topo import build_fabric, load_spec
from topo.analysis.analyze import analyze, busbw_curve, what_if, what_if_samples
from topo.cli import main
from topo.cabling import plan_cabling
from topo.outputs.caveats import caveats
from topo.outputs.plots import busbw_svg, utilisation_svg
from topo.outputs.report import figures, report_files, review, verdict
from topo.summary import summarize
from topo.hardware.catalog import resolve_server

from .conftest import EXAMPLES


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def reviewed(label=None, **spec):
    fabric = build_fabric(load_spec(spec))
    cabling = plan_cabling(fabric)
    analysis = analyze(fabric)
    server = resolve_server(fabric.spec)
    return review(fabric, summarize(fabric, cabling), cabling, analysis,
                  caveats(fabric, analysis, cabling, server), server, label=label)


@pytest.fixture(scope="module")
def build_1024(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "d"
    result = run("build", "--gpus", 1024, "-o", out, "-q")
    assert result.exit_code == 0, result.output
    return out


# --- the report of a build ---------------------------------------------------------------------------


def test_build_writes_a_self_contained_page(build_1024):
    html = (build_1024 / "report.html").read_text()
    # every section of the review is there, with the diagram and both plots inline
    for section in ("key", "warnings", "spec", "tiers", "diagram", "bom", "hops", "bisection", "allreduce",
                    "links", "what-if"):
        assert f'<section id="{section}">' in html
    assert html.count("<svg") == 3
    assert 'id="figure-fabric"' in html and 'id="figure-busbw"' in html and 'id="figure-links"' in html
    # nothing outside the page: no src, no stylesheet or script link, no address but SVG's namespaces
    assert not re.search(r"\bsrc=", html) and "<script" not in html and "<link" not in html
    hrefs = re.findall(r'href="([^"]*)"', html)
    assert hrefs and all(h.startswith("#") for h in hrefs)
    addresses = set(re.findall(r"https?://[^\s\"'<>)]+", html))
    assert addresses <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
    # ids are unique across the inline pictures
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))
    # readable printed: a print style that keeps tables and figures whole
    assert "@media print" in html and "break-inside: avoid" in html


def test_markdown_shows_the_same_content_with_files_beside_it(build_1024):
    md = (build_1024 / "report.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert images == ["graph/fabric.svg", "report/busbw.svg", "report/links.svg"]
    for image in images:
        assert "<svg" in (build_1024 / image).read_text()
    html = (build_1024 / "report.html").read_text()
    titles = re.findall(r"^## (.+)$", md, flags=re.M)
    assert titles == re.findall(r"<h2>([^<]+)</h2>", html)


def test_the_report_prints_the_counts_every_other_output_prints(build_1024):
    summary = json.loads((build_1024 / "summary.json").read_text())
    analysis = json.loads((build_1024 / "analysis.json").read_text())
    md = (build_1024 / "report.md").read_text()
    key = dict(re.findall(r"^\| ([^|]+?) \| ([^|]+?) \|$", md.split("## Warnings")[0], flags=re.M))
    assert key["switches"] == f"{summary['switches']['total']:,}"
    assert key["cable pieces"] == f"{summary['cabling']['cables']['pieces']:,}"
    assert key["transceivers"] == f"{summary['cabling']['transceivers']['total']:,}"
    assert key["network power"] == f"{summary['cabling']['power_w']['total']:,.0f} W"
    assert key["bisection (max-flow)"] == f"{analysis['bisection']['maxflow_gbps']:,} Gb/s"
    assert key["busbw at the largest size"] == f"{analysis['allreduce'][-1]['busbw_GBps']:,.1f} GB/s"
    # the bill of materials: bom.csv's lines, quantities and power
    bom = (build_1024 / "bom.csv").read_text().splitlines()[1:]
    for line in bom:
        category, item, tier, end, _, quantity, _, power = line.split(",")
        assert f"| {category} | {item} | {tier} | {end} |" in md
    assert f"network power: {summary['cabling']['power_w']['total']:,.0f} W" in md
    # the warnings, each with its code
    for w in summary["warnings"]:
        assert f"| {w['code']} | {w['message']} |" in md


def test_the_report_is_the_same_bytes_every_time(tmp_path):
    for name in ("a", "b"):
        assert run("build", "--gpus", 1024, "-o", tmp_path / name, "-q", "--no-configs").exit_code == 0
    for rel in ("report.html", "report.md", "report/busbw.svg", "report/links.svg"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_no_analysis_leaves_the_analysis_sections_out(tmp_path):
    assert run("build", "--gpus", 256, "-o", tmp_path / "d", "-q", "--no-analysis").exit_code == 0
    html = (tmp_path / "d" / "report.html").read_text()
    assert '<section id="bom">' in html and '<section id="allreduce">' not in html
    assert "Not analysed" in html and html.count("<svg") == 1
    assert not (tmp_path / "d" / "report").exists()


def test_check_accepts_the_report_it_rebuilds(build_1024):
    result = run("check", build_1024, "-q")
    assert result.exit_code == 0, result.output


def test_a_user_template_overrides_the_report(tmp_path):
    site = tmp_path / "site" / "report"
    site.mkdir(parents=True)
    (site / "report.md.j2").write_text("# {{ title }}\n{% for s in sections %}- {{ s.title }}\n{% endfor %}")
    assert run("build", "--gpus", 256, "-o", tmp_path / "d", "-q", "--no-configs",
               "--templates", tmp_path / "site").exit_code == 0
    md = (tmp_path / "d" / "report.md").read_text()
    assert md.startswith("# Design review: cluster\n- Key figures\n")


# --- what-ifs ------------------------------------------------------------------------------------------


def test_what_if_losses_follow_the_fabric_shape():
    fabric = build_fabric(load_spec({"gpus": 1024}))
    table = what_if(fabric)
    rows = {row["scenario"]: row for row in table.rows}
    assert list(rows) == ["spine", "leaf", "leaf-spine-link", "nic-link"]  # two tiers: no core
    # 16 spines in a full mesh: one fewer takes 1/16 of the bisection, whichever it is
    spine = rows["spine"]["bisection_gbps"]
    assert spine["min"] == spine["max"] == 204800 * 15 / 16
    # rail-optimized: same-rank traffic stays on its leaf, so a spine does not carry it
    assert rows["spine"]["busbw_GBps"]["median_change_pct"] == 0
    # a rail leaf lost: its servers' NIC of that rail is gone, their channels double up on another
    leaf = rows["leaf"]["busbw_GBps"]
    assert -55 < leaf["max_change_pct"] <= leaf["min_change_pct"] + 1e-9 < -40 or leaf["min"] == leaf["max"]
    assert -55 < leaf["median_change_pct"] < -40
    # one NIC link: a distribution (which NIC matters), and the worst part is named so it can be rerun
    nic = rows["nic-link"]
    assert nic["busbw_GBps"]["min"] < nic["busbw_GBps"]["max"]
    assert nic["worst_part"] in nic["parts"] and re.fullmatch(r"cluster-node\d{4}:\d", nic["worst_part"])
    assert all(len(row["parts"]) == 6 for row in table.rows)


def test_what_if_of_three_tiers_loses_a_core_and_scales_its_samples_down():
    fabric = build_fabric(load_spec({"gpus": 4096, "tiers": 3}))
    table = what_if(fabric, samples=2)
    assert [row["scenario"] for row in table.rows] == ["spine", "leaf", "core", "leaf-spine-link", "nic-link"]
    core = next(row for row in table.rows if row["scenario"] == "core")
    assert core["bisection_gbps"]["max_change_pct"] <= 0
    assert what_if_samples(build_fabric(load_spec({"gpus": 65536, "tiers": 3}))) == 2


def test_what_if_parts_fail_whole_ports_of_breakout_links():
    fabric = build_fabric(load_spec({"gpus": 1024, "switch": "eth-51t-64x800"}))
    rows = {row["scenario"]: row for row in what_if(fabric, samples=3).rows}
    # 800G leaf-spine ports carry one link each; the part names a leaf port a user can --fail
    assert all(re.fullmatch(r"cluster-leaf-su\d\d-r\d:\d+", p) for p in rows["leaf-spine-link"]["parts"])


# --- comparison -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pair():
    return [reviewed("1to1", gpus=1024), reviewed("3to1", gpus=1024, oversubscription=3)]


def test_verdict_says_what_each_design_gains_and_loses(pair):
    text = verdict(pair)
    assert text.startswith("Against 1to1, 3to1 has 33 % fewer switches")
    assert "but 66 % less bisection per GPU" in text
    f1, f3 = figures(pair[0]), figures(pair[1])
    assert f3["switches"] == 32 and f1["switches"] == 48
    assert f3["bisection_gbps"] < f1["bisection_gbps"] / 2.5


def test_compare_marks_differences_better_and_worse(pair):
    files = report_files(pair, in_build=False)
    html = files["report.html"]
    row = re.search(r"<tr><td>switches</td>(.*?)</tr>", html).group(1)
    assert 'class="num better">32<span class="note">-33 %</span>' in row
    row = re.search(r"<tr><td>bisection per GPU</td>(.*?)</tr>", html).group(1)
    assert 'class="num worse"' in row
    # the same busbw at the largest size: no mark
    row = re.search(r"<tr><td>busbw at the largest size</td>(.*?)</tr>", html).group(1)
    assert "better" not in row and "worse" not in row
    md = files["report.md"]
    assert "| switches | 48 | **32** (-33 %, better) |" in md
    assert "| oversubscription | 1 | 3 |" in md  # the spec differences
    assert sorted(k for k in files if k.startswith("report/")) == [
        "report/busbw.svg", "report/fabric-1to1.svg", "report/fabric-3to1.svg", "report/links.svg"]
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))


def test_topo_report_compares_spec_files_and_folders(tmp_path, build_1024):
    out = tmp_path / "cmp"
    result = run("report", build_1024, EXAMPLES / "rack-768-oversub3.yaml", "-o", out, "-q")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["report", "report.html", "report.md", "topo-build.json"]
    assert "Against d, rack-768-oversub3 (768 GPUs against 1,024: compare the per-GPU figures)" in result.stdout
    assert f"report: {out}/report.html" in result.stdout
    # never over what is there, unless --force (and then only over a folder topo wrote)
    again = CliRunner().invoke(main, ["report", str(build_1024), "-o", str(out)])
    assert again.exit_code != 0 and "--force" in again.output and "Traceback" not in again.output
    assert run("report", build_1024, "-o", out, "--force", "-q").exit_code == 0
    assert "Design review: cluster" in (out / "report.html").read_text()


def test_topo_report_json_is_data(tmp_path):
    result = run("report", EXAMPLES / "h100-1024.yaml", EXAMPLES / "h100-1024.yaml", "-o", tmp_path / "r",
                 "--format", "json", "-q")
    data = json.loads(result.stdout)
    assert [d["label"] for d in data["designs"]] == ["h100-1024", "h100-1024-2"]
    assert data["verdict"].endswith("is the same on every figure weighed here.")
    assert data["designs"][0]["what_if"]["rows"][0]["scenario"] == "spine"


def test_topo_report_refuses_bad_designs_in_one_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(main, ["report", str(empty), "-o", str(tmp_path / "r")])
    assert result.exit_code == 1 and "no spec.yaml" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus: -4\n")
    result = CliRunner().invoke(main, ["report", str(bad), "-o", str(tmp_path / "r")])
    assert result.exit_code != 0 and "gpus" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


def test_topo_report_refuses_an_edited_folder(tmp_path):
    out = tmp_path / "d"
    assert run("build", "--gpus", 256, "-o", out, "-q", "--no-configs").exit_code == 0
    design = json.loads((out / "design.json").read_text())
    design["links"].pop()
    (out / "design.json").write_text(json.dumps(design))
    result = CliRunner().invoke(main, ["report", str(out), "-o", str(tmp_path / "r")])
    assert result.exit_code != 0 and "topo check" in result.output
    assert not (tmp_path / "r").exists()


# --- plots ------------------------------------------------------------------------------------------------


def test_plots_are_deterministic_and_show_the_algorithm_per_size():
    fabric = build_fabric(load_spec({"gpus": 1024}))
    curve = busbw_curve(fabric)
    algorithms = [row["algorithm"] for row in curve]
    assert algorithms[0] == "tree" and algorithms[-1] == "nvlstree"  # the tuner switches with size
    svg = busbw_svg([("cluster", curve)], 364.0)
    assert svg == busbw_svg([("cluster", curve)], 364.0)
    # text kept as text, labelled, with a legend entry per algorithm
    for text in ("busbw (GB/s)", "message size (bytes)", "tree", "nvlstree", "64K", "4G"):
        assert f">{text}<" in svg
    assert "<dc:date>" not in svg
    links = utilisation_svg([("a", [0, 0, 290, 0, 0, 15, 0, 0, 0, 0])])
    assert ">utilisation (% of the link direction's capacity)<" in links or "utilisation (%" in links
    ids = re.findall(r'\bid="([^"]+)"', svg + links)
    assert len(ids) == len(set(ids))


def test_plots_are_sized_for_a_printed_page():
    svg = busbw_svg([("a", [{"size_bytes": 1 << 20, "algorithm": "ring", "busbw_GBps": 1.0}])])
    width, height = (float(v) for v in re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups())
    assert (width, height) == (7.2 * 72, 3.3 * 72)


def test_the_cli_starts_without_matplotlib():
    code = "import sys, topo.cli; sys.exit('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_what_if_says_when_a_loss_leaves_nodes_out():
    """A rack leaf is its servers' only way out: losing it leaves them out of the restarted job,
    whose busbw is a smaller job's; the single spine of a small fabric cuts it (busbw 0)."""
    rows = {row["scenario"]: row for row in what_if(build_fabric(load_spec({"gpus": 64, "placement": "rack"}))).rows}
    assert rows["leaf"]["nodes_left_out"] == 4
    assert rows["spine"]["busbw_GBps"]["min"] == 0 and rows["spine"]["bisection_gbps"]["min"] == 0
    assert rows["nic-link"]["nodes_left_out"] == 0
