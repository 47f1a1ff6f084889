// headlab circuits end to end: the detectors of every checkpoint of a tiny run (one CSV row per
// checkpoint and head, the HDF5 file of kind circuits), a single checkpoint, composition and DLA
// on a translation model's three kinds of heads, and bad input as one
// line and exit code 2: a model without causal self-attention, a folder without step checkpoints,
// sequences longer than the model takes, no analysis asked for.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"
#include "support/scratch.h"
#include "support/tiny_config.h"
#include "cli/cli_scratch.h"

using namespace headlab;
using test::count_lines;
using test::run_headlab;
namespace fs = std::filesystem;

TEST_CASE("circuits --detectors scores every head of every checkpoint of a run", "[cli][circuits]") {
  test::CliScratch s;
  const fs::path run = s.dir / "run";
  REQUIRE(run_headlab({"train", s.config.string(), "--out", run.string()}, s.dir / "train.log").code == 0);
  const auto r = run_headlab({"circuits", run.string(), "--detectors", "--rows", "3"}, s.dir / "circuits.log");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("2 checkpoints on 3 sequences of 2 x 8 random tokens (seed 0)"));
  const CsvTable t = read_csv(run / "detectors.csv");
  REQUIRE(t.rows.size() == 4u);  // steps 2 and 4, two heads each
  CHECK(t.rows[0][t.column("step")] == "2");
  CHECK(t.rows[3][t.column("step")] == "4");
  CHECK(t.rows[3][t.column("label")] == "L0H1");
  for (const auto& row : t.rows)
    for (const char* column : {"previous_token", "duplicate_token", "induction", "prefix_matching"}) {
      const double v = std::stod(row[t.column(column)]);
      CHECK(v >= 0);
      CHECK(v <= 1);
    }
  CheckpointReader h5((run / "detectors.h5").string());
  h5.require_kind(FileKind::circuits);

  // One checkpoint, into another folder.
  const fs::path out = s.dir / "one";
  const auto one = run_headlab({"circuits", (run / "checkpoints" / "step_00000004.h5").string(), "--detectors",
                                "--rows", "3", "--out", out.string()},
                               s.dir / "one.log");
  CHECK(one.code == 0);
  const CsvTable t1 = read_csv(out / "detectors.csv");
  REQUIRE(t1.rows.size() == 2u);
  CHECK(t1.rows[1] == t.rows[3]);  // the same inputs, the same checkpoint: the same line
}

TEST_CASE("circuits --composition scores every pair of heads in different layers at every checkpoint",
          "[cli][circuits]") {
  test::CliScratch s;
  const fs::path run = s.dir / "run";
  REQUIRE(
      run_headlab({"train", s.config.string(), "--set", "model.n_layers=2", "--out", run.string()}, s.dir / "train.log")
          .code == 0);
  const auto r = run_headlab({"circuits", run.string(), "--composition"}, s.dir / "circuits.log");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("strongest k-composition: L0H"));
  CHECK_FALSE(fs::exists(run / "detectors.csv"));
  const CsvTable copying = read_csv(run / "ov_copying.csv");
  REQUIRE(copying.rows.size() == 8u);  // 2 checkpoints x 4 heads
  for (const auto& row : copying.rows) {
    const double v = std::stod(row[copying.column("copying_score")]);
    CHECK(v >= -1);
    CHECK(v <= 1);
  }
  const CsvTable t = read_csv(run / "composition.csv");
  REQUIRE(t.rows.size() == 8u);  // 2 checkpoints x (2 senders in layer 0 x 2 receivers in layer 1)
  CHECK(t.rows[0][t.column("sender")] == "L0H0");
  CHECK(t.rows[0][t.column("receiver")] == "L1H0");
  for (const auto& row : t.rows)
    for (const char* column : {"q", "k", "v"}) {
      const double v = std::stod(row[t.column(column)]);
      CHECK(v > 0);
      CHECK(v <= 1);
    }
}

