"""The pipeline for one spec: configurations to explore, each explored, issues collected (verify), the
--every strategy (every), and what a run returns (result).
"""
