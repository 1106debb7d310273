"""The table against the docs: every documented command has an entry, every entry a command, and
every entry names a test that exists (or why the command cannot run here)."""

from __future__ import annotations

from tests.docs.commands.parse import REPO, all_documented, documented_commands
from tests.docs.commands.table import COMMANDS


def test_normalise_and_parse_are_robust() -> None:
    page = (
        "Run `python train.py   a=1  # the comment` or `scripts/report.py` (a file) or `make` alone,\n"
        "or `bash scripts/x.sh`.\n"
        "```bash\n$ python x.py p='a # b' \\\n    q=2   # note\n#SBATCH --nodes=2\nexport X=1\n"
        "python - <<'EOF'\nimport os\npython not_a_command.py\nEOF\nmake bench ARGS=1\n```\n"
        "```text\n$ python scripts/bench.py k=v\ncommand: python scripts/bench.py k=v bench.json=x\n```\n"
    )
    assert documented_commands(page) == [
        "python train.py a=1",
        "bash scripts/x.sh",
        "python x.py p='a # b' q=2",
        "python - <<'EOF'",
        "make bench ARGS=1",
        "python scripts/bench.py k=v",
    ]


def test_every_documented_command_is_in_the_table() -> None:
    documented = all_documented()
    missing = {c: pages for c, pages in documented.items() if c not in COMMANDS}
    assert not missing, (
        "documented commands that no test runs and COMMANDS does not list (add a test, or the reason it "
        "cannot run here, to tests/docs/commands/table.py):\n"
        + "\n".join(f"  {c}   [{', '.join(p)}]" for c, p in missing.items())
    )
    stale = sorted(set(COMMANDS) - set(documented))
    assert not stale, "COMMANDS entries no longer in README.md or docs/*.md:\n" + "\n".join(stale)


def test_every_entry_names_a_test_that_exists_or_a_reason() -> None:
    for cmd, where in COMMANDS.items():
        head = where.split()[0]
        if head.startswith("tests/"):
            path, _, name = head.partition("::")
            assert (REPO / path).exists(), (cmd, where)
            assert not name or f"def {name}(" in (REPO / path).read_text(), (cmd, where)
        else:
            assert where.startswith(("not runnable here:", "template:", "covered by ")), (cmd, where)
