"""Helpers shared by the experiments' scripts (experiments/<name>/make_results.py and collect.py put
this folder on sys.path): one-line failures, CSV files by column name, number formatting, Markdown
tables, --check, the atomic write of RESULTS.md, and the provenance facts every collect script
records (machine, binary's commit, load). The statistics are in stats.py.

CSV reading and writing, and the matplotlib pieces of the figures, are src/plot/plot_shared.py's,
which headlab plot uses too; this module puts src/plot on sys.path for them (headlab plot is
installed without experiments/, so the plot side never imports from here).
experiments/tests/ tests these."""
import datetime
import math
import os
import platform
import re
import subprocess
import sys

EXPERIMENTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(EXPERIMENTS)
sys.path.insert(0, os.path.join(REPO, "src", "plot"))
import plot_shared  # noqa: E402  (src/plot/plot_shared.py)
from stats import mean_std  # noqa: E402

# The shared pieces, for the experiments' modules to import from here (after this file has put
# src/plot on sys.path).
CsvError, csv_text, pyplot, save_figure = (plot_shared.CsvError, plot_shared.csv_text, plot_shared.pyplot,
                                           plot_shared.save_figure)


def fail(message, prog="make_results"):
    """Bad input: one line on stderr, exit code 2."""
    print(f"{prog}: {message}", file=sys.stderr)
    sys.exit(2)


def read_csv(path, hint="run the experiment first", required=(), fieldnames=None):
    """The rows of a CSV file by column name (plot_shared.read_csv; `fieldnames` names the columns
    of a file without a header line): a missing file or a missing `required` column fails in one
    line. Asking a row for a column the file lacks raises CsvError; the scripts' main() turns that
    into one line too."""
    try:
        return plot_shared.read_csv(path, required=required, fieldnames=fieldnames, hint=hint)
    except CsvError as e:
        fail(str(e))


def write_csv(path, columns, rows):
    """`columns`, then one line per row (dicts; None is an empty cell), written atomically."""
    write_atomically(path, csv_text(columns, rows))


def number(text):
    """The float in a CSV cell; NaN where it is empty (or absent). Text that is not a number is an
    error (ValueError): the experiments' data are machine-written."""
    return float(text) if text not in ("", None) else math.nan


# ---- formatting ----------------------------------------------------------------------------------


def pm(m, s, digits):
    """`m ± s` with `digits` decimals, `m` alone without a std, `–` without a mean."""
    if math.isnan(m):
        return "–"
    return f"{m:.{digits}f} ± {s:.{digits}f}" if not math.isnan(s) else f"{m:.{digits}f}"


def cell(values, digits):
    """Mean ± sample std of the values (NaN left out), as pm() writes it."""
    return pm(*mean_std(list(values)), digits)


def signed(x, digits):
    """`+0.012` / `-0.012`; `–` for NaN."""
    return "–" if math.isnan(x) else f"{x:+.{digits}f}"


def fmt_p(p):
    """'p = 0.012', 'p < 0.001', 'p –' for NaN."""
    if math.isnan(p):
        return "p –"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def seeds_list(values, digits):
    """'0.25, 0.50, –': one value per seed, NaN as –."""
    return ", ".join("–" if math.isnan(v) else f"{v:.{digits}f}" for v in values)


def md_table(header, rows, align="---:"):
    """A Markdown table; `align` is every column's separator cell ('---:' right, '---' default)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "".join(f"{align}|" for _ in header)]
    return "\n".join(lines + ["| " + " | ".join(str(x) for x in r) + " |" for r in rows])


# ---- writing RESULTS.md --------------------------------------------------------------------------


def write_atomically(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def first_difference(old, new):
    """The 1-based number of the first line where two texts differ (one past the shorter text's
    last line when one is the other's beginning)."""
    a, b = old.splitlines(), new.splitlines()
    return 1 + next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))


def check_results(target, text, data, script):
    """make_results.py --check: prints that `target` (RESULTS.md) is what `data` regenerates, or
    one line with the first differing line and how to regenerate it (`script`), and exits 1."""
    current = read_text(target)
    if current == text:
        print(f"{target} is what {data} regenerates")
        return
    print(f"make_results: {target} differs from what {data} regenerates, first at line "
          f"{first_difference(current, text)}: run python3 {script}", file=sys.stderr)
    sys.exit(1)


def fill_template(path, fields):
    """The text of the template at `path` with every {{name}} replaced by fields[name] (a string);
    an unknown placeholder fails in one line."""
    def fill(m):
        if m.group(1) not in fields:
            fail(f"{os.path.basename(path)}: unknown placeholder {{{{{m.group(1)}}}}}")
        return fields[m.group(1)]
    return re.sub(r"\{\{([^{}]+)\}\}", fill, read_text(path))


def read_text(path):
    """A file's text; '' when it does not exist."""
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read()


# ---- provenance: what made the data -----------------------------------------------------------


def machine():
    """'<CPU model>, <N> cores, -march=native <arch>, family <F> model <M>[ avx512]' of this machine.
    The build compiles for the build machine's CPU (CMakeLists.txt's HEADLAB_NATIVE), and GCC's
    choice for it decides the vector code, so two machines with the same model name can round
    differently. The arch name alone does not tell them apart either: Debian's GCC 12.2 resolves a
    Zen 3 and the later Zens alike to 'znver3', though only the later ones have AVX-512 (BLIS's skx
    kernels, headlab's AVX-512 attention kernels). So the CPU family and model, and whether it has
    AVX-512, are part of what a bit-for-bit comparison needs to match."""
    model = platform.processor()
    fields = {}
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    model = fields.get("model name", model)
    text = f"{model}, {os.cpu_count()} cores" + (f", -march=native {native_arch()}" if native_arch() else "")
    if "cpu family" in fields:
        text += f", family {fields['cpu family']} model {fields.get('model', '?')}"
        text += " avx512" if "avx512f" in fields.get("flags", "").split() else ""
    return text


def native_arch():
    """What `gcc -march=native` resolves to here ('rocketlake', 'znver4'), '' without gcc."""
    try:
        out = subprocess.run(["gcc", "-march=native", "-Q", "--help=target"], capture_output=True, text=True).stdout
    except OSError:
        return ""
    return next((line.split()[1] for line in out.splitlines() if line.split()[:1] == ["-march="] and
                 len(line.split()) > 1), "")


def binary_commit(binary):
    """The commit `headlab info` says the binary was built from ('-dirty' when it says so)."""
    info = subprocess.run([binary, "info"], capture_output=True, text=True).stdout.splitlines()
    return next((line.split()[1] for line in info if line.startswith("commit") and len(line.split()) > 1), "")


def checkout_dirty():
    """Whether this checkout has uncommitted changes to tracked files."""
    return bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=EXPERIMENTS).stdout.strip())


def max_load(path, started_utc=""):
    """The highest 1-minute load average of a run script's samples ('<epoch> <load>' lines) taken
    at or after started_utc ('YYYY-MM-DDTHH:MM:SSZ'; '' keeps all); '' without samples. The
    run scripts append every part of an arm to one file, so a part keeps only its own samples
    rather than inheriting an earlier part's peak."""
    if not path or not os.path.exists(path):
        return ""
    since = 0
    if started_utc:
        since = datetime.datetime.strptime(started_utc, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    samples = [line.split() for line in open(path)]
    loads = [float(load) for epoch, load in (s for s in samples if len(s) == 2) if float(epoch) >= since]
    return f"{max(loads):.2f}" if loads else ""
