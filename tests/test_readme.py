"""The README's code runs: every block of README.md, read from the file itself, tested by its rule
(tests/readme_blocks.py lists them). Fast: each block has a rule, the Python parses, the registry
loads, the synopsis's options exist, the transcripts print the pick the README shows. Slow (they
start processes): each section's blocks run in order in a folder of their own, as a user
following that section would, with budgets capped (readme_prelude.BUDGET_CAP_S)."""

from __future__ import annotations

import ast
import glob
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

import readme_blocks as readme
from autoloader import LoaderConfig
from autoloader.cli import main as cli
from autoloader.integrations import formats
from conftest import REPO_ROOT, TESTS_DIR
from readme_prelude import BUDGET_CAP_S

BLOCKS = readme.blocks()
BIN = os.path.dirname(sys.executable)


def of(kind: str) -> list[readme.Block]:
    return [b for b in BLOCKS if readme.rule(b) == kind]


# --- fast ----------------------------------------------------------------------------------------

def test_every_block_and_every_command_line_has_a_rule():
    assert len(BLOCKS) >= 10, "the README's blocks were found"
    kinds = {b.where: readme.rule(b) for b in BLOCKS}   # raises naming a block no rule covers
    assert {"run", "output", "commands", "registry", "synopsis"} <= set(kinds.values()), kinds
    lines = [(b, line) for b in of("commands") for line in readme.command_lines(b)]
    assert any(readme.line_rule(line, b) == "run" for b, line in lines), "some command runs"
    for block, line in lines:
        assert readme.line_rule(line, block, cpus=2) in ("run",) or readme.line_rule(line, block, cpus=2).startswith(
            "skipped: ")


def test_a_block_without_a_rule_fails_naming_it():
    orphan = readme.Block("text", "some words\n", 7, "Somewhere", None, None)
    with pytest.raises(AssertionError, match=r"README.md:7 \(Somewhere, ```text\): no rule tests this block"):
        readme.rule(orphan)
    commands = readme.Block("bash", "make install\n", 9, "Somewhere", None, None)
    with pytest.raises(AssertionError, match="no rule for the command 'make install'"):
        readme.rule(commands)


def test_every_python_block_parses():
    for block in of("run") + of("file"):
        ast.parse(readme.script(block) if readme.rule(block) == "run" else block.text, block.where)


def _free_names(source: str) -> set[str]:
    """The names a block reads that it neither defines, imports, nor has as a builtin: what it
    would need from a hidden prelude to run as printed."""
    import builtins

    tree = ast.parse(source)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            bound |= {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)} if not isinstance(
                node, ast.ClassDef) else set()
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - bound


def test_every_python_block_runs_as_printed():
    """A user pastes a block as it is: no block reads a name it does not define or import, and
    the test runs it with nothing before it but the budget cap."""
    for block in of("run"):
        assert block.marker is None, block.where
        assert readme.script(block) == readme.CAP + "\n" + block.text
        assert not _free_names(block.text), (block.where, _free_names(block.text))
    assert _free_names("from autoloader import best_loader\nloader = best_loader(make())\n") == {"make"}


def test_the_install_section_is_what_ci_installs():
    """The README's install lines name the extras pyproject.toml declares, every one a user may
    want (the test extra aside); .ci/run installs from those extras, with a torch and torchvision
    that pair (each torch 2.N with torchvision 0.(N+15), as the demo's error says)."""
    import tomllib

    with open(os.path.join(REPO_ROOT, "pyproject.toml"), "rb") as f:
        extras = set(tomllib.load(f)["project"]["optional-dependencies"])
    install = next(b for b in BLOCKS if b.section == "Install" and b.lang == "bash")
    named = set(re.findall(r"pip install '\.\[(\w+)\]'", install.text))
    assert named and named <= extras and extras - named <= {"test"}, (named, extras)
    with open(os.path.join(REPO_ROOT, ".ci", "run")) as f:
        ci = f.read()
    ci_extras = set(re.search(r"pip install -q -e '\.\[([\w,]+)\]'", ci).group(1).split(","))
    assert ci_extras <= extras, ci_extras
    torch_pin, vision_pin = re.search(r"torch==(\d+\.\d+)\.\d+ torchvision==(\d+\.\d+)\.\d+", ci).groups()
    assert vision_pin == f"0.{int(torch_pin.split('.')[1]) + 15}", (torch_pin, vision_pin)


def test_the_registry_example_loads(tmp_path):
    from autoloader.fleet import registry

    for block in of("registry"):
        path = tmp_path / "registry.toml"
        path.write_text(block.text)
        loaded = registry.load(str(path))
        assert loaded.entries, block.where


def test_the_synopsis_names_only_options_the_commands_have():
    for block in of("synopsis"):
        command, text = None, {}
        for line in block.text.splitlines():
            if line.startswith("autoloader "):
                command = line.split()[1]
            text[command] = text.get(command, "") + line
        for command, synopsis in text.items():
            done = CliRunner().invoke(cli, [command, "-h"])
            assert done.exit_code == 0, (block.where, command, done.output)
            for option in set(re.findall(r"--[a-z][a-z-]*", synopsis)):
                assert option in done.output, f"{block.where}: {command} has no {option}"


