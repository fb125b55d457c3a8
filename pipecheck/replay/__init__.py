"""Replaying specs as CUDA programs on an sm_90 GPU: emission (cuda.py, prelude.py), the outcome
format and the agreement rules between pipecheck's verdicts and hardware outcomes (outcome.py).
"""
