// headlab eval CHECKPOINT|RUN [--split val|test] [--batches N] [--mask L:H,...] [--json]
// The mean loss over the scored targets, accuracy where the task has one, bits per byte for text;
// printed to 4 decimals, or with --json as one JSON object at full precision (README.md lists its
// fields).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <cxxopts.hpp>

#include "headlab/common/parallel.h"
#include "headlab/io/head_list.h"
#include "headlab/io/json.h"
#include "headlab/nn/prune.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/evaluate.h"
#include "headlab/train/setup.h"
#include "options.h"
#include "verbs.h"

namespace headlab::cli {

int run_eval(int argc, char** argv) {
  cxxopts::Options options("headlab eval", "Evaluate a checkpoint on a data split.");
  options.positional_help("CHECKPOINT.h5 | RUN");
  options.add_options()("checkpoint", "checkpoint file (.h5), or a run folder (its best.h5, else its newest)",
                        cxxopts::value<std::string>())("split", "val or test",
                                                       cxxopts::value<std::string>()->default_value("val"))(
      "batches", "batches to score (default: the whole split, or train.eval_batches for generated tasks)",
      cxxopts::value<int64_t>())(
      "mask", "switch these heads off (gate 0) for the evaluation: LAYER:HEAD,... as heads.csv numbers them",
      cxxopts::value<std::string>())(
      "set",
      "change a data.* key or train.threads of the checkpoint's config, e.g. --set data.path=moved.txt (repeatable)",
      cxxopts::value<std::vector<std::string>>())(
      "json", "print one JSON object (every number at full precision) instead of the lines")("h,help",
                                                                                             "show this help");
  const auto parsed = parse_options(options, {"checkpoint"}, argc, argv);
  if (!parsed) return 0;
  const cxxopts::ParseResult& args = *parsed;
  HEADLAB_CHECK(args.count("checkpoint"), "no checkpoint given (usage: headlab eval CHECKPOINT [--split val|test])");
  const std::string path = resolve_checkpoint(args["checkpoint"].as<std::string>());
  const std::string split_arg = args["split"].as<std::string>();
  const Split split = parse_split(split_arg, false);
  const std::optional<int64_t> batches = count_option<int64_t>(args, "batches", 1);
  OpenedCheckpoint opened = open_checkpoint(path, checkpoint_overrides(args, {"data.", "train.threads"}));
  const Config& config = opened.config;
  set_num_threads(resolved_threads(config));
  Model<float>& model = *opened.model;
  const RunProgress& progress = opened.progress;
  const std::unique_ptr<Dataset>& dataset = opened.dataset;
  const std::string mask = args.count("mask") ? args["mask"].as<std::string>() : "";
  std::vector<std::string> masked;  // [layer, head] pairs, for --json
  if (!mask.empty()) {
    const HeadKeepMask heads = parse_head_list(mask, model.spec(), "--mask");
    switch_off_heads(model, heads);
    for (size_t l = 0; l < heads.size(); ++l)
      for (size_t h = 0; h < heads[l].size(); ++h)
        if (heads[l][h]) masked.push_back(json_list({std::to_string(l), std::to_string(h)}));
  }
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = dataset->make_batch(config.train.batch_size);
  const int64_t requested = batches ? *batches : default_eval_batches(config, *dataset, split, batch.batch_size);
  const int64_t n = dataset->batches_to_score(split, requested, batch.batch_size, "evaluate");  // what evaluate scores
  const EvalStats e = evaluate(model, *dataset, split, n, batch, tape);
  if (args.count("json")) {
    JsonObject out;
    out.text("checkpoint", path)
        .integer("step", progress.step)
        .text("dataset", dataset->name())
        .text("split", split_arg)
        .integer("batches", n)
        .integer("batch_size", batch.batch_size)
        .integer("n_targets", e.n_targets)
        .raw("masked_heads", json_list(masked))
        .number("loss", e.loss)
        .raw("accuracy", e.accuracy >= 0 ? json_number(e.accuracy) : "null")
        .raw("bits_per_byte", e.bits_per_byte >= 0 ? json_number(e.bits_per_byte) : "null");
    std::printf("%s\n", out.str().c_str());
    return 0;
  }
  std::printf("checkpoint %s (step %lld), %s split, %s of %lld, %s\n", path.c_str(),
              static_cast<long long>(progress.step), split_arg.c_str(), counted(n, "batch", "batches").c_str(),
              static_cast<long long>(batch.batch_size), counted(e.n_targets, "target").c_str());
  if (!mask.empty()) std::printf("heads switched off: %s\n", mask.c_str());
  std::printf("loss %.4f\n", e.loss);
  if (e.accuracy >= 0) std::printf("accuracy %.4f\n", e.accuracy);
  if (e.bits_per_byte >= 0) std::printf("bits_per_byte %.4f\n", e.bits_per_byte);
  return 0;
}

}  // namespace headlab::cli
