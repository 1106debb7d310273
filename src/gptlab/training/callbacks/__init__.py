"""Callbacks with one job each: throughput, run summary (metrics.json), telemetry."""
