// The command line every verb shares (src/cli/options.cpp): --help and help, and bad arguments as
// one line naming the argument, exit code 2, with a suggestion for a typo.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cli/cli_scratch.h"

using namespace headlab;
using test::count_lines;
using test::run_headlab;
using Scratch = test::CliScratch;
namespace fs = std::filesystem;

TEST_CASE("every verb answers --help, and an unknown verb is an error", "[cli]") {
  Scratch s;
  for (const std::string verb : {"train", "eval", "sample", "info", "sweep", "plot", "analyze", "circuits", "bench",
                                 "prune", "report", "version"}) {
    const auto r = run_headlab({verb, "--help"}, s.dir / "log.txt");
    INFO(verb << ": " << r.output);
    CHECK(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("headlab " + verb));
  }
  CHECK(run_headlab({"fly"}, s.dir / "log.txt").code == 2);
}

TEST_CASE("bad command lines are one line naming the argument, exit code 2, with a suggestion for a typo", "[cli]") {
  Scratch s;
  const fs::path empty = s.dir / "empty_run";
  fs::create_directories(empty);
  const std::string cfg = s.config.string(), sweep = s.write("grid.toml", "").string();
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"trian"}, "headlab: error: unknown verb 'trian'; did you mean 'train'?"},
      {{"anlyze"}, "headlab: error: unknown verb 'anlyze'; did you mean 'analyze'?"},
      {{"fly"}, "headlab: error: unknown verb 'fly' (headlab help lists them)"},
      {{"help", "trian"}, "headlab help: error: unknown verb 'trian'; did you mean 'train'?"},
      {{"train", cfg, "b.toml"}, "headlab train: error: unexpected argument 'b.toml' (see headlab train --help)"},
      {{"eval", "x.h5", "y.h5"}, "headlab eval: error: unexpected argument 'y.h5' (see headlab eval --help)"},
      {{"version", "now"}, "headlab version: error: unexpected argument 'now' (see headlab version --help)"},
      {{"eval", "x.h5", "--batches", "-3"}, "headlab eval: error: --batches must be at least 1, got -3"},
      {{"analyze", "x.h5", "--batch-size=0"}, "headlab analyze: error: --batch-size must be at least 1, got 0"},
      {{"sample", "x.h5", "--tokens", "-1"}, "headlab sample: error: --tokens must be at least 0, got -1"},
      {{"prune", "x.h5", "--strategy", "random", "--finetune-steps", "-2"},
       "headlab prune: error: --finetune-steps must be at least 0, got -2"},
      {{"prune", "x.h5", "--strategy", "random", "--only", "dec,encoder"},
       "headlab prune: error: --only: 'encoder' is not a kind of attention (enc, dec or cross)"},
      {{"prune", "x.h5", "--strategy", "random", "--l0-freeze"},
       "headlab prune: error: --l0-freeze applies only to --strategy l0"},
      {{"prune", "x.h5", "--strategy", "random", "--no-bleu", "--beam", "3"},
       "headlab prune: error: --beam decodes for BLEU, which --no-bleu turns off"},
      {{"sweep", sweep, "--jobs", "0"}, "headlab sweep: error: --jobs must be at least 1, got 0"},
      {{"sample", "x.h5", "--tokens", "abc"},
       "headlab sample: error: invalid value 'abc' for --tokens (see headlab sample --help)"},
      {{"eval", "x.h5", "--batches=1e3"},
       "headlab eval: error: invalid value '1e3' for --batches (see headlab eval --help)"},
      {{"sweep", sweep, "-j", "two"}, "headlab sweep: error: invalid value 'two' for -j (see headlab sweep --help)"},
      {{"sweep", sweep, "-jtwo"}, "headlab sweep: error: invalid value 'two' for -j (see headlab sweep --help)"},
      {{"sample", "x.h5", "--seed", "-1"},
       "headlab sample: error: invalid value '-1' for --seed (see headlab sample --help)"},
      {{"bench", cfg, "--steps", "many"},
       "headlab bench: error: invalid value 'many' for --steps (see headlab bench --help)"},
      {{"eval", "x.h5", "--batch", "3"}, "headlab eval: error: unknown option '--batch'; did you mean '--batches'?"},
      {{"sample", "x.h5", "--temprature=0"},
       "headlab sample: error: unknown option '--temprature'; did you mean '--temperature'?"},
      {{"eval", "x.h5", "--verbose"}, "headlab eval: error: unknown option '--verbose' (see headlab eval --help)"},
      {{"info", "x.h5", "--set", "model.n_heads=2"},
       "headlab info: error: --set applies to a config file, not a checkpoint"},
      {{"eval", empty.string()}, "headlab eval: error: " + empty.string() + " is a folder without checkpoints"},
      // An enumerated option's value: the nearest choice for a typo, else the choices.
      {{"prune", "x.h5", "--strategy", "importnce"},
       "headlab prune: error: unknown strategy 'importnce'; did you mean 'importance'?"},
      {{"prune", "x.h5", "--strategy", "entropi"},
       "headlab prune: error: unknown strategy 'entropi'; did you mean 'entropy'?"},
      {{"prune", "x.h5", "--strategy", "l0", "--lambda", "1", "--l0-penalty", "meen"},
       "headlab prune: error: unknown l0 penalty 'meen'; did you mean 'mean'?"},
      {{"prune", "x.h5", "--strategy", "weight_norm"},
       "headlab prune: error: unknown strategy 'weight_norm' (expected importance, importance_raw, "
       "integrated_gradients, magnitude, random, entropy, confidence, ablation, l0 or none)"},
      {{"prune", "x.h5", "--strategy", "random", "--split", "tets"},
       "headlab prune: error: unknown split 'tets'; did you mean 'test'?"},
      {{"eval", "x.h5", "--split", "vall"}, "headlab eval: error: unknown split 'vall'; did you mean 'val'?"},
      {{"eval", "x.h5", "--split", "train"}, "headlab eval: error: unknown split 'train' (expected val or test)"},
      {{"analyze", "x.h5", "--split", "trian"}, "headlab analyze: error: unknown split 'trian'; did you mean 'train'?"},
      {{"plot", empty.string(), "--format", "pfd"}, "headlab plot: error: unknown format 'pfd'; did you mean 'pdf'?"},
      {{"plot", empty.string(), "--format", "gif"},
       "headlab plot: error: unknown format 'gif' (expected png, pdf or svg)"},
      {{"plot", empty.string(), "--x-axis", "steps"},
       "headlab plot: error: unknown x axis 'steps'; did you mean 'step'?"},
  };
  for (const Case& c : cases) {
    std::string command;
    for (const std::string& a : c.args) command += " " + a;
    const auto r = run_headlab(c.args, s.dir / "log.txt");
    INFO("headlab" << command << " printed: " << r.output);
    CHECK(r.code == 2);
    CHECK(count_lines(r.output) == 1);
    CHECK(r.output.rfind(c.expected, 0) == 0);
  }
}

TEST_CASE("help lists the verbs, help VERB is VERB --help", "[cli]") {
  Scratch s;
  const auto help = run_headlab({"help"}, s.dir / "help.log");
  CHECK(help.code == 0);
  for (const std::string verb :
       {"train", "eval", "sample", "info", "sweep", "analyze", "circuits", "prune", "report", "version", "help"})
    CHECK_THAT(help.output, Catch::Contains("\n  " + verb + " "));
  const auto help_eval = run_headlab({"help", "eval"}, s.dir / "help_eval.log");
  CHECK(help_eval.code == 0);
  CHECK(help_eval.output == run_headlab({"eval", "--help"}, s.dir / "eval_help.log").output);
  CHECK(run_headlab({}, s.dir / "none.log").code == 2);  // no verb: the list, as an error
}

TEST_CASE("sample --help shows the default prompt escaped", "[cli]") {
  Scratch s;
  const auto r = run_headlab({"sample", "--help"}, s.dir / "log.txt");
  CHECK(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("--prompt arg") && Catch::Contains("(default: \"\\n\", a newline)\n"));
  CHECK(r.output.find("\n)") == std::string::npos);  // what a raw newline default printed
}
