"""experiments/translation/make_results.py on a made-up data/ folder: arms present and missing,
the base arm's tables and the plateau rule on val BLEU and loss."""
import os
import sys

import pytest

EXPERIMENTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, EXPERIMENTS)
from translation import make_results as T  # noqa: E402


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


@pytest.fixture
def data(tmp_path):
    base = tmp_path / "base"
    write(str(base / "provenance.csv"), "key,value\ncommit,abc1234\nuncommitted_changes,no\n"
          "started_utc,2026-12-05T00:00:00Z\nmachine,Xeon, 2 cores\nwall_seconds,600\nmax_load_1min,2.10\n")
    write(str(base / "setup.csv"), "seed,model.d_model,train.steps\n0,128,400\n1,128,400\n")
    # seed 0 still gains 2 BLEU over the last quarter (300 -> 400); seed 1 gains 0.2 and its loss 0.5%.
    write(str(base / "curves.csv"), "seed,step,train_loss,val_loss,val_bleu\n"
          "0,100,4,3.0,1\n0,200,3,2.5,5\n0,300,2.8,2.4,8\n0,400,2.7,2.3,10\n"
          "1,100,4,3.0,1\n1,200,3,2.5,5\n1,300,2.8,2.0,9.9\n1,400,2.7,1.99,10.1\n")
    write(str(base / "test.csv"), "seed,step,bleu,chrf,loss,sentences,beam\n0,400,20,40,2.2,674,5\n1,400,22,42,2.1,674,5\n")
    return T.Data(str(tmp_path))


def test_arms_present_and_missing(data):
    assert data.arms == ["base"]
    text = T.fill_arms(data)
    assert "`abc1234`" in text and "10 min" in text
    assert text.count("not run yet") == len(T.ARMS) - 1
    assert "not run yet" in T.fill_base_test(T.Data(os.path.join(str(data.folder), "missing")))


def test_base_tables(data):
    test = T.fill_base_test(data)
    assert "21.00 ± 1.41" in test and "674 test verses, beam 5" in test
    plateau = T.fill_base_plateau(data).splitlines()
    assert plateau[2] == "| 0 | +2.00 | no | +4.17% | no |"
    assert plateau[3] == "| 1 | +0.20 | yes | +0.50% | yes |"


def test_seeds_with_different_settings_fail(data, tmp_path):
    write(str(tmp_path / "base" / "setup.csv"), "seed,model.d_model\n0,128\n1,64\n")
    with pytest.raises(SystemExit):
        T.fill_base_setup(T.Data(str(tmp_path)))
