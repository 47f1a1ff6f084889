// headlab train CONFIG [--set key=value]... [--resume auto|PATH] [--init CHECKPOINT] [--teacher CHECKPOINT]
//                     [--out DIR]
// Also as `mpirun -np P headlab train ...` (data-parallel, docs/distributed.md): rank 0 talks.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/error.h"
#include "headlab/dist/dist.h"
#include "headlab/io/config.h"
#include "headlab/train/trainer.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

int run_train(int argc, char** argv) {
  cxxopts::Options options("headlab train", "Train a model from a TOML config (see docs/config.md).");
  options.positional_help("CONFIG");
  options.add_options()("config", "config file", cxxopts::value<std::string>())(
      "set", "override a config key, e.g. --set model.n_heads=8 (repeatable)",
      cxxopts::value<std::vector<std::string>>())(
      "resume", "continue a run: auto (newest checkpoint in --out) or a checkpoint path",
      cxxopts::value<std::string>())(
      "init",
      "start a new run from a checkpoint's weights and model section (fine-tuning, e.g. a pruned model); a --set "
      "model key must agree with it, except model.dropout, which applies",
      cxxopts::value<std::string>())(
      "teacher",
      "distil from a checkpoint: its soft targets mix into the loss (--set train.teacher=CHECKPOINT; "
      "train.distill_alpha and train.distill_temperature set how)",
      cxxopts::value<std::string>())("out", "run folder (default runs/<config name>)", cxxopts::value<std::string>())(
      "h,help", "show this help");
  const auto parsed = parse_options(options, {"config"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  HEADLAB_CHECK(args.count("config"), "no config file given (usage: headlab train CONFIG [--set k=v]...)");
  const std::string path = args["config"].as<std::string>();
  std::vector<std::string> sets = list_option(args, "set");
  std::vector<std::string> origins;
  for (const std::string& set : sets) origins.push_back("--set " + set);
  if (args.count("teacher")) {
    for (const std::string& set : sets)
      HEADLAB_CHECK(override_key(set) != "train.teacher",
                    "--teacher and --set train.teacher both name a teacher; give one of them");
    sets.push_back("train.teacher=" + args["teacher"].as<std::string>());
    origins.push_back("--teacher " + args["teacher"].as<std::string>());
  }
  const Config config = load_config(path, sets, origins);
  RunOptions run;
  run.out_dir = args.count("out") ? args["out"].as<std::string>()
                                  : (std::filesystem::path("runs") / std::filesystem::path(path).stem()).string();
  run.resume = args.count("resume") ? args["resume"].as<std::string>() : "";
  run.init_from = args.count("init") ? args["init"].as<std::string>() : "";
  for (const std::string& set : sets) run.set_keys.push_back(override_key(set));
  const bool talk = dist::rank() == 0;
  run.quiet = !talk;
  if (talk && dist::size() > 1)
    std::fprintf(stderr, "training %s -> %s on %d ranks\n", path.c_str(), run.out_dir.c_str(), dist::size());
  else if (talk)
    std::fprintf(stderr, "training %s -> %s\n", path.c_str(), run.out_dir.c_str());
  const RunResult r = run_training(config, run);
  if (talk) std::fprintf(stderr, "%s\n", closing_line(r, config.train.eval_batches).c_str());
  return r.end == RunEnd::finished ? 0 : 130;
}

}  // namespace headlab::cli
