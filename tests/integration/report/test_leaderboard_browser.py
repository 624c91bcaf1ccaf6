"""The static leaderboard renders in a real headless Chromium: the table sorts, the figures load."""

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from sregym.report.site import build_leaderboard, slug

_spec = importlib.util.spec_from_file_location(
    "report_records", Path(__file__).parents[2] / "unit" / "report" / "report_records.py")
report_records = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report_records)

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium(tmp_path: Path, *args: str) -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian package `chromium` must be installed (listed in .ci/apt-packages.txt)"
    proc = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    results = report_records.write_records(report_records.synthetic_suite(), tmp_path_factory.mktemp("results"))
    return build_leaderboard([results], tmp_path_factory.mktemp("site"), resamples=300)


def test_the_table_lists_ranked_agents_only_and_sorts_from_the_address(site, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", f"{site.as_uri()}?sort=tokens&dir=desc")
    table = dom[dom.index('id="leaderboard"'):]
    table = table[: table.index("</table>")]
    assert 'data-sorted-by="tokens"' in table
    agents = re.findall(r'<a href="agent/[^"]+">([^<]+)</a>', table)
    assert agents[0] == "react (m-1)"  # the only agent with tokens, first when sorted by tokens descending
    assert sorted(agents) == ["noop", "random", "react (m-1)"]  # the oracle agent is never ranked
    for key in ("suite", "seeds", "version", "date"):
        assert f'data-key="{key}"' in table


def test_every_figure_loads_in_the_browser(site, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", site.as_uri())
    assert dom.count('data-state="loaded"') == 6
    assert 'data-state="missing"' not in dom


def test_the_screenshot_shows_a_drawn_page(site, tmp_path):
    shot = tmp_path / "index.png"
    chromium(tmp_path, "--window-size=1280,1400", f"--screenshot={shot}", site.as_uri())
    pixels = matplotlib.image.imread(shot)
    # a blank or error page has a handful of colours; the table, the bars and the heatmap have many
    colours = np.unique((pixels[..., :3] * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 500


def test_one_page_per_ranked_agent_and_per_problem(site):
    root = site.parent
    assert {p.name for p in (root / "agent").glob("*.html")} == {
        f"{slug(a)}.html" for a in ("noop", "random", "react (m-1)")}
    assert len(list((root / "problem").glob("*.html"))) == 6
    page = (root / "agent" / f"{slug('react (m-1)')}.html").read_text()
    assert "P(mitigation | diagnosis correct)" in page and "kubectl verbs" in page
