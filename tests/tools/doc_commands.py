#!/usr/bin/python3
"""Runs every command the docs show, so that they cannot drift from the binary (issue 26).

Every ```sh block of README.md and docs/*.md runs, in that order, as a bash script in one
scratch folder (so docs/analysis.md finds the runs/h8 that README.md trained), with `configs/`
and `experiments/` linked from the source tree. A ```toml block whose first line names a file
("# tiny.toml: ...") is written there first. Each `headlab` call (./build/headlab, build/headlab
or headlab) goes through a wrapper that makes it small: training and sweeps take a few steps of
small batches, evaluations and analyses two batches, circuits four generated rows, benchmarks a
few steps, pruning's fine-tuning and L0 a few steps (sizes a command gives itself as well).
Nothing else about a command changes, so a missing file, a renamed option or a refused
combination fails the test.

Lines that cannot run here (installing, building, benchmarks that take minutes, the fuzzers,
perf) are named in SKIPPED with the reason; a SKIPPED pattern no doc line matches any more is an
error too, so the list cannot go stale.

  /usr/bin/python3 tests/tools/doc_commands.py build/headlab [--keep DIR] [--only DOC | --skip DOC]...

--only and --skip (paths from the source root, e.g. docs/translation.md) split the docs between
CTest entries that run side by side; a split-off doc must not use what another doc's commands
made. The SKIPPED patterns are checked against every doc's lines whichever blocks run.
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

SRC = pathlib.Path(__file__).resolve().parents[2]

# (pattern a line matches, why it does not run here)
SKIPPED = [
    (r"bash \.ci/", "CI runs its own scripts; this test is one of them"),
    (r"^cmake ", "building and installing: CI builds, tests/cli/test_install.cpp installs"),
    (r"~/\.local/", "the installed binary: tests/cli/test_install.cpp runs it"),
    (r"^perf ", "needs linux-perf and a profiling session"),
    (r"compare_torch\.py", "a benchmark against PyTorch: minutes"),
    (r"bench_prune", "a benchmark: minutes"),
    (r"--cross-heads-removed 2 --reps 9", "a benchmark for a quiet machine: minutes"),
    (r"build-fuzz|long_run\.sh", "the fuzzers: .ci/test-fuzz runs them"),
    (r"moved/run", "a run whose corpus moved: tests/cli/test_cli.cpp moves one and runs it"),
]

# Flags appended to a verb's arguments unless the command gives the option itself. Training
# overrides go last, so they win over the command's own --set of the same key. One thread: under
# ctest -j the docs share the cores with another entry, and a 2-thread run whose partner thread is
# descheduled spins at its barriers (docs/performance.md); analyses of these runs inherit it.
TINY_TRAIN = ["--set", "train.threads=1", "--set", "train.steps=4", "--set", "train.warmup_steps=-1", "--set", "train.eval_every=2", "--set", "train.checkpoint_every=2",
              "--set", "train.eval_batches=1", "--set", "train.batch_size=2", "--set", "train.log_every=1"]
TINY_SWEEP_SET = {"train.steps": 4, "train.eval_every": 2, "train.checkpoint_every": 2, "train.eval_batches": 1,
                  "train.batch_size": 2}
TINY_OPTIONS = {
    "eval": [("--batches", "2")],
    "analyze": [("--batches", "2")],
    "prune": [("--batches", "2"), ("--score-batches", "2")],
    "circuits": [("--rows", "4")],  # generated pairs: patching reruns the model per head and position
    "bench": [("--steps", "2"), ("--warmup", "1"), ("--size", "256"), ("--reps", "2")],
}
# Sizes a command gives itself that the wrapper makes small too (the value replaced), as training's.
TINY_VALUES = {
    "eval": {"--batches": "2"},
    "analyze": {"--batches": "2", "--ig-steps": "2"},
    "prune": {"--batches": "2", "--score-batches": "2", "--finetune-steps": "2", "--l0-steps": "4"},
}

HEADLAB_CALL = re.compile(r"(?<![\w/.-])(?:\./build/|build/)?headlab(?=\s)")


def code_blocks(path):
    """(language, first line number, text) of every fenced block of a Markdown file."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        blocks.append((m.group(1), i + 2, "\n".join(lines[i + 1:j])))
        i = j + 1
    return blocks


def skip_reason(line):
    for pattern, reason in SKIPPED:
        if re.search(pattern, line.strip()):
            return pattern, reason
    return None, None


def script_for(block):
    """The block as bash: skipped lines commented out, headlab calls through the wrapper."""
    out, used = [], set()
    for line in block.splitlines():
        pattern, reason = skip_reason(line)
        if pattern:
            used.add(pattern)
            out.append(f"# skipped ({reason}): {line}")
        else:
            out.append(HEADLAB_CALL.sub('"$HEADLAB_DOC_WRAPPER"', line))
    return "\n".join(out) + "\n", used


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise ValueError(f"no TOML form for {v!r}")


