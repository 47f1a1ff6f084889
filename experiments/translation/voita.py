"""experiments/translation: Voita et al. 2019's L0 pruning in BLEU (data/voita/, collect.py): each
L0 run's last row, the lambda chosen on val per seed (the most heads pruned with val BLEU no more
than NOTICEABLE["bleu"] below the control's), and its layout for the from-scratch retraining."""
from common import number
from verdicts import NOTICEABLE


def last_rows(prune_rows):
    """{(seed, arm): the arm's last round} of prune.csv rows."""
    out = {}
    for r in prune_rows:
        key = (int(r["seed"]), r["arm"])
        if key not in out or int(r["round"]) >= int(out[key]["round"]):
            out[key] = r
    return out


def lambda_of(arm):
    return float(arm.rsplit("lambda", 1)[1])


def chosen(prune_rows, seed, only="enc"):
    """The val-chosen L0 run of one seed and arm family (l0_enc_* or l0_all_*): (arm, its last row)
    or None when no lambda keeps val BLEU within the threshold of the control's."""
    last = last_rows(prune_rows)
    control = last.get((seed, "none_l0"))
    if control is None:
        return None
    ok = []
    for (s, arm), r in last.items():
        if s == seed and arm.startswith(f"l0_{only}_lambda"):
            if number(control["val_bleu"]) - number(r["val_bleu"]) <= NOTICEABLE["bleu"]:
                ok.append((-int(r["heads_pruned"]), lambda_of(arm), arm, r))
    if not ok:
        return None
    _, _, arm, r = min(ok)  # the most heads pruned; among those, the smallest lambda
    return arm, r


def layout(row):
    """model.active_heads of an L0 row: its heads per site as a TOML array."""
    return "[" + ",".join(row["heads_per_layer"].split()) + "]"


# heads.csv's role (assign_roles in include/headlab/analysis/head_roles.h; several joined by "+")
# in the names experiments/pruning's survival test groups (pruning.analysis.SPECIALISED)
ROLE_NAMES = {"positional": "positional", "syntactic": "syntactic", "rare_token": "rare", "none": "none", "": "none"}


def role_name(role):
    """A head's role for the survival test: the first of heads.csv's roles, in pruning's names."""
    return ROLE_NAMES[role.split("+")[0]]


def encoder_survival(roles_rows, l0_row, seed):
    """(roles [N], kept [N], layer [N]) of one seed's encoder heads under an L0 run gating them
    (prune.csv's pruned_heads: site:head, the encoder's layers being sites 0..)."""
    import numpy as np
    gone = {tuple(int(x) for x in p.split(":")) for p in l0_row["pruned_heads"].split()}
    enc = sorted(((int(r["layer"]), int(r["head"]), r["role"]) for r in roles_rows
                  if int(r["seed"]) == seed and r["attention"] == "enc"))
    return (np.array([role_name(role) for _, _, role in enc]), np.array([(l, h) not in gone for l, h, _ in enc]),
            np.array([layer for layer, _, _ in enc]))


# ---- BLEU against heads kept (Figure 7), which kinds and layers survive (Figures 9 and 10) -----------


def site_names(n_encoder_layers, n_layers):
    """[(kind, layer)] of prune.csv's sites in its order: the encoder's layers, then each decoder
    layer's self- and cross-attention (michel.cross_site)."""
    return [("enc", i) for i in range(n_encoder_layers)] + [(k, i) for i in range(n_layers) for k in ("dec", "cross")]


def kept_per_site(row):
    return [int(x) for x in row["heads_per_layer"].split()]


def lambda_runs(prune_rows, only):
    """{lambda: {seed: the last row of l0_<only>_lambda<X>}}, lambdas ascending."""
    out = {}
    for (seed, arm), r in last_rows(prune_rows).items():
        if arm.startswith(f"l0_{only}_lambda"):
            out.setdefault(lambda_of(arm), {})[seed] = r
    return dict(sorted(out.items()))


def kind_shares(row, control, sites):
    """{kind: share of its heads an L0 run kept}; the control (nothing gated) gives each site's heads."""
    kept, total = {}, {}
    for (kind, _), k, n in zip(sites, kept_per_site(row), kept_per_site(control)):
        kept[kind] = kept.get(kind, 0) + k
        total[kind] = total.get(kind, 0) + n
    return {kind: kept[kind] / total[kind] for kind in total}


def site_shares(row, control):
    """Each site's share of its heads an L0 run kept."""
    return [k / n for k, n in zip(kept_per_site(row), kept_per_site(control))]
