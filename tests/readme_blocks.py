"""The README's code blocks, read from README.md itself, and the rule each is tested by
(tests/test_readme.py runs them).

Every fenced block gets exactly one rule, and a block or a command line that no rule covers fails
the test, naming it: nothing is left out silently. A block may be preceded by a marker, an HTML
comment the rendered page does not show: ``<!-- readme-test: file data.py -->`` (the block is that
file of the user's folder) or ``<!-- readme-test: report -->`` (an abridged report page of the tune
before it).

The rules, by language:

* ``python``: with a ``file`` marker, written to the section's folder (later blocks import it);
  else run in a fresh process as printed, nothing before it but the budget cap: as a script file when it has an ``if __name__ == "__main__":`` guard, else as
  ``python -c`` (a fragment, as pasted into an interactive session: spawn then re-runs nothing).
  The cap keeps budgets at most readme_prelude.BUDGET_CAP_S. A block whose comment says it
  "finds the stored result" must not tune.
* ``bash``: line by line, comments dropped; SKIPPED says which lines are not run and why; an
  ``autoloader`` line is run in the section's folder with ``--budget`` at most the cap, and a
  ``python FILE.py`` line runs the file an earlier block of the section wrote.
* ``text``: right after a bash block, that command's output, checked for the lines it claims
  that do not depend on the run's figures (``output_claims``); with a ``report`` marker, the
  page's headings; lines starting ``$ autoloader show KEY --format F``, a transcript whose
  output must be ``formats.render`` of the pick the README shows for KEY; lines starting
  ``autoloader COMMAND``, a synopsis whose options must exist in ``COMMAND -h``.
* ``toml``: loaded by the retune registry's loader.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

from conftest import REPO_ROOT

README = os.path.join(REPO_ROOT, "README.md")
MARKER = re.compile(r"<!--\s*readme-test:\s*(\w+)\s*(.*?)\s*-->")

# A block runs as printed: nothing is put before it but the budget cap (CAP), so a user who
# pastes it has every name it uses.
CAP = "import readme_prelude\nreadme_prelude.cap_budgets()\n"

# Command lines not run, each with why: (what the line starts with, why).
SKIPPED = (
    ("pip ", "installs packages: the tests run in the environment they were installed in"),
    ("python -m pytest", "the test suite itself"),
    ("torchrun ", "needs the user's own train.py; the ranks' tune is tests/test_distributed.py's"),
)
# An autoloader line of more ranks than this machine has CPUs is refused by design (and the node
# tune has tests of its own: tests/test_distributed.py).
NPROC = re.compile(r"--nproc-per-node\s+(\d+)")

# Table rows a result prints only for some picks or runs: not claimed by every output.
CONDITIONAL_ROWS = {
    "prefetch_factor": "only a pick with workers has it",
    "persistent_workers": "only a pick with workers has it",
    "memory": "only when the pick's memory was forecast",
    "in_order": "only with --allow-reorder",
}


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int                   # the fence's line in README.md, from 1
    section: str                # the ## heading above it
    marker: tuple[str, str] | None
    previous: "Block | None"    # the block before it in the same section

    @property
    def where(self) -> str:
        return f"README.md:{self.line} ({self.section}, ```{self.lang})"


def blocks(path: str = README) -> list[Block]:
    """Every fenced block of ``path`` in order."""
    with open(path) as f:
        lines = f.read().splitlines()
    found: list[Block] = []
    section, marker, i = "", None, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line[3:].strip()
        match = MARKER.search(line)
        if match:
            marker = (match.group(1), match.group(2))
        if line.startswith("```"):
            lang, start, body = line[3:].strip(), i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            before = found[-1] if found and found[-1].section == section else None
            found.append(Block(lang, "\n".join(body) + "\n", start, section, marker, before))
            marker = None
        elif line.strip() and not match:
            marker = None   # a marker names the block right below it, blank lines between at most
        i += 1
    return found


def rule(block: Block) -> str:
    """The rule that tests ``block`` (the module docstring); raises naming a block no rule covers."""
    kind = block.marker[0] if block.marker else None
    if block.lang == "python":
        if kind == "file":
            return "file"
        if kind is not None:
            raise AssertionError(f"{block.where}: marker {kind!r} means nothing for python (a block runs as "
                                 "printed: no prelude)")
        return "run"
    if block.lang == "bash":
        for line in command_lines(block):
            line_rule(line, block)
        return "commands"
    if block.lang == "toml":
        return "registry"
    if block.lang == "text":
        lines = [l for l in block.text.splitlines() if l.strip()]
        if kind == "report":
            return "report"
        if lines and all(l.startswith(("$ ", "def ", "    ")) or not l.startswith(" ") for l in lines) \
                and lines[0].startswith("$ autoloader show "):
            return "transcript"
        if lines and lines[0].startswith("autoloader ") and all(l.startswith(("autoloader ", " ")) for l in lines):
            return "synopsis"
        if block.previous is not None and block.previous.lang == "bash":
            return "output"
    raise AssertionError(f"{block.where}: no rule tests this block; add one to tests/readme_blocks.py "
                         "(or a readme-test marker before it)")


def command_lines(block: Block) -> list[str]:
    """A bash block's commands, comments dropped."""
    out = []
    for raw in block.text.splitlines():
        line = re.sub(r"\s+#.*$", "", raw).strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def line_rule(line: str, block: Block, cpus: int | None = None) -> str:
    """'run', or 'skipped: why'; raises for a line no rule covers."""
    for start, why in SKIPPED:
        if line.startswith(start):
            return f"skipped: {why}"
    if re.fullmatch(r"python [\w.-]+\.py", line):   # a script an earlier block of the section wrote
        return "run"
    if line.startswith("autoloader "):
        nproc = NPROC.search(line)
        if nproc and int(nproc.group(1)) > (cpus or os.cpu_count() or 1):
            return "skipped: more ranks than this machine's CPUs (tests/test_distributed.py tunes two)"
        return "run"
    raise AssertionError(f"{block.where}: no rule for the command {line!r}; add one to SKIPPED or run it")


