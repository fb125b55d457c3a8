"""Fuzzing pipecheck: spec generators and mutators (specgen), the crash oracle (oracle), the long run (run).

The test suite runs a fixed-seed slice (tests/test_fuzz.py); `python -m fuzz.run` is the long run.
"""