TEST_CASE("circuits --composition and --dla on a translation model: its three kinds of heads", "[cli][circuits]") {
  test::ScratchDir s("circuits_translate");
  Config c = test::tiny_translate_config(s.write_parallel_corpus(120));
  c.train.steps = 4;
  c.train.eval_every = c.train.checkpoint_every = 4;
  const fs::path run = s.dir / "run";
  REQUIRE(
      run_headlab({"train", s.write_config("t.toml", c).string(), "--out", run.string()}, s.dir / "train.log").code ==
      0);
  const auto r =
      run_headlab({"circuits", run.string(), "--composition", "--dla", "--batches", "1"}, s.dir / "circuits.log");
  INFO(r.output);
  REQUIRE(r.code == 0);
  // 1 encoder and 1 decoder layer, 2 heads each: enc -> cross (k, v), dec -> cross (q), 4 pairs each.
  const CsvTable t = read_csv(run / "composition.csv");
  REQUIRE(t.rows.size() == 8u);
  for (const auto& row : t.rows) {
    const bool from_encoder = row[t.column("sender")].rfind("enc.", 0) == 0;
    CHECK(row[t.column("receiver")].rfind("cross.", 0) == 0);
    CHECK(row[t.column("q")].empty() == from_encoder);
    CHECK(row[t.column("k")].empty() == !from_encoder);
    CHECK(row[t.column("v")].empty() == !from_encoder);
  }
  const CsvTable copying = read_csv(run / "ov_copying.csv");
  REQUIRE(copying.rows.size() == 6u);  // enc, dec, cross: 2 heads each; the encoder's have no score
  CHECK(copying.rows[0][copying.column("copying_score")].empty());
  CHECK_FALSE(copying.rows[2][copying.column("copying_score")].empty());
  const CsvTable dla = read_csv(run / "dla.csv");
  std::vector<std::string> labels;
  for (const auto& row : dla.rows) labels.push_back(row[dla.column("label")]);
  CHECK(labels == std::vector<std::string>{"embed", "dec.L0H0", "dec.L0H1", "dec.L0 attn bias", "cross.L0H0",
                                           "cross.L0H1", "cross.L0 attn bias", "L0 mlp", "ln_f bias"});

  // Patching: two sources of 9 bytes (+ </s>), one target (<s> + 6 bytes) both runs decode.
  const auto p = run_headlab({"circuits", run.string(), "--patch", "--path-patch", "--prompt", "the light", "--corrupt",
                              "the night", "--target", "la luz"},
                             s.dir / "patch.log");
  INFO(p.output);
  REQUIRE(p.code == 0);
  const CsvTable heads = read_csv(run / "patching_heads.csv");
  REQUIRE(heads.rows.size() == 6u);
  CHECK(heads.rows[0][heads.column("attention")] == "enc");
  CHECK(heads.rows[5][heads.column("label")] == "cross.L0H1");
  const CsvTable resid = read_csv(run / "patching_resid.csv");
  REQUIRE(resid.rows.size() == 10u + 7u);  // the encoder block over the source, the decoder block over the target
  CHECK(resid.rows.front()[resid.column("stack")] == "enc");
  CHECK(resid.rows.back()[resid.column("stack")] == "dec");
  const CsvTable paths = read_csv(run / "path_patching.csv");
  REQUIRE(paths.rows.size() == 8u);  // enc -> cross (keys, values), dec -> cross (queries): 4 pairs each
  for (const auto& row : paths.rows) {
    const bool from_encoder = row[paths.column("sender")].rfind("enc.", 0) == 0;
    CHECK((row[paths.column("q")] == "nan") == from_encoder);
    CHECK((row[paths.column("k")] == "nan") == !from_encoder);
  }
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--prompt", "the light", "--corrupt", "the night"}, "a translation model needs --target"},
           {{"--prompt", "the light", "--corrupt", "the nights", "--target", "la luz"},
            "--prompt is 9 tokens and "
            "--corrupt 10"}}) {
    std::vector<std::string> command = {"circuits", run.string(), "--patch"};
    command.insert(command.end(), args.begin(), args.end());
    const auto r = run_headlab(command, s.dir / "refused.log");
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK_THAT(r.output, Catch::Contains(message));
  }
}