def test_the_transcripts_print_the_pick_the_readme_shows_for_their_key():
    picks = {readme.readme_key(b): b for b in of("output")}
    for block in of("transcript"):
        commands = re.split(r"^\$ ", block.text, flags=re.M)[1:]
        assert commands, block.where
        for chunk in commands:
            line, _, printed = chunk.partition("\n")
            argv = line.split()
            key, form = argv[2], argv[argv.index("--format") + 1]
            assert key in picks, f"{block.where}: {key} is no result the README shows"
            table = dict(re.findall(r"^  ([a-z_]+)\s{2,}(\S+)\s*$", picks[key].text, re.M))
            config = LoaderConfig.make(int(table["batch_size"]), int(table["num_workers"]),
                                       table["pin_memory"] == "True", int(table.get("prefetch_factor", 2)),
                                       table.get("persistent_workers") == "True")
            assert formats.render(config, form) == printed, f"{block.where}: $ {line}"


# --- slow: each section's blocks run ----------------------------------------------------------------

def _runs(block: readme.Block) -> bool:
    if readme.rule(block) == "commands":
        return any(readme.line_rule(line, block) == "run" for line in readme.command_lines(block))
    return readme.rule(block) == "run"


# The sections where something runs (the others' lines are all skipped, each by a listed rule).
SECTIONS = list(dict.fromkeys(b.section for b in BLOCKS if _runs(b)))


def _env(home: str) -> dict:
    path = os.pathsep.join([REPO_ROOT, TESTS_DIR, os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "AUTOLOADER_HOME": home, "PYTHONPATH": path, "PATH": BIN + os.pathsep + os.environ["PATH"]}


def _python(block: readme.Block, folder: str, env: dict) -> subprocess.CompletedProcess:
    program = readme.script(block)
    if readme.guarded(block):
        path = os.path.join(folder, f"readme_block_{block.line}.py")
        with open(path, "w") as f:
            f.write(program)
        argv = [sys.executable, path]
    else:
        argv = [sys.executable, "-c", program]
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def _check_output(block: readme.Block, done: subprocess.CompletedProcess) -> None:
    lines = (done.stderr + done.stdout).splitlines()
    for what, prefix in readme.output_claims(block):
        assert any(line.startswith(prefix) for line in lines), f"{block.where}: {what} ({prefix!r}) not printed:\n{done.stderr[-3000:]}"
    start = next((line for line in lines if line.startswith("autoloader: tuning ")), "")
    if " on cpu " in start:   # the README's runs were on the CPU: the same problem, the same key
        assert start.split()[2] == readme.readme_key(block), f"{block.where}: the README's key is stale: {start}"
    claimed = set(readme.rows(block.text)) - set(readme.CONDITIONAL_ROWS)
    missing = claimed - set(readme.rows(done.stdout))
    assert not missing, f"{block.where}: rows {sorted(missing)} not printed:\n{done.stdout}"


def _check_report(block: readme.Block, key: str, home: str, env: dict, folder: str) -> None:
    done = subprocess.run([os.path.join(BIN, "autoloader"), "report", key], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [page] = glob.glob(os.path.join(home, "*", f"{key}.md"))
    with open(page) as f:
        text = f.read()
    findings = re.findall(r"^(\d)\. (.+) \((?:measured|profiled|predicted)[^)]*\):", block.text, re.M)
    assert len(findings) >= 2, f"{block.where}: the abridged page's findings were read"
    for n, title in findings:
        if n != "2":   # the second finding names what limits that run's supply: the run's own
            assert f"{n}. **{title}**" in text, f"{block.where}: finding {n}. {title} not on the page"
    assert "## What would help" in text and ("### Predicted to help" in text or "### Considered" in text)


@pytest.mark.slow
@pytest.mark.parametrize("section", SECTIONS)
def test_the_sections_code_runs(section, tmp_path, results_home):
    folder = str(tmp_path / "work")
    os.makedirs(folder)
    env = _env(results_home)
    last = None
    for block in [b for b in BLOCKS if b.section == section]:
        kind = readme.rule(block)
        if kind == "file":
            with open(os.path.join(folder, block.marker[1]), "w") as f:
                f.write(block.text)
        elif kind == "run":
            done = _python(block, folder, env)
            assert done.returncode == 0, f"{block.where} raised:\n{done.stderr[-4000:]}"
            if readme.claims_reuse(block):
                # Progress goes to the log: each tune() the block calls says it tunes, the reuse says so.
                starts = [line for line in done.stderr.splitlines() if line.startswith("autoloader: tuning ")]
                assert len(starts) <= len(re.findall(r"(?<![\w.])tune\(", block.text)), \
                    f"{block.where} tuned again:\n{done.stderr[-3000:]}"
                assert "autoloader: using the stored result " in done.stderr, done.stderr[-3000:]
                # And closes with the settings it applied (NOTE [ The closing line ] in api.py).
                assert re.search(r"^autoloader: applied batch_size=.* \(reused(; provisional)?, .*; result .*\.json\)$",
                                 done.stderr, re.M), done.stderr[-3000:]
        elif kind == "commands":
            for line in readme.command_lines(block):
                if readme.line_rule(line, block) != "run":
                    continue
                argv = readme.capped(line, BUDGET_CAP_S) if line.startswith("autoloader ") else line.split()
                program = sys.executable if argv[0] == "python" else os.path.join(BIN, argv[0])
                last = subprocess.run([program, *argv[1:]], cwd=folder, env=env,
                                      capture_output=True, text=True, timeout=600)
                assert last.returncode == 0, f"{block.where}: {line}\n{last.stderr[-4000:]}"
        elif kind == "output":
            assert last is not None, f"{block.where}: no command ran before it"
            _check_output(block, last)
        elif kind == "report":
            start = next(line for line in last.stderr.splitlines() if line.startswith("autoloader: tuning "))
            _check_report(block, start.split()[2], results_home, env, folder)
