"""The report: rendered from a stored result without running a trial, through the CLI, in a real
headless Chromium (what a person sees), and after a real short tune with ``--report``."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from autoloader.cli import main
from autoloader.explain import explain
from autoloader.explain.page import report_paths, write_report
from autoloader.store.result import TuneResult

from conftest import WORKLOADS
from explain_cases import synthetic_result

def text_of(page: str) -> str:
    """The page's text without its markup, as a reader gets it."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


PLOTS = ("worker_curve", "wait_share", "memory", "predicted_vs_measured", "timeline")
PNG = b"\x89PNG\r\n\x1a\n"


def stored(folder) -> tuple[str, dict]:
    path = os.path.join(str(folder), "synthetic-1x-16cpu-64g-00000000", "synthetic-n1000-0000000000.json")
    os.makedirs(os.path.dirname(path))
    data = synthetic_result(path)
    with open(path, "w") as fh:
        json.dump(data, fh)
    return path, data


@pytest.fixture
def no_trials(monkeypatch):
    """A report runs no trial: starting the trial process fails the test."""
    from autoloader.probe import driver

    def refuse(self, *args, **kwargs):
        raise AssertionError("the report started a trial process")

    monkeypatch.setattr(driver.TrialRunner, "start", refuse)
    monkeypatch.setattr(driver.TrialRunner, "measure", refuse)


@pytest.mark.slow   # draws five plots
def test_the_report_renders_from_a_stored_result_without_a_trial(tmp_path, no_trials):
    path, data = stored(tmp_path)
    result = CliRunner().invoke(main, ["report", path])
    assert result.exit_code == 0, result.output
    paths = report_paths(path)
    assert paths["html"] in result.output
    page = open(paths["html"]).read()
    verdict = explain(TuneResult.from_dict(data)).verdict
    assert verdict.headline in text_of(page)
    # Self-contained: every image inline, nothing fetched.
    sources = re.findall(r"<img [^>]*src='([^']*)'", page)
    assert len(sources) == len(PLOTS)
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG)
    assert not re.search(r"<(script|link)\b|https?://|url\(", page)
    # Every trial, by DataLoader's own names.
    table = page.split("<table id='trials-table'>", 1)[1].split("</table>", 1)[0]
    assert table.count("<tr") == len(data["trials"]) + 1
    for name in ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "in_order"):
        assert name in table.replace("_<wbr>", "_")
    assert "num_workers=15" in page or "num_workers=" in page   # the snippet's arguments
    # The markdown twin links PNGs written beside it.
    markdown = open(paths["markdown"]).read()
    assert verdict.headline in markdown
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert len(links) == len(PLOTS)
    for link in links:
        with open(os.path.join(os.path.dirname(paths["markdown"]), link), "rb") as fh:
            assert fh.read(8) == PNG


