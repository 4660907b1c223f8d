"""The package version, kept as a literal so `import fastagg` does not load importlib.metadata.

tests/test_import.py checks it equals pyproject.toml's version and the installed metadata.
"""

__version__ = "0.1.0"
