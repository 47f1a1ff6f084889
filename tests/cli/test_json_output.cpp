// eval --json and info --json: one JSON object on stdout, read by a strict parser, whose numbers
// are the library's own to the last bit (json_number writes the shortest text that reads back
// exactly).
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/config.h"
#include "headlab/io/head_list.h"
#include "headlab/io/provenance.h"
#include "headlab/nn/prune.h"
#include "headlab/tensor/arena.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/evaluate.h"
#include "headlab/train/setup.h"
#include "support/json_reader.h"
#include "support/scratch.h"
#include "support/tiny_config.h"
#include "support/trained_run.h"
#include "cli/cli_scratch.h"

using namespace headlab;
using test::count_lines;
using test::JsonValue;
using test::parse_json;
using test::run_headlab;
namespace fs = std::filesystem;

namespace {

// What headlab eval scores, computed here: the same checkpoint, mask, split and batches, on one
// thread as the tiny configs' train.threads = 1 has the binary run.
struct Expected {
  EvalStats stats;
  int64_t batches = 0, batch_size = 0;
  std::string dataset;
};

Expected evaluate_here(const std::string& path, Split split, const std::string& mask = "") {
  const int previous = num_threads();
  set_num_threads(1);
  OpenedCheckpoint c = open_checkpoint(path);
  if (!mask.empty()) switch_off_heads(*c.model, parse_head_list(mask, c.model->spec(), "--mask"));
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = c.dataset->make_batch(c.config.train.batch_size);
  Expected e;
  e.batch_size = batch.batch_size;
  e.batches = c.dataset->batches_to_score(split, default_eval_batches(c.config, *c.dataset, split, batch.batch_size),
                                          batch.batch_size, "evaluate");
  e.stats = evaluate(*c.model, *c.dataset, split, e.batches, batch, tape);
  e.dataset = c.dataset->name();
  set_num_threads(previous);
  return e;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

JsonValue json_of(const test::CommandResult& r) {
  INFO(r.output);
  REQUIRE(r.code == 0);
  REQUIRE(count_lines(r.output) == 1);
  REQUIRE(r.output.back() == '\n');
  return parse_json(r.output);
}

std::string fixed4(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

}  // namespace

TEST_CASE("eval --json is one JSON object with every field eval prints, its numbers evaluate()'s to the last bit",
          "[cli]") {
  test::CliScratch s;
  const fs::path run = s.dir / "run";
  const auto train = run_headlab({"train", s.config.string(), "--out", run.string()}, s.dir / "train.log");
  INFO(train.output);
  REQUIRE(train.code == 0);
  const std::string ckpt = (run / "checkpoints" / "step_00000004.h5").string();

  const JsonValue v = json_of(run_headlab({"eval", ckpt, "--split", "test", "--json"}, s.dir / "eval.log"));
  CHECK(v.keys() == std::vector<std::string>{"checkpoint", "step", "dataset", "split", "batches", "batch_size",
                                             "n_targets", "masked_heads", "loss", "accuracy", "bits_per_byte", "bleu",
                                             "chrf", "sentences", "beam", "length_penalty", "baseline"});
  for (const char* translation_only : {"bleu", "chrf", "sentences", "beam", "length_penalty"})
    CHECK(v[translation_only].is_null());
  const Expected e = evaluate_here(ckpt, Split::test);
  CHECK(v["checkpoint"].string() == ckpt);
  CHECK(v["step"].number() == 4);
  CHECK(v["dataset"].string() == e.dataset);
  CHECK(v["split"].string() == "test");
  CHECK(v["batches"].number() == e.batches);
  CHECK(v["batch_size"].number() == e.batch_size);
  CHECK(v["n_targets"].number() == e.stats.n_targets);
  CHECK(v["masked_heads"].size() == 0);
  CHECK(same_bits(v["loss"].number(), e.stats.loss));
  CHECK(v["accuracy"].is_null());  // text has no accuracy
  CHECK(same_bits(v["bits_per_byte"].number(), e.stats.bits_per_byte));

  // The lines say the same, to 4 decimals.
  const auto text = run_headlab({"eval", ckpt, "--split", "test"}, s.dir / "eval_text.log");
  CHECK_THAT(text.output, Catch::Contains("test split, " + std::to_string(e.batches) + " batch") &&
                              Catch::Contains(std::to_string(e.stats.n_targets) + " targets\n") &&
                              Catch::Contains("\nloss " + fixed4(e.stats.loss) + "\n") &&
                              Catch::Contains("\nbits_per_byte " + fixed4(e.stats.bits_per_byte) + "\n"));

  // --mask lists the heads switched off and scores without them; a run folder names its best.h5.
  const JsonValue masked =
      json_of(run_headlab({"eval", run.string(), "--mask", "0:1", "--batches", "1", "--json"}, s.dir / "mask.log"));
  const std::string best = (run / "checkpoints" / "best.h5").string();
  CHECK(masked["checkpoint"].string() == best);
  CHECK(masked["split"].string() == "val");
  CHECK(masked["batches"].number() == 1);
  REQUIRE(masked["masked_heads"].size() == 1);
  CHECK(masked["masked_heads"][0].size() == 2);
  CHECK(masked["masked_heads"][0][0].number() == 0);
  CHECK(masked["masked_heads"][0][1].number() == 1);
  const int previous = num_threads();
  set_num_threads(1);
  OpenedCheckpoint c = open_checkpoint(best);
  switch_off_heads(*c.model, parse_head_list("0:1", c.model->spec(), "--mask"));
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = c.dataset->make_batch(c.config.train.batch_size);
  const EvalStats m = evaluate(*c.model, *c.dataset, Split::val, 1, batch, tape);
  set_num_threads(previous);
  CHECK(masked["n_targets"].number() == m.n_targets);
  CHECK(same_bits(masked["loss"].number(), m.loss));
  CHECK_FALSE(same_bits(masked["loss"].number(), evaluate_here(best, Split::val).stats.loss));
}

TEST_CASE("eval --json of a generated task gives its accuracy and null bits per byte", "[cli]") {
  static const test::TrainedRun run("cli_json", test::k_relation_config(1, 2, {1}, 20));
  const JsonValue v = json_of(run_headlab({"eval", run.checkpoint(), "--json"}, run.scratch.dir / "eval.log"));
  const Expected e = evaluate_here(run.checkpoint(), Split::val);
  REQUIRE(e.stats.accuracy >= 0);
  CHECK(v["batches"].number() == e.batches);  // train.eval_batches: the split is unbounded
  CHECK(v["n_targets"].number() == e.stats.n_targets);
  CHECK(same_bits(v["loss"].number(), e.stats.loss));
  CHECK(same_bits(v["accuracy"].number(), e.stats.accuracy));
  CHECK(v["bits_per_byte"].is_null());
}

TEST_CASE("info --json gives the build, and a checkpoint's or config's model, as one JSON object", "[cli]") {
  test::CliScratch s;
  const JsonValue build = json_of(run_headlab({"info", "--json"}, s.dir / "info.log"));
  CHECK(build.keys() ==
        std::vector<std::string>{"build", "threads", "attention_kernels", "shared_files", "user_cache"});
  for (const ProvenanceField& f : provenance()) CHECK(build["build"][f.key].string() == f.value);
  CHECK(build["threads"].number() >= 1);
  CHECK_FALSE(build["attention_kernels"].string().empty());

  const fs::path run = s.dir / "run";
  const auto train = run_headlab(
      {"train", s.config.string(), "--set", "model.n_heads=4", "--set", "model.n_layers=2", "--out", run.string()},
      s.dir / "train.log");
  INFO(train.output);
  REQUIRE(train.code == 0);
  const std::string best = (run / "checkpoints" / "best.h5").string();
  const JsonValue v = json_of(run_headlab({"info", run.string(), "--json"}, s.dir / "info_run.log"));
  CHECK(v.keys() == std::vector<std::string>{"build", "threads", "attention_kernels", "shared_files", "user_cache",
                                             "checkpoint", "model", "data", "parameters", "head_gates"});
  const Config config = checkpoint_config(best);
  Model<float> model(model_spec(config));
  const RunProgress progress = load_training_checkpoint(best, model, nullptr);
  const JsonValue& c = v["checkpoint"];
  CHECK(c["path"].string() == best);
  CHECK(c["step"].number() == progress.step);
  CHECK(c["steps"].number() == 4);
  CHECK(c["tokens_seen"].number() == progress.tokens_seen);
  REQUIRE(progress.has_best);
  CHECK(same_bits(c["best_val_loss"].number(), progress.best_val_loss));  // the text shows 6 decimals
  for (const ProvenanceField& f : provenance()) CHECK(c["written_by"][f.key].string() == f.value);
  const JsonValue& m = v["model"];
  CHECK(m["kind"].string() == "decoder");
  CHECK(m["d_model"].number() == 16);
  CHECK(m["n_layers"].number() == 2);
  CHECK(m["n_heads"].number() == 4);
  CHECK(m["d_head"].number() == 4);
  CHECK(m["n_kv_heads"].number() == 4);
  CHECK(m["vocab_size"].number() == model.spec().vocab_size);
  CHECK(m["positions"].string() == config.model.positions);
  CHECK_FALSE(m["heads_removed"].boolean());
  CHECK(m["layer_heads"].size() == 2);
  CHECK(m["total_heads"].number() == 8);
  CHECK(v["data"]["task"].string() == "text");
  CHECK(v["data"]["seq_len"].number() == 16);
  const JsonValue& p = v["parameters"];
  CHECK(p["total"].number() == model.params().count());
  double sum = 0;
  for (const std::string& key : p.keys())
    if (key != "total") sum += p[key].number();
  CHECK(sum == p["total"].number());
  CHECK(p.has("attention"));
  CHECK(p.has("token_embedding"));
  CHECK(v["head_gates"]["active"][1].number() == 4);
  CHECK(v["head_gates"]["values"][1][3].number() == 1);

  // A model with heads removed, and a config file (no checkpoint member).
  model.gates().value(0)(1) = 0.0f;
  const std::string pruned = (s.dir / "pruned.h5").string();
  save_pruned_checkpoint(pruned, config, prune_heads(model, heads_with_nonzero_gates(model)), progress.step, nullptr);
  const JsonValue small = json_of(run_headlab({"info", pruned, "--json"}, s.dir / "info_pruned.log"));
  CHECK(small["model"]["heads_removed"].boolean());
  CHECK(small["model"]["layer_heads"][0].number() == 3);
  CHECK(small["model"]["layer_heads"][1].number() == 4);
  CHECK(small["model"]["total_heads"].number() == 7);
  CHECK(small["parameters"]["total"].number() < p["total"].number());
  const JsonValue cfg = json_of(
      run_headlab({"info", s.config.string(), "--set", "model.n_heads=1", "--json"}, s.dir / "info_config.log"));
  CHECK(cfg["config"]["path"].string() == s.config.string());
  CHECK_FALSE(cfg.has("checkpoint"));
  CHECK(cfg["model"]["n_heads"].number() == 1);
  CHECK(cfg["head_gates"]["active"][0].number() == 1);

  const JsonValue keys = json_of(run_headlab({"info", "--keys", "--json"}, s.dir / "keys.log"));
  REQUIRE(keys["keys"].size() == config_schema().size());
  for (size_t i = 0; i < config_schema().size(); ++i) {
    const ConfigKeyInfo& k = config_schema()[i];
    CHECK(keys["keys"][i]["key"].string() == k.key);
    CHECK(keys["keys"][i]["default"].string() == k.default_value);
    CHECK(keys["keys"][i]["allowed"].string() == k.allowed);
  }
}
