"""The benchmark's report: setup, FLOP accounting, one row per variant, and the paired ratios judged
against the targets (on a CPU by this process's CPU time, since wall time on a shared machine mostly
measures the other processes; on a GPU by wall time)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gptlab.bench.options import BARE, LIGHTNING, TELEMETRY_EVERY
from gptlab.bench.result import BenchResult

TARGET_RATIO = 0.97  # lightning tokens/s over bare
TARGET_TELEMETRY = {10: 0.01, 1: 0.05}  # step-time overhead of telemetry logging every n steps
FLOPS_NOTE = (
    "N = GPT.num_params(exclude_embedding=True): lookup tables (tok_emb when untied, pos_emb) "
    "dropped, the tied head matrix kept, because the head matmul is real compute; 12·L·T·d counts "
    "full (non-causal) attention, as PaLM and nanoGPT do"
)


def _si(x: float, unit: str = "") -> str:
    for div, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def _spread(values: Sequence[float], fmt: str) -> str:
    return f"{fmt.format(min(values))}–{fmt.format(max(values))}"


def _verdict(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def format_table(r: BenchResult) -> str:
    """The human-readable report: setup, FLOP accounting, the per-variant table, the ratios."""
    gpu = not r.setup["device"].startswith("cpu")
    return "\n".join([*_setup(r), "", *_variant_rows(r, gpu), "", *_verdicts(r, gpu), *_data(r)])


def _setup(r: BenchResult) -> list[str]:
    """What ran, how it was timed, and the FLOP accounting behind MFU."""
    m, s = r.model, r.setup
    lines = [
        f"model: L={m['n_layer']} d={m['n_embd']} H={m['n_head']} T={m['block_size']} "
        f"V={m['vocab_size']} {m['norm_placement']}/{m['norm']}/{m['ffn']} "
        f"{'tied' if m['tie_embeddings'] else 'untied'} {m['pos_emb']}, {m['num_params']:,} parameters",
        f"setup: {s['device']} ({s['threads']} threads), precision {s['precision']}, compile "
        f"{str(s['compile']).lower()}, batch {s['batch_size']} × {m['block_size']} = "
        f"{s['tokens_per_step']} tokens/step, torch {s['torch']}, lightning {s['lightning']}",
        f"timing: {s['warmup']} warm-up + {s['steps']} timed steps per run, {s['repeats']} rounds, "
        "variants interleaved (order rotated each round); medians over rounds [min–max]",
        f"FLOPs/token = 6·N + 12·L·T·d = 6·{r.n_params_flops:,} + 12·{m['n_layer']}·"
        f"{m['block_size']}·{m['n_embd']} = {r.flops_per_token:,}",
        f"  ({FLOPS_NOTE})",
    ]
    if r.peak_flops:
        extra = ""
        if r.peak_samples:
            extra = f", median of {len(r.peak_samples)} [{_spread(r.peak_samples, '{:.3g}')}]"
        lines.append(f"peak: {_si(r.peak_flops, 'FLOP/s')} ({r.peak_source}{extra})")
        if s["precision"] != "bf16-mixed" and "table" in r.peak_source:
            lines.append("  (note: the table's peak is bf16; this run is not, so its MFU is understated)")
    else:
        lines.append("peak: unknown (no MFU)")
    lines.append(
        f"lightning path: Trainer + callbacks of gptlab.training.app (loggers: "
        f"{'+'.join(s['loggers']) or 'none'}; progress bar "
        f"{'on, refresh every ' + str(s['progress_refresh_rate']) if s['progress_bar'] else 'off'}; "
        f"ModelCheckpoint kept, it writes only after the timed window; log every "
        f"{s['log_every_n_steps']} steps; no validation)"
    )
    return lines


def _variant_rows(r: BenchResult, gpu: bool) -> list[str]:
    """One row per variant: medians over rounds, the tokens/s spread, MFU and memory."""
    header = (
        f"{'variant':<24} {'tokens/s':>10} {'[min–max]':>17} {'step ms':>9} {'p50 ms':>8} "
        f"{'MFU':>7} {'peak mem':>10} {'faults/step':>12}" + ("" if gpu else f" {'CPU ms/step':>12}")
    )
    mem_label = "max allocated" if gpu else "peak RSS (process)"
    lines = [header, "-" * len(header)]
    for v in r.setup["variants"]:
        runs = r.of(v)
        if not runs:
            continue
        tps = [r.tokens_per_sec(x) for x in runs]
        step = statistics.median(x.window / len(x.step_times) for x in runs) * 1e3
        p50 = "–" if gpu else f"{statistics.median(t for x in runs for t in x.step_times) * 1e3:.1f}"
        mfu = f"{statistics.median(tps) * r.flops_per_token / r.peak_flops:.1%}" if r.peak_flops else "–"
        mem = statistics.median(x.peak_mem for x in runs) / 2**20
        lines.append(
            f"{v:<24} {statistics.median(tps):>10.0f} {_spread(tps, '{:.0f}'):>17} {step:>9.1f} "
            f"{p50:>8} {mfu:>7} {mem:>7.0f} MiB {statistics.median(x.faults for x in runs):>12.0f}"
            + (
                ""
                if gpu
                else f" {statistics.median(x.cpu_window / len(x.step_times) for x in runs) * 1e3:>12.1f}"
            )
        )
    lines.append(
        f"(peak mem: {mem_label}; step ms: mean over the timed window; p50: median step; "
        "faults/step: minor page faults of the process, i.e. memory the allocator mapped afresh"
        + ("" if gpu else "; CPU ms/step: this process's CPU time, blind to other processes")
        + ")"
    )
    return lines


def _verdicts(r: BenchResult, gpu: bool) -> list[str]:
    """The paired ratios against the targets, by the clock that judges them."""
    lines = []
    # On a CPU the verdicts use CPU time: on a shared machine wall time mostly measures the others.
    clocks = ("wall",) if gpu else ("cpu", "wall")
    judge = clocks[0]
    if not gpu:
        lines.append(
            "ratios by CPU time (the verdict; with bench.threads=1 it ignores contention), then wall time:"
        )
    for num in (LIGHTNING, "lightning+telemetry/10"):
        for clock in clocks:
            ratios = r.paired(num, BARE, clock)
            if not ratios:
                continue
            med = statistics.median(ratios)
            verdict = (
                f" (target >= {TARGET_RATIO}: {_verdict(med >= TARGET_RATIO)})" if clock == judge else ""
            )
            lines.append(
                f"{num} / bare, tokens/s ({clock}): {med:.3f} [per round {_spread(ratios, '{:.3f}')}]"
                + verdict
            )
    for variant, every in TELEMETRY_EVERY.items():
        for clock in clocks:
            ratios = r.paired(LIGHTNING, variant, clock)  # without / with = step time with / without
            if not ratios:
                continue
            over = [x - 1 for x in ratios]
            med = statistics.median(over)
            target = TARGET_TELEMETRY[every]
            verdict = f" (target <= {target:.0%}: {_verdict(med <= target)})" if clock == judge else ""
            lines.append(
                f"telemetry every {every:>2} step(s) ({clock}): {med:+.1%} step time vs none "
                f"[per round {_spread(over, '{:+.1%}')}]" + verdict
            )
    base = r.of(LIGHTNING)
    for variant, every in TELEMETRY_EVERY.items():
        runs = r.of(variant)
        if not runs or not base:
            continue
        clock = "wall" if gpu else "cpu"
        own = statistics.median(x.hook_seconds / len(x.step_times) for x in runs)
        step = statistics.median((x.window if gpu else x.cpu_window) / len(x.step_times) for x in base)
        target = TARGET_TELEMETRY[every]
        lines.append(
            f"telemetry every {every:>2} step(s), its hooks' own {'host' if gpu else 'CPU'} time: "
            f"{own * 1e3:.2f} ms/step = {own / step:.2%} of the telemetry-off step ({clock})"
            + (f" (target <= {target:.0%}: {_verdict(own / step <= target)})" if not gpu else "")
        )
    return lines


def _data(r: BenchResult) -> list[str]:
    """Whether the DataLoader keeps up, and what tokenizing the corpus costs."""
    lines = []
    if r.loader_batches_per_sec is not None:
        consumed = [len(x.step_times) / x.window for x in (r.of(BARE) or r.runs)]
        need = statistics.median(consumed)
        lines.append(
            f"data: train DataLoader alone {r.loader_batches_per_sec:,.1f} batches/s "
            f"(num_workers={r.setup['num_workers']}); the model consumes {need:,.2f} batches/s "
            f"({'bare' if r.of(BARE) else r.runs[0].variant}) → loader headroom "
            f"{r.loader_batches_per_sec / need:,.0f}×"
        )
    if r.tokenize:
        t = r.tokenize
        lines.append(
            f"tokenize configured corpus ({t['tokens']:,.0f} tokens): cold {t['cold_s']:.2f} s "
            f"(fresh cache dir; load {t['load_s']:.2f} s + tokenize/pack {t['tokenize_s']:.2f} s), "
            f"cached {t['cached_s']:.3f} s"
        )
    return lines
