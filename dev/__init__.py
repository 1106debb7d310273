"""The team's own tools, not shipped in the gptlab wheel: the mutation check of the test suite and the
one-off benchmarks whose figures docs/performance.md cites. They import gptlab; gptlab never imports
them. The scripts in scripts/ that run them put the repository root on sys.path."""