def capped(line: str, cap: float) -> list[str]:
    """An autoloader command's argv, its --budget at most ``cap``."""
    argv = shlex.split(line)
    if "--budget" in argv:
        at = argv.index("--budget") + 1
        argv[at] = str(min(float(argv[at]), cap))
    elif argv[1:2] == ["tune"]:
        argv += ["--budget", str(cap)]
    return argv


def script(block: Block) -> str:
    """A python block's program: the budget cap, then the block as printed."""
    return CAP + "\n" + block.text


def guarded(block: Block) -> bool:
    return re.search(r'^if __name__ == "__main__":', block.text, re.M) is not None


def claims_reuse(block: Block) -> bool:
    return "finds the stored result" in block.text


ROW = re.compile(r"^  ([a-z][a-z0-9_=\-]*(?: [a-z0-9_=\-]+)*)\s{2,}\S")


def rows(text: str) -> list[str]:
    """The table rows' labels of a result's text."""
    return [m.group(1) for m in map(ROW.match, text.splitlines()) if m]


def output_claims(block: Block) -> list[tuple[str, str]]:
    """(what, the prefix an output line must start with) for each line of an output block whose
    words do not depend on the run's figures; rows are checked by ``rows``."""
    claims = []
    for line in block.text.splitlines():
        if line.startswith("  waiting for the trial process"):
            claims.append(("the first line", line.split("(")[0]))
        elif line.startswith("autoloader: tuning "):
            key = line.split()[2]
            claims.append(("the start line and the key's readable part", "autoloader: tuning " + key.rsplit("-", 1)[0]))
        elif line.startswith("  profile ["):
            claims.append(("the profile line", "  profile ["))
        elif line.startswith("  trial 1 of ~"):
            claims.append(("the first trial's line", "  trial 1 of ~"))
        elif line.startswith("autoloader: tuned DataLoader config"):
            claims.append(("the table's title", line))
        # A tune in the run says what it picked once its rounds settle, which on a busy machine
        # can be past the example's epochs: its closing line and the reuse after it are not
        # claimed (its own tests check them: tests/test_inrun.py).
        elif line.startswith("autoloader: watch, epoch 1, "):
            claims.append(("watch's line", "autoloader: watch, epoch 1, "))
    return claims


def readme_key(block: Block) -> str | None:
    """The dataset key an output block's start line names."""
    for line in block.text.splitlines():
        if line.startswith("autoloader: tuning "):
            return line.split()[2]
    return None
