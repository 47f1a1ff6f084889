#!/usr/bin/env bash
# The trained translation model's heads (issue 28), all three kinds of attention on the test
# split (Mark): heads.csv (importance, ablation in loss and in BLEU/chrF with the paired
# bootstrap's p, attention statistics, Voita's roles of the encoder heads, each cross head's AER),
# heads.h5's numeric root attributes (the data's chance levels and positional baselines), and
# every cross-attention head as a word aligner against the Strong's gold (alignment.csv). The BLEU
# ablation decodes by beam 5, as Michel et al.: the whole test split once per head masked alone,
# and once per head kept alone in its layer (--layer-only). Not timed: nothing here is a speed
# result.
# run.sh calls it after training; alone, on the run folder run.sh made, from a clean checkout:
#   experiments/translate_config/heads.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
HEADLAB=${HEADLAB:-build/headlab}
OUT=${OUT:-runs/translate_config}
PY=${PY:-/usr/bin/python3}
DATA=experiments/translate_config/data
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "heads.sh: the checkout has uncommitted changes; the data must come from one clean commit" >&2
  exit 2
fi
[ -d "$OUT/run" ] || { echo "heads.sh: no trained run in $OUT/run (run.sh trains it)" >&2; exit 2; }
commit=$(git rev-parse HEAD)
rm -rf "$OUT/heads"
"$HEADLAB" analyze "$OUT/run" --split test --bleu --beam 5 --layer-only --alignment --out "$OUT/heads" > "$OUT/heads.log"
cp "$OUT/heads/heads.csv" "$DATA/heads_test.csv"
cp "$OUT/heads/alignment.csv" "$DATA/alignment_test.csv"
# heads.h5's root attributes that are numbers (the data's baselines and chance levels, counts).
"$PY" - "$OUT/heads/heads.h5" > "$DATA/heads_attributes_test.csv" <<'PYEOF'
import sys
import h5py
import numpy as np
print("name,value")
with h5py.File(sys.argv[1], "r") as f:
    for name in sorted(f.attrs):
        value = np.asarray(f.attrs[name])
        if value.shape == () and np.issubdtype(value.dtype, np.number):
            print(f"{name},{value.item()!r}")
PYEOF
cp "$OUT/heads/bleu_ablation.csv" "$DATA/bleu_ablation_test.csv"  # per head; the per-sentence statistics (.h5) stay in the run
# The analysis' commit, and the commit and step of the checkpoint it read (training's, data/run.csv).
model=$("$HEADLAB" info "$OUT/run" --json | "$PY" -c 'import json, sys
c = json.load(sys.stdin)["checkpoint"]
print(c["written_by"]["headlab_commit"] + "," + str(c["step"]))')
{
  echo "commit,model_commit,model_step"
  echo "$commit,$model"
} > "$DATA/heads_run.csv"
