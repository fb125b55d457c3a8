"""Exploring a model: breadth-first search (explore), partial-order reduction (por, footprints), symmetry,
the compact visited set (visited) and the loop-offset abstraction of --every (loop_offset).
"""
