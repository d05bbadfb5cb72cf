"""Pictures without system packages: the pure-Python SVG (one box per partition listing its
ops, host ops with their reasons) and the offline HTML report, checked structurally and, when
Debian's chromium is installed, rendered in a real headless browser (skipped without it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from common_graphs import int8_convnet
from partita.partition import partition_for, placement_report
from partita.partition.estimate import estimate, fallback_costs

from partita.cli import main
from partita.cli.draw import to_svg
from partita.cli.html import render_html

NETS = Path(__file__).resolve().parents[1] / "models" / "tflite" / "nets"
SVG = "{http://www.w3.org/2000/svg}"


def _mobilenet(cpu_nodes=("5", "30")):
    from partita.frontends import from_tflite

    mod = from_tflite(str(NETS / "mobilenet_v2_035_96.tflite"))
    partitioned = partition_for(mod, "npu, llvm", cpu_nodes=list(cpu_nodes))
    report = fallback_costs(partitioned, placement_report(partitioned), "cortex-a55")
    return partitioned, report


def _steps(svg: str) -> dict:
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter(f"{SVG}g"):
        texts = [t.text for t in g.iter(f"{SVG}text")]
        out[texts[0]] = (g.get("class"), texts[1:], g.find(f"{SVG}title").text)
    return out, root


def test_mobilenet_svg_has_one_box_per_partition_and_host_ops_with_reasons():
    partitioned, report = _mobilenet()
    svg = to_svg(partitioned, report)
    steps, root = _steps(svg)
    boxes = {title: v for title, v in steps.items() if v[0] == "step partition"}
    assert sorted(t.split(" ")[0] for t in boxes) == sorted(report.partitions)
    listed = [line for _cls, lines, _t in boxes.values() for line in lines]
    npu_rows = [r for r in report.rows if r.target == "npu"]
    assert len(listed) == len(npu_rows)  # each source op once: composites, not their insides
    assert not any("qnn.conv2d" in line for line in listed)
    hosts = [v for v in steps.values() if v[0] == "step host"]
    assert len(hosts) == len(report.host_rows) == 2
    for _cls, lines, tooltip in hosts:
        assert tooltip.startswith("forced onto the CPU")
        assert any("ms host" in line and "B moved" in line for line in lines)
    # fits a browser window's width (three columns of ops at most)
    assert float(root.get("width")) <= 1600


def test_every_edge_points_down_between_boxes():
    partitioned, report = _mobilenet()
    root = ET.fromstring(to_svg(partitioned, report))
    for path in root.iter(f"{SVG}path"):
        d = path.get("d")
        if not d.startswith("M") or " C" not in d:
            continue
        y1 = float(d[1:].split(" ")[0].split(",")[1])
        y2 = float(d.split(" ")[-1].split(",")[1])
        assert y2 > y1


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.ids, self.links = [], set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for key in ("src", "href"):
            if key in attrs:
                self.links.append(attrs[key])


def _html():
    partitioned, report = _mobilenet()
    est = estimate(partitioned, "npu, llvm", "cortex-a55")
    return render_html("mobilenet_v2_035_96", "npu, llvm", partitioned, report, est), report


def test_html_report_is_one_offline_file_with_picture_tables_and_reasons():
    html, report = _html()
    parser = _Collect()
    parser.feed(html)
    assert {"summary", "partitions", "picture", "estimate", "placement"} <= parser.ids
    assert "svg" in parser.tags
    assert not [link for link in parser.links if "://" in link]  # nothing fetched
    assert parser.tags.count("tr") >= len(report.rows) + 1
    for r in report.host_rows:
        assert r.reason.split(" (")[0] in html


def test_cli_svg_works_without_graphviz(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))  # no 'dot' anywhere on the path
    out = tmp_path / "p.svg"
    page = tmp_path / "p.html"
    status = main(
        [
            "inspect",
            str(NETS / "mobilenet_v2_035_96.tflite"),
            "-t",
            "npu, llvm",
            "--cpu-node",
            "5",
            "--host-model",
            "cortex-a55",
            "--svg",
            str(out),
            "--html",
            str(page),
            "--estimate",
        ]
    )
    assert status == 0
    assert out.read_text().startswith("<svg") and page.exists()
    printed = capsys.readouterr().out
    assert "whole-system estimate" in printed and "fallback cost" in printed


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"),
                    reason="Debian's chromium is not installed here")
def test_html_report_renders_in_headless_chromium(tmp_path):
    """The page in a real browser. .ci/run installs Debian's chromium, so under CI a missing
    browser is a failure, not a skip."""
    assert CHROMIUM is not None, "CI: Debian's chromium is missing (.ci/run installs it)"
    html, report = _html()
    page = tmp_path / "report.html"
    page.write_text(html)
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1280,900",
    ]
    env = dict(os.environ, HOME=str(tmp_path))
    dom = subprocess.run(
        [CHROMIUM, *flags, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    ).stdout
    assert "<svg" in dom and 'id="placement"' in dom
    for name in report.partitions:
        assert name in dom
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, *flags, f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
        env=env,
    )
    assert shot.exists() and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000  # something was drawn, not a blank page


def test_a_small_graph_with_host_islands_draws():
    partitioned = partition_for(int8_convnet(), "npu, llvm")
    report = placement_report(partitioned)
    steps, _ = _steps(to_svg(partitioned, report))
    kinds = sorted(v[0] for v in steps.values())
    assert kinds.count("step partition") == 2 and kinds.count("step host") >= 1
