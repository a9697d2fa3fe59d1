"""Helpers no user calls: file safety, checks, device helpers."""
