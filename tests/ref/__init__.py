"""Reference implementation and helpers for the Python tests."""