TEST_CASE("circuits --patch and --path-patch write every head's and position's patch, by prompt or generated pairs",
          "[cli][circuits]") {
  test::CliScratch s;
  const fs::path run = s.dir / "run";
  REQUIRE(
      run_headlab({"train", s.config.string(), "--set", "model.n_layers=2", "--out", run.string()}, s.dir / "train.log")
          .code == 0);
  const auto r = run_headlab({"circuits", run.string(), "--patch", "--path-patch", "--rows", "2", "--half", "4"},
                             s.dir / "patch.log");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("2 rows of 8 tokens, metric loss") && Catch::Contains("path patching: clean") &&
                           Catch::Contains("12 forwards in"));
  CHECK(read_csv(run / "patching_heads.csv").rows.size() == 4u);
  CHECK(read_csv(run / "patching_resid.csv").rows.size() == 16u);  // 2 blocks x 8 positions
  CHECK(read_csv(run / "path_patching.csv").rows.size() == 4u);    // 2 senders x 2 receivers

  const fs::path out = s.dir / "prompt";
  const auto p = run_headlab({"circuits", run.string(), "--patch", "--prompt", "the dust", "--corrupt", "the land",
                              "--answer", "s", "--wrong", "t", "--out", out.string()},
                             s.dir / "prompt.log");
  INFO(p.output);
  CHECK(p.code == 0);
  CHECK_THAT(p.output, Catch::Contains("1 row of 8 tokens, metric logit_diff"));
  CHECK(read_csv(out / "patching_resid.csv").rows.size() == 16u);
}

TEST_CASE("circuits refuses what it cannot score in one line, exit code 2, writing nothing", "[cli][circuits]") {
  test::CliScratch s;
  auto refused = [&](const std::vector<std::string>& args, const std::string& message) {
    const auto r = run_headlab(args, s.dir / "refused.log");
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(count_lines(r.output) == 1);
    CHECK_THAT(r.output, Catch::Contains(message));
  };
  Config encoder = test::tiny_task_config("classify", 12, 16);
  encoder.model.kind = "encoder";
  encoder.train.steps = 2;
  encoder.train.warmup_steps = 1;
  const fs::path enc_run = s.dir / "encoder";
  REQUIRE(
      run_headlab({"train", s.write_config("enc.toml", encoder).string(), "--out", enc_run.string()}, s.dir / "enc.log")
          .code == 0);
  refused({"circuits", (enc_run / "checkpoints" / "best.h5").string(), "--detectors"}, "has no causal self-attention");
  CHECK_FALSE(fs::exists(enc_run / "detectors.csv"));

  fs::create_directories(s.dir / "empty" / "checkpoints");
  refused({"circuits", (s.dir / "empty").string(), "--detectors"}, "no checkpoints/step_<N>.h5 in this run folder");

  const fs::path run = s.dir / "run";
  REQUIRE(run_headlab({"train", s.config.string(), "--out", run.string()}, s.dir / "train.log").code == 0);
  refused({"circuits", run.string(), "--detectors", "--half", "9"}, "longer than the model's max_seq_len 16");
  refused({"circuits", run.string()}, "no analysis given: --detectors");
  refused({"circuits", run.string(), "--patch", "--prompt", "the dust", "--corrupt", "the lands"},
          "--prompt is 8 tokens and --corrupt 9; patching needs inputs of the same length");
  refused({"circuits", run.string(), "--patch", "--prompt", "the dust", "--corrupt", "the land", "--answer", "st",
           "--wrong", "t"},
          "--answer 'st' is 2 tokens of the model's vocabulary; a logit difference needs one");
  refused({"circuits", run.string(), "--dla", "--corrupt", "x"}, "--corrupt goes with --patch or --path-patch");
  refused({"circuits", (enc_run / "checkpoints" / "best.h5").string(), "--patch"},
          "model.kind = decoder or encoder_decoder");
  refused({"circuits", run.string(), "--patch", "--prompt", "the dust", "--corrupt", "the land", "--target", "x"},
          "--target is for a translation model");
  CHECK_FALSE(fs::exists(run / "detectors.csv"));
  CHECK_FALSE(fs::exists(run / "patching_heads.csv"));
}
