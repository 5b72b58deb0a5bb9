"""Trace-driven simulator (issue 4): perf model, engine, metrics."""
