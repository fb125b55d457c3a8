"""pipecheck: a model checker for TMA/mbarrier pipeline protocols."""
__version__ = "0.1.0"
