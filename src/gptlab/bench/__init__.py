"""Training speed, measured: the Lightning path users run against a bare PyTorch loop, telemetry's
overhead, data loading and tokenizing, eager or with `compile=true` (scripts/bench.py; docs/performance.md
reads its tables). The team's one-off measurements, compiled blocks against eager among them, are in
dev/bench."""
