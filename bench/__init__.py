"""Conveyor benchmark suite and the server launcher shared with the tests."""
