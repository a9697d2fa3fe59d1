"""Pipe-graph rewrites: pure functions from a pipe graph to a new pipe graph."""
