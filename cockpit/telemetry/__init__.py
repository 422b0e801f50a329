"""Samplers and followers that turn host output into typed events (no UI, no shell syntax)."""