@pytest.mark.slow
def test_the_report_finds_a_result_by_its_key(tmp_path, no_trials):
    path, data = stored(tmp_path)
    result = CliRunner().invoke(main, ["report", data["dataset_key"], "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert os.path.isfile(report_paths(path)["html"])


def test_a_result_without_a_profile_is_refused(tmp_path, no_trials):
    path, data = stored(tmp_path)
    del data["profile"]
    with open(path, "w") as fh:
        json.dump(data, fh)
    result = CliRunner().invoke(main, ["report", path])
    assert result.exit_code == 2
    assert "profile" in result.output and "tune again" in result.output


CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)
PROBE = """<script>
window.addEventListener('load', () => {
  const verdict = document.getElementById('verdict-text');
  const box = verdict.getBoundingClientRect();
  const rows = document.querySelectorAll('#trials-table tr');
  document.body.setAttribute('data-probe', JSON.stringify({
    images: [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight,
                                           i.getBoundingClientRect().width]),
    verdict: verdict.innerText, verdictBox: [box.width, box.height], rows: rows.length,
    table: document.getElementById('trials-table').innerText}));
});
</script></body>"""


def chromium(*args: str, timeout: float = 120) -> str:
    """Headless Chromium (as root it needs --no-sandbox); its stdout."""
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--no-first-run", "--hide-scrollbars", *args], capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium: apt-get install -y chromium (as .ci/run does)")
def test_the_page_as_a_person_sees_it_in_chromium(tmp_path, no_trials):
    from PIL import Image

    path, data = stored(tmp_path)
    written = write_report(path, TuneResult.from_dict(data))
    paths = {"html": written.html}
    verdict = explain(TuneResult.from_dict(data)).verdict
    # What is visible once loaded: the page itself, with a probe that reads the DOM after load.
    probe = os.path.join(str(tmp_path), "probe.html")
    with open(probe, "w") as fh:
        fh.write(open(paths["html"]).read().replace("</body>", PROBE))
    profile = str(tmp_path / "chromium-profile")
    dom = chromium(f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom", f"file://{probe}")
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found, dom[-2000:]
    seen = json.loads(html.unescape(found.group(1)))
    assert len(seen["images"]) == len(PLOTS)
    for complete, width, height, shown in seen["images"]:
        assert complete and width > 300 and height > 150 and shown > 300   # every plot loaded and laid out
    assert verdict.headline.split(":")[0] in seen["verdict"] and seen["verdictBox"][1] > 20
    assert seen["rows"] == len(data["trials"]) + 1
    assert "kept out" in seen["table"] or "constraint" in seen["table"]
    # And the screenshot a person would see.
    shot = str(tmp_path / "page.png")
    chromium(f"--user-data-dir={profile}", "--window-size=1280,6000", f"--screenshot={shot}", f"file://{paths['html']}")
    image = Image.open(shot).convert("L")
    assert image.size == (1280, 6000)
    histogram = image.histogram()
    inked = sum(histogram[:200]) / sum(histogram)
    assert inked > 0.03, f"the page looks blank: {inked:.1%} of it is ink"
    if os.environ.get("AUTOLOADER_KEEP_SCREENSHOT"):
        shutil.copy(shot, os.environ["AUTOLOADER_KEEP_SCREENSHOT"])


@pytest.mark.slow   # a real short tune
def test_tune_with_report_writes_the_page_and_says_the_verdict(tmp_path):
    out = str(tmp_path / "out")
    step = os.path.join(os.path.dirname(WORKLOADS), "explain_workloads.py")
    result = CliRunner().invoke(main, ["tune", "--dataset", f"{WORKLOADS}:tiny", "--step", f"{step}:sleepy_step",
                                       "--batch-size", "32", "--budget", "25", "--out", out, "--quiet", "--report"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    line = next(text for text in lines if text.strip().startswith("verdict"))
    saved = next(text.split("saved ", 1)[1].strip() for text in lines if "saved " in text)
    data = json.load(open(saved))
    assert data["inputs"]["step"].endswith("sleepy_step") and data["inputs"]["timeline"]
    # The step's identity, as its key holds it, for `show` to name (module.qualname#digest).
    assert re.fullmatch(r".*\bsleepy_step#[0-9a-f]{12}", data["inputs"]["step_identity"]), data["inputs"]
    # The step sleeps 50 ms a batch of 32 tiny samples: the loop is fed and the step holds it.
    verdict = explain(TuneResult.from_dict(data)).verdict
    assert verdict.kind in ("compute", "balanced"), verdict.paragraph
    assert verdict.headline in line
    page = open(report_paths(saved)["html"]).read()
    assert verdict.headline in text_of(page) and page.count("data:image/png;base64,") == len(PLOTS)


@pytest.mark.slow   # a real short re-tune
def test_retune_with_report_links_each_datasets_page(tmp_path):
    registry = tmp_path / "fleet.toml"
    registry.write_text(f"""
[defaults]
budget = 10
device = "cpu"

[[datasets]]
name = "tiny"
dataset = "{WORKLOADS}:tiny"
batch_size = 32
""")
    out = str(tmp_path / "out")
    result = CliRunner().invoke(main, ["retune", str(registry), "--out", out, "--quiet", "--report"])
    # A loaded machine (other processes past the busy share) makes the night inconclusive, exit
    # 5: the report is linked all the same.
    assert result.exit_code == 0 or (result.exit_code == 5 and "inconclusive" in result.output), result.output
    (section,) = [text for text in result.output.splitlines() if text.startswith("- report: ")]
    page = section.split("](", 1)[1].rstrip(")")
    assert os.path.isfile(page) and page.endswith(".html")
    saved = page[:-len(".html")] + ".json"
    assert explain(TuneResult.from_dict(json.load(open(saved)))).verdict.headline in text_of(open(page).read())
