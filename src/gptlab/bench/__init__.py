"""Training speed, measured: the Lightning path users run against a bare PyTorch loop, telemetry's
overhead, data loading and tokenizing, and compiled blocks against eager (scripts/bench.py and
scripts/check_compile.py; docs/performance.md reads their tables)."""
