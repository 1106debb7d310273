"""The mutation check's command line: which mutants, how, and the one-line-per-mutant table."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dev.mutation_testing.mutants import BASELINE, MUTANTS, Mutant
from dev.mutation_testing.runner import Result, check, run_one, tree_files


def main(argv: Sequence[str], repo: Path, doc: str = "") -> int:
    """scripts/mutation_check.py: list, check or run the mutants against the tree at `repo`; exit 1
    if any survived or errored, 2 on a bad argument or a failing baseline."""
    p = argparse.ArgumentParser(description=(doc or __doc__ or "").splitlines()[0])
    p.add_argument("--list", action="store_true", help="print the mutants and exit")
    p.add_argument("--check", action="store_true", help="check every mutant applies; run no tests")
    p.add_argument("--only", default="", help="comma-separated mutant names")
    p.add_argument("--fast", action="store_true", help='add -m "not slow and not multiproc"')
    p.add_argument("--jobs", type=int, default=1, help="mutants run at a time (default 1)")
    p.add_argument("--timeout", type=float, default=1200.0, help="seconds per mutant (default 1200)")
    p.add_argument("--out", type=Path, help="also write the result table here")
    p.add_argument("--baseline", action="store_true", help="first check the unmutated tree passes")
    p.add_argument("--logs", type=Path, help="write each mutant's pytest output to LOGS/NAME.log")
    p.add_argument(
        "--tests",
        default="",
        help="comma-separated pytest ids to run instead of the whole suite (checking a new mutant "
        "against the test meant to kill it; `make mutants` without it is the real check)",
    )
    args = p.parse_args(list(argv))

    mutants = MUTANTS
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        known = {m.name: m for m in MUTANTS}
        if unknown := [n for n in wanted if n not in known]:
            print(f"--only: unknown mutant(s) {', '.join(unknown)}; see --list", file=sys.stderr)
            return 2
        mutants = [known[n] for n in wanted]
    width = max(len(m.name) for m in mutants)
    if args.list or args.check:
        bad = 0
        if args.check and (twice := duplicate_names(MUTANTS)):
            print(f"ERROR mutant name(s) used twice: {', '.join(twice)}; each mutant needs its own name")
            bad += len(twice)
        for m in mutants:
            problem = check(m, repo) if args.check else None
            bad += problem is not None
            status = "" if not args.check else ("ERROR " + problem if problem else "ok")
            print(f"{m.name:<{width}}  {m.file:<36} {status or m.why}")
        if args.check:
            print(f"{len(mutants) - bad} of {len(mutants)} mutants apply")
        return 1 if bad else 0

    files = tree_files(repo)
    tests = [t.strip() for t in args.tests.split(",") if t.strip()]
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
    results: dict[str, Result] = {}
    if args.baseline:
        status, detail, took = run_one(BASELINE, repo, files, args.fast, args.timeout, args.logs, tests)
        print(f"baseline (unmutated): {status.replace('SURVIVED', 'passes')} in {took:.0f} s", flush=True)
        if status != "SURVIVED":
            print(f"the suite fails without a mutant ({detail}): mutants not run", file=sys.stderr)
            return 2

    def row(m: Mutant) -> str:
        status, detail, took = results[m.name]
        return f"{status:<8} {m.name:<{width}} {took:6.0f} s  {detail}"

    def one(m: Mutant) -> None:
        results[m.name] = run_one(m, repo, files, args.fast, args.timeout, args.logs, tests)
        print(row(m), flush=True)  # as each finishes; --out keeps the list's order

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, mutants))
    lines = [row(m) for m in mutants]
    counts = {s: sum(r[0] == s for r in results.values()) for s in ("KILLED", "TIMEOUT", "SURVIVED", "ERROR")}
    summary = (
        f"{counts['KILLED']} killed, {counts['TIMEOUT']} timed out (killed), {counts['SURVIVED']} survived, "
        f"{counts['ERROR']} errors, of {len(mutants)} mutants" + (" (--fast)" if args.fast else "")
    )
    print(summary)
    if args.out:
        args.out.write_text("\n".join([*lines, summary]) + "\n")
    return 1 if counts["SURVIVED"] or counts["ERROR"] else 0


def duplicate_names(mutants: list[Mutant]) -> list[str]:
    """Names given to more than one mutant (`--only` and the results table key on the name)."""
    counts = Counter(m.name for m in mutants)
    return sorted(name for name, n in counts.items() if n > 1)
