"""The version of pipecheck: the package, the JSON and SARIF reports and `--version` name it."""
__version__ = "0.2.0"
