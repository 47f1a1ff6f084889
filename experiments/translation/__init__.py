"""experiments/translation (issue 30): make_results.py and collect.py, importable by the tests."""
