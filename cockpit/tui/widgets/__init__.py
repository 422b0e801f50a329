"""Reusable widgets of the cockpit TUI."""
