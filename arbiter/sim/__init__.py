"""Trace-driven simulator: perf model, engine, metrics."""
