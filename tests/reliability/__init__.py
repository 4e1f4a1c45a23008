"""Reliability and security suite: crashes, concurrency, hostile input, model faults, properties (issue 7)."""