def tiny_sweep_file(path, work):
    """A copy of the sweep file whose runs are tiny: the same name, base and grid."""
    doc = tomllib.loads(path.read_text())
    if "base" in doc:  # relative to the sweep file, else to the working directory (docs/sweeps.md)
        base = path.parent / doc["base"]
        doc["base"] = str((base if base.exists() else pathlib.Path.cwd() / doc["base"]).resolve())
    doc.setdefault("name", path.stem)
    fixed = dict(doc.get("set", {}))
    for key, value in TINY_SWEEP_SET.items():
        if key not in doc.get("grid", {}):
            fixed[key] = value
    text = [f"{k} = {toml_value(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    text.append("[set]")
    text += [f'"{k}" = {toml_value(v)}' for k, v in fixed.items()]
    for table in ("grid",) + tuple(k for k, v in doc.items() if isinstance(v, dict) and k not in ("set", "grid")):
        if table in doc:
            text.append(f"[{table}]")
            text += [f'"{k}" = {toml_value(v)}' for k, v in doc[table].items()]
    folder = pathlib.Path(tempfile.mkdtemp(dir=work))
    tiny = folder / path.name
    tiny.write_text("\n".join(text) + "\n")
    return tiny


def wrap(binary, args):
    """The wrapper: `headlab VERB ARGS` with the tiny settings added."""
    if not args or args[0].startswith("-"):
        return subprocess.call([binary] + args)
    verb, rest = args[0], args[1:]
    if verb == "train":
        rest = rest + TINY_TRAIN
    elif verb == "sweep":
        files = [a for a in rest if a.endswith(".toml")]
        if files and pathlib.Path(files[0]).is_file():
            tiny = tiny_sweep_file(pathlib.Path(files[0]), os.environ["HEADLAB_DOC_WORK"])
            rest = [str(tiny) if a == files[0] else a for a in rest]
    small = TINY_VALUES.get(verb, {})
    rest = [small[rest[i - 1]] if i and rest[i - 1] in small else a for i, a in enumerate(rest)]
    for option, value in TINY_OPTIONS.get(verb, []):
        gemm_only = option in ("--size", "--reps")
        if option not in rest and gemm_only == ("--gemm" in rest):
            rest = rest + [option, value]
    return subprocess.call([binary, verb] + rest)


def write_named_toml(path, work):
    """```toml blocks that start with '# NAME.toml': written to NAME.toml in the scratch folder."""
    for language, _, text in code_blocks(path):
        first = text.splitlines()[0] if text else ""
        m = re.match(r"#\s*([\w.-]+\.toml)\b", first)
        if language == "toml" and m:
            (work / m.group(1)).write_text(text + "\n")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--wrap":
        sys.exit(wrap(os.environ["HEADLAB_DOC_BINARY"], sys.argv[2:]))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--keep", help="scratch folder to use and keep (default: a temporary one)")
    parser.add_argument("--only", action="append", default=[], help="run this doc's blocks only (repeatable)")
    parser.add_argument("--skip", action="append", default=[], help="run every doc but this one (repeatable)")
    args = parser.parse_args()
    binary = str(pathlib.Path(args.binary).resolve())
    work = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="headlab_docs_")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    for name in ("configs", "experiments"):
        if not (work / name).exists():
            (work / name).symlink_to(SRC / name)
    wrapper = work / "headlab-doc-wrapper"
    wrapper.write_text(f"#!/bin/sh\nexec /usr/bin/python3 {pathlib.Path(__file__).resolve()} --wrap \"$@\"\n")
    wrapper.chmod(0o755)
    env = dict(os.environ, HEADLAB_DOC_BINARY=binary, HEADLAB_DOC_WRAPPER=str(wrapper), HEADLAB_DOC_WORK=str(work))

    docs = {str(doc.relative_to(SRC)): doc for doc in [SRC / "README.md"] + sorted((SRC / "docs").glob("*.md"))}
    for name in args.only + args.skip:
        if name not in docs:
            parser.error(f"{name} is not one of the docs ({', '.join(sorted(docs))})")
    used, failures, ran = set(), [], 0
    for doc in docs.values():
        for language, _, text in code_blocks(doc):
            used |= script_for(text)[1] if language == "sh" else set()
    for name, doc in docs.items():
        if (args.only and name not in args.only) or name in args.skip:
            continue
        write_named_toml(doc, work)
        for language, line, text in code_blocks(doc):
            if language != "sh":
                continue
            script, _ = script_for(text)
            where = f"{name}:{line}"
            started = time.monotonic()
            result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=work, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
            ran += 1
            status = "ok" if result.returncode == 0 else f"FAILED (exit {result.returncode})"
            print(f"{where}: {status} ({time.monotonic() - started:.1f} s)", flush=True)
            if result.returncode != 0:
                failures.append(where)
                print("  " + "\n  ".join(result.stdout.rstrip().splitlines()[-15:]), flush=True)
    for pattern, reason in SKIPPED:
        if pattern not in used:
            failures.append(f"SKIPPED pattern {pattern!r} ({reason}) matches no doc line: remove it")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} of {ran} blocks failed:\n  " + "\n  ".join(failures))
        sys.exit(1)
    which = ", ".join(args.only) or ("the docs but " + ", ".join(args.skip) if args.skip else "README.md and docs/*.md")
    print(f"all {ran} sh blocks of {which} ran")


if __name__ == "__main__":
    main()
