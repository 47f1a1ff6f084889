"""What headlab plot and the experiments' make_results.py scripts share: reading and writing CSV
files by column name, and drawing figures to files with matplotlib.

Installed with headlab plot (share/headlab/plot/), so it imports nothing from experiments/; the
experiments put src/plot on sys.path (experiments/common.py). It imports matplotlib only inside
pyplot(), so `make_results.py --check` runs without it. Errors are CsvError: each program turns
them into its own one-line message (plot_common.fail, experiments/common.fail).
"""
import csv
import io
import os


class CsvError(ValueError):
    """A CSV file that is missing, or lacks a column a reader asks for; the message names both
    (and .path, .column hold them: column None for a missing file)."""

    def __init__(self, message, path=None, column=None):
        super().__init__(message)
        self.path, self.column = path, column


def no_column(path, column, columns):
    return CsvError(f"{path}: no column '{column}' (its columns: {', '.join(columns)})", path, column)


class Row(dict):
    """One row of a CSV file, by column name. Asking for a column the file does not have raises
    CsvError naming the file and the column (not a bare KeyError); .get() and `in` work as usual."""

    __slots__ = ("path",)

    def __missing__(self, column):
        raise no_column(self.path, column, [k for k in self if k is not None])


class Rows(list):
    """The Rows of one file, and .columns: its header (None for an empty file)."""

    columns = None


def read_csv(path, required=(), fieldnames=None, hint=None):
    """The rows of a CSV file (Rows of Row), keyed by its header line, or by `fieldnames` for a file
    without one. A file that is missing (`hint` is added to the message), or whose header lacks a
    `required` column, raises CsvError; an empty file has no rows and no columns. A line with fewer
    cells than columns has None in the rest; one with more has the extra cells under the key None."""
    if not os.path.exists(path):
        raise CsvError(f"{path} is missing" + (f": {hint}" if hint else ""), path)
    rows = Rows()
    with open(path, newline="") as f:
        reader = csv.DictReader(f, fieldnames=fieldnames)
        for values in reader:
            row = Row(values)
            row.path = path
            rows.append(row)
        rows.columns = reader.fieldnames
    for column in required:
        if rows.columns is not None and column not in rows.columns:
            raise no_column(path, column, rows.columns)
    return rows


def csv_text(columns, rows):
    """`columns` as the header, then one line per row (a dict; None is an empty cell), '\\n' line
    ends. Cells are written as str() gives them and quoted only where they hold a comma, a quote or
    a line break."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row.get(c) is None else str(row[c]) for c in columns])
    return buf.getvalue()


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only: no display, no GUI toolkit). ImportError
    when matplotlib is not installed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path, dpi, tight_layout=False, bbox_inches=None, strip_software=False):
    """Writes the figure to `path` (its folder created) and closes it. tight_layout: lay the figure
    out first; bbox_inches="tight": crop to what is drawn; strip_software: leave matplotlib's version
    out of the file, so that a figure's bytes depend only on what is drawn."""
    plt = pyplot()
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    if tight_layout:
        fig.tight_layout()
    extra = {"metadata": {"Software": None}} if strip_software else {}
    if bbox_inches is not None:
        extra["bbox_inches"] = bbox_inches
    fig.savefig(path, dpi=dpi, **extra)
    plt.close(fig)
