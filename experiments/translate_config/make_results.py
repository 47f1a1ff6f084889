#!/usr/bin/env python3
"""experiments/translate_config: RESULTS.md from data/ (what run.sh wrote).

  make_results.py            RESULTS.md from data/ alone
  make_results.py --check    exit 0 when the committed RESULTS.md is what data/ gives, else a
                             one-line hint and exit 1

data/: run.csv (commit, start, train wall time, cores, peak load), metrics.csv (the run's),
info.json (headlab info --json of the run), and one headlab eval --json line per score:
test_greedy, test_beam5, val_greedy, test_copy, test_strongs (.json); alignment_test.csv and
heads_test.csv (heads.sh: headlab analyze --split test --bleu --layer-only --alignment: every head of
the three kinds in heads.csv, and every cross-attention head, each layer's mean and the two
baselines as word aligners against the Strong's gold in alignment.csv), bleu_ablation_test.csv (one row per
head) and heads_run.csv (the analysis' commit, the checkpoint's). The reference numbers from
the issue (a PyTorch nn.Transformer on the same data and machine) are constants below, named so.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # experiments/: common
from common import fail, fill_template, first_difference, md_table, read_csv, read_text, write_atomically  # noqa: E402
from stats import spearman  # noqa: E402

DATA = os.path.join(HERE, "data")
# Issue 27's reference: PyTorch nn.Transformer, 1.9M parameters (d_model 128, 3+3 layers, 4 heads,
# 4k joint unigram, tied, label smoothing 0.1, Noam warm-up 500, ~3k-token batches), 20 minutes on
# one of these machines (one epoch, KJV -> RV1909, Ruth and Mark held out), greedy decoding.
REFERENCE = {"minutes": 20, "test_bleu": 13.9, "val_bleu": 9.5}
TARGET = {"minutes": 30, "test_bleu": 15.0}


def load_json(name):
    path = os.path.join(DATA, name + ".json")
    if not os.path.exists(path):
        fail(f"{path} is missing: run experiments/translate_config/run.sh first")
    with open(path) as f:
        return json.load(f)


def fields():
    run = read_csv(os.path.join(DATA, "run.csv"), required=("commit", "train_wall_s", "cores", "max_load_1min"))[0]
    metrics = read_csv(os.path.join(DATA, "metrics.csv"), required=("step", "val_loss", "val_bleu"))
    info = load_json("info")
    scores = {name: load_json(name) for name in ("test_greedy", "test_beam5", "val_greedy", "test_copy",
                                                 "test_strongs")}
    minutes = float(run["train_wall_s"]) / 60
    evals = [r for r in metrics if r["val_bleu"] != ""]
    curve = md_table(["step", "val loss (nats/token)", "val BLEU (greedy, first sentences)"],
                     [[r["step"], f"{float(r['val_loss']):.4f}", f"{float(r['val_bleu']):.2f}"] for r in evals])
    rows = [
        ["headlab, greedy", f"{scores['test_greedy']['bleu']:.2f}", f"{scores['test_greedy']['chrf']:.2f}",
         f"{scores['val_greedy']['bleu']:.2f}"],
        ["headlab, beam 5", f"{scores['test_beam5']['bleu']:.2f}", f"{scores['test_beam5']['chrf']:.2f}", ""],
        ["copy the source", f"{scores['test_copy']['bleu']:.2f}", f"{scores['test_copy']['chrf']:.2f}", ""],
        ["Strong's word by word", f"{scores['test_strongs']['bleu']:.2f}", f"{scores['test_strongs']['chrf']:.2f}",
         ""],
        [f"PyTorch reference ({REFERENCE['minutes']} min, greedy; issue 27)", f"{REFERENCE['test_bleu']:.1f}", "",
         f"{REFERENCE['val_bleu']:.1f}"],
    ]
    test_bleu = scores["test_greedy"]["bleu"]
    meets = test_bleu >= TARGET["test_bleu"] and minutes <= TARGET["minutes"]
    verdict = (f"meets the issue's aim (>= {TARGET['test_bleu']:.0f} test BLEU, greedy, in <= {TARGET['minutes']} "
               f"minutes)" if meets else
               f"does not meet the issue's aim (>= {TARGET['test_bleu']:.0f} test BLEU, greedy, in <= "
               f"{TARGET['minutes']} minutes)")
    return {
        "commit": run["commit"],
        "started": run["started_utc"],
        "cores": run["cores"],
        "max_load": run["max_load_1min"],
        "minutes": f"{minutes:.1f}",
        "steps": metrics[-1]["step"],
        "parameters": str(info["parameters"]["total"]),
        "test_sentences": str(scores["test_greedy"]["sentences"]),
        "val_sentences": str(scores["val_greedy"]["sentences"]),
        "test_loss": f"{scores['test_greedy']['loss']:.4f}",
        "scores_table": md_table(["translations", "test BLEU (Mark)", "test chrF", "val BLEU (Ruth)"], rows),
        "curve_table": curve,
        "test_bleu": f"{test_bleu:.2f}",
        "verdict": verdict,
        "reference_minutes": str(REFERENCE["minutes"]),
    }


def alignment_fields():
    rows = read_csv(os.path.join(DATA, "alignment_test.csv"),
                    required=("method", "layer", "head", "precision", "recall", "aer", "alignment_head"))
    table = md_table(["aligner", "precision", "recall", "AER", "below both baselines"],
                     [[r["method"], f"{float(r['precision']):.3f}", f"{float(r['recall']):.3f}",
                       f"{float(r['aer']):.3f}", "yes" if r["alignment_head"] == "1" else ""] for r in rows])
    aer = {r["method"]: float(r["aer"]) for r in rows}
    heads = [r for r in rows if r["head"] != ""]  # not a layer mean or a baseline
    best = min(heads, key=lambda r: float(r["aer"]))
    winners = sorted({r["layer"] for r in heads if r["alignment_head"] == "1"})
    beat_diagonal = sorted({r["layer"] for r in heads if float(r["aer"]) < aer["diagonal"]})
    layers = lambda ls: ", ".join(ls) if ls else "none"  # noqa: E731
    summary = (f"The best head, {best['method']}, has AER {float(best['aer']):.3f}, against "
               f"{aer['diagonal']:.3f} for the diagonal and {aer['ibm1']:.3f} for IBM Model 1. Layers with "
               f"heads below the diagonal: {layers(beat_diagonal)}; layers with alignment heads (below both "
               f"baselines): {layers(winners)}.")
    return {"alignment_table": table, "alignment_summary": summary}


# Michel et al. 2019, Table 1: heads of the encoder's self-attention whose removal changes BLEU
# significantly (p < 0.01, paired bootstrap), and how many of those for the better.
MICHEL_TABLE1 = {"heads": 96, "significant": 8, "better": 4}
# Michel et al. 2019, Table 2: layers where keeping only the best head changes BLEU significantly
# (p < 0.01), of the 18 (6 Enc-Enc, 6 Enc-Dec, 6 Dec-Dec), and the largest drop (the last
# Enc-Dec layer).
MICHEL_TABLE2 = {"layers": 18, "significant": 5, "largest_drop": -13.56}
LEVEL = 0.01  # Michel's significance level, per head, uncorrected as in the paper


def heads_fields():
    rows = read_csv(os.path.join(DATA, "heads_test.csv"),
                    required=("attention", "layer", "label", "ablation_loss_delta", "ablation_bleu_delta",
                              "ablation_chrf_delta", "ablation_bleu_p"))
    ablation = read_csv(os.path.join(DATA, "bleu_ablation_test.csv"), required=("label", "bleu", "bleu_delta"))
    run = read_csv(os.path.join(DATA, "heads_run.csv"), required=("commit", "model_commit", "model_step"))[0]
    unmasked = float(ablation[0]["bleu"]) - float(ablation[0]["bleu_delta"])
    hurt = lambda r: float(r["ablation_bleu_p"]) < LEVEL and float(r["ablation_bleu_delta"]) < 0  # noqa: E731
    helps = lambda r: float(r["ablation_bleu_p"]) < LEVEL and float(r["ablation_bleu_delta"]) > 0  # noqa: E731
    table, kinds = [], []
    for kind in ("enc", "dec", "cross"):
        of_kind = [r for r in rows if r["attention"] == kind]
        for layer in sorted({int(r["layer"]) for r in of_kind}):
            heads = [r for r in of_kind if int(r["layer"]) == layer]
            worst = min(heads, key=lambda r: float(r["ablation_bleu_delta"]))
            table.append([f"{kind}.L{layer}", len(heads), sum(map(hurt, heads)), sum(map(helps, heads)),
                          f"{sum(float(r['ablation_bleu_delta']) for r in heads) / len(heads):+.2f}",
                          f"{worst['label']} {float(worst['ablation_bleu_delta']):+.2f}",
                          f"{sum(float(r['ablation_loss_delta']) for r in heads) / len(heads):+.4f}"])
        significant = sum(hurt(r) or helps(r) for r in of_kind)
        kinds.append(f"{kind}: {significant} of {len(of_kind)} ({sum(map(helps, of_kind))} for the better)")
    m = MICHEL_TABLE1
    layer_rows, layer_significant = [], 0
    for kind in ("enc", "dec", "cross"):
        of_kind = [r for r in rows if r["attention"] == kind]
        for layer in sorted({int(r["layer"]) for r in of_kind}):
            heads = [r for r in of_kind if int(r["layer"]) == layer]
            best = max(heads, key=lambda r: float(r["layer_only_bleu_delta"]))
            significant = float(best["layer_only_bleu_p"]) < LEVEL
            layer_significant += significant
            layer_rows.append([f"{kind}.L{layer}", best["label"], f"{float(best['layer_only_bleu_delta']):+.2f}",
                               f"{float(best['layer_only_bleu_p']):.3f}", "yes" if significant else ""])
    m2 = MICHEL_TABLE2
    cross = [r for r in rows if r["attention"] == "cross"]
    rho = spearman([float(r["alignment_aer"]) for r in cross], [float(r["ablation_bleu_delta"]) for r in cross])
    return {
        "heads_commit": run["commit"][:7],
        "heads_model": f"{run['model_commit']}, step {run['model_step']}",
        "heads_unmasked_bleu": f"{unmasked:.2f}",
        "heads_table": md_table(["layer", "heads", "removal hurts (p < 0.01)", "removal helps (p < 0.01)",
                                 "mean BLEU change", "largest drop", "mean loss change (nats)"], table),
        "heads_summary": "; ".join(kinds),
        "michel_table1": f"{m['significant']} of {m['heads']} encoder self-attention heads, {m['better']} of them "
                         f"for the better",
        "aer_bleu_rho": f"{rho:+.2f}",
        "layer_only_table": md_table(["layer", "best head kept alone", "BLEU change", "p", "significant"],
                                     layer_rows),
        "layer_only_summary": f"{layer_significant} of {len(layer_rows)} layers",
        "michel_table2": f"{m2['significant']} of {m2['layers']} layers, the largest drop "
                         f"{m2['largest_drop']:+.2f} BLEU (the last Enc-Dec layer)",
        "cross_heads": str(len(cross)),
    }


def roles_fields():
    rows = [r for r in read_csv(os.path.join(DATA, "heads_test.csv"),
                                required=("attention", "label", "positional_offset", "positional_share",
                                          "rare_token_agreement", "rare_token_rows", "role"))
            if r["attention"] == "enc"]
    attrs = {r["name"]: float(r["value"]) for r in read_csv(os.path.join(DATA, "heads_attributes_test.csv"),
                                                             required=("name", "value"))}
    chance, baseline = attrs["chance_rare_token_agreement"], attrs["baseline_rare_token_agreement"]
    bar = max(chance, baseline)
    table = md_table(["head", "most frequent offset", "its share", "rare-token agreement", "/ bar", "rows", "role"],
                     [[r["label"], f"{float(r['positional_offset']):+.0f}", f"{float(r['positional_share']):.3f}",
                       f"{float(r['rare_token_agreement']):.3f}", f"{float(r['rare_token_agreement']) / bar:.2f}",
                       f"{float(r['rare_token_rows']):.0f}", r["role"]] for r in rows])
    named = lambda role: [r["label"] for r in rows if role in r["role"].split("+")]  # noqa: E731
    listed = lambda labels: ", ".join(labels) if labels else "none"  # noqa: E731
    return {
        "roles_table": table,
        "rare_chance": f"{chance:.3f}",
        "rare_baseline": f"{baseline:.3f}",
        "rare_baseline_offset": f"{attrs['baseline_rare_token_offset']:+.0f}",
        "positional_heads": f"{len(named('positional'))} of {len(rows)} ({listed(named('positional'))})",
        "rare_heads": f"{len(named('rare_token'))} of {len(rows)} ({listed(named('rare_token'))})",
    }


def render(check):
    f = fields()
    f.update(alignment_fields())
    f.update(heads_fields())
    f.update(roles_fields())
    text = fill_template(os.path.join(HERE, "results.template.md"), f)
    target = os.path.join(HERE, "RESULTS.md")
    if check:
        old = read_text(target)
        if old != text:
            print(f"make_results --check: RESULTS.md differs from what data/ gives, first at line "
                  f"{first_difference(old, text)}; regenerate with /usr/bin/python3 "
                  f"experiments/translate_config/make_results.py", file=sys.stderr)
            sys.exit(1)
        return
    write_atomically(target, text)
    print(f"wrote {target}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args not in ([], ["--check"]):
        fail("usage: make_results.py [--check]")
    render(args == ["--check"])
