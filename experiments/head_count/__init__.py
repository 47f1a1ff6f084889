"""experiments/head_count's modules, imported by make_results.py (which puts experiments/ on
sys.path): runs (the run side: run.sh's commands), sweeps (data/ and one sweep's comparisons),
studies (the budget studies), fields (RESULTS.md's placeholders), figures (figures/)."""
