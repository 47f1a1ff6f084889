"""experiments/pruning's modules, imported by make_results.py (which puts experiments/ on
sys.path): loading (data/), analysis (the rules and what the tables and verdicts are computed
from), fillers (the tables), claims (claims and verdicts), figures (figures/)."""
