#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/io/checkpoint.h"
#include "headlab/nn/prune.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "support/scratch.h"

using namespace headlab;
using test::run_headlab;
namespace fs = std::filesystem;

namespace {

struct Scratch : test::ScratchDir {
  fs::path config;
  Scratch() : test::ScratchDir("cli") {
    write_corpus("corpus.txt", 600);
    config = write("tiny.toml", "[model]\nd_model = 16\nn_heads = 2\nn_layers = 1\nmax_seq_len = 16\n"
                                "[data]\npath = \"" + (dir / "corpus.txt").string() + "\"\nseq_len = 16\n"
                                "[train]\nbatch_size = 4\nsteps = 4\nwarmup_steps = 1\neval_every = 2\n"
                                "eval_batches = 1\nlog_every = 1\ncheckpoint_every = 2\n");
  }
};

int count_lines(const std::string& text) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

}  // namespace

TEST_CASE("an invalid config is one line and exit code 2, and nothing is written", "[cli]") {
  Scratch s;
  const fs::path out = s.dir / "run";
  struct Case {
    std::string set, expected;
  };
  const std::vector<Case> cases = {
      {"model.n_kv_heads=3", "model.n_kv_heads=3 does not divide model.n_heads=2"},
      {"model.n_head=4", "did you mean 'model.n_heads'?"},
      {"model.d_model=abc", "model.d_model must be an integer"},
      {"data.seq_len=64", "data.seq_len"},
      {"model.n_layers=0", "model.n_layers"},
      {"model.layer_heads=[3]", "model.layer_heads[0]=3 exceeds model.n_heads=2"},
  };
  for (const Case& c : cases) {
    const auto r = run_headlab({"train", s.config.string(), "--set", c.set, "--out", out.string()}, s.dir / "log.txt");
    INFO("--set " << c.set << " printed: " << r.output);
    CHECK(r.code == 2);
    CHECK(count_lines(r.output) == 1);
    CHECK_THAT(r.output, Catch::Contains(c.expected));
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("train, eval, sample and info work end to end on a tiny run", "[cli]") {
  Scratch s;
  const fs::path out = s.dir / "run";
  const auto train = run_headlab({"train", s.config.string(), "--out", out.string()}, s.dir / "train.log");
  INFO(train.output);
  REQUIRE(train.code == 0);
  CHECK(fs::exists(out / "config.toml"));
  CHECK(fs::exists(out / "checkpoints" / "best.h5"));
  const std::string ckpt = (out / "checkpoints" / "step_00000004.h5").string();
  const auto eval = run_headlab({"eval", ckpt, "--split", "test"}, s.dir / "eval.log");
  CHECK(eval.code == 0);
  CHECK_THAT(eval.output, Catch::Contains("bits_per_byte"));
  const auto sample = run_headlab({"sample", ckpt, "--prompt", "the ", "--tokens", "20"}, s.dir / "sample.log");
  CHECK(sample.code == 0);
  CHECK(sample.output.rfind("the ", 0) == 0);
  const auto info = run_headlab({"info", ckpt}, s.dir / "info.log");
  CHECK(info.code == 0);
  CHECK_THAT(info.output, Catch::Contains("step 4 of 4"));
  CHECK_THAT(info.output, Catch::Contains("attention (qkv + proj)"));
}

TEST_CASE("--set takes TOML arrays, commas and all", "[cli]") {
  Scratch s;
  for (const std::string value : {"[2,5]", "[2, 5]"}) {
    const fs::path out = s.dir / "run";
    fs::remove_all(out);
    const auto r = run_headlab({"train", s.config.string(), "--set", "data.offsets=" + value, "--set", "train.steps=1",
                                "--out", out.string()}, s.dir / "log.txt");
    INFO("--set data.offsets=" << value << " printed: " << r.output);
    CHECK(r.code == 0);
    CHECK_THAT(test::read_file(out / "config.toml"), Catch::Contains("offsets = [ 2, 5 ]") || Catch::Contains("offsets = [2, 5]"));
  }
}

namespace {
// The line of `output` that starts with `prefix` ("loss "), or "".
std::string line_starting(const std::string& output, const std::string& prefix) {
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}
}  // namespace

TEST_CASE("a pruned checkpoint works with eval, sample, info, analyze and train --init, and scores as its masked model",
          "[cli][prune]") {
  Scratch s;
  const fs::path out = s.dir / "run";
  const auto train = run_headlab({"train", s.config.string(), "--set", "model.n_heads=4", "--set", "model.n_layers=2",
                                  "--out", out.string()},
                                 s.dir / "train.log");
  INFO(train.output);
  REQUIRE(train.code == 0);
  const std::string trained = (out / "checkpoints" / "step_00000004.h5").string();
  const Config config = checkpoint_config(trained);
  Model<float> model(model_spec(config));
  const RunProgress progress = load_training_checkpoint(trained, model, nullptr);
  for (auto [layer, head] : {std::pair{0, 1}, std::pair{0, 2}, std::pair{1, 3}}) model.gates().value(layer)(head) = 0.0f;
  const std::string masked = (s.dir / "masked.h5").string(), pruned = (s.dir / "pruned.h5").string();
  save_training_checkpoint(masked, config, model, nullptr, progress);
  save_pruned_checkpoint(pruned, config, prune_heads(model, heads_with_nonzero_gates(model)), progress.step);

  const auto eval_masked = run_headlab({"eval", masked, "--split", "test"}, s.dir / "eval_masked.log");
  const auto eval_pruned = run_headlab({"eval", pruned, "--split", "test"}, s.dir / "eval_pruned.log");
  INFO(eval_masked.output << eval_pruned.output);
  REQUIRE(eval_pruned.code == 0);
  CHECK(line_starting(eval_pruned.output, "loss ") == line_starting(eval_masked.output, "loss "));
  CHECK_FALSE(line_starting(eval_pruned.output, "loss ").empty());

  const auto info = run_headlab({"info", pruned}, s.dir / "info.log");
  CHECK(info.code == 0);
  CHECK_THAT(info.output, Catch::Contains("layer heads  L0 2 L1 3 (of 4; 5 heads in all)"));
  CHECK(run_headlab({"sample", pruned, "--prompt", "the ", "--tokens", "5"}, s.dir / "sample.log").code == 0);
  const auto analyze =
      run_headlab({"analyze", pruned, "--batches", "1", "--out", (s.dir / "analysis").string()}, s.dir / "analyze.log");
  INFO(analyze.output);
  CHECK(analyze.code == 0);
  CHECK(count_lines(test::read_file(s.dir / "analysis" / "heads.csv")) == 1 + 5);
  const auto finetune = run_headlab({"train", s.config.string(), "--init", pruned, "--set", "train.steps=2", "--out",
                                     (s.dir / "finetune").string()},
                                    s.dir / "finetune.log");
  INFO(finetune.output);
  CHECK(finetune.code == 0);
  CHECK(checkpoint_config((s.dir / "finetune" / "checkpoints" / "step_00000002.h5").string()).model.layer_heads ==
        std::vector<int64_t>{2, 3});
}

TEST_CASE("a corrupt or missing checkpoint is one line and exit code 2 for every verb that reads one", "[cli]") {
  Scratch s;
  const fs::path bad = s.write("bad.h5", "this is not an HDF5 file");
  for (const std::string verb : {"eval", "sample", "info"}) {
    for (const fs::path& path : {bad, s.dir / "missing.h5"}) {
      const auto r = run_headlab({verb, path.string()}, s.dir / "log.txt");
      INFO(verb << " " << path << ": " << r.output);
      CHECK(r.code == 2);
      CHECK(count_lines(r.output) == 1);
      CHECK_THAT(r.output, Catch::Contains(path.filename().string()));
    }
  }
}

TEST_CASE("every verb answers --help, and an unknown verb is an error", "[cli]") {
  Scratch s;
  for (const std::string verb : {"train", "eval", "sample", "info", "sweep", "plot", "analyze", "bench"}) {
    const auto r = run_headlab({verb, "--help"}, s.dir / "log.txt");
    INFO(verb << ": " << r.output);
    CHECK(r.code == 0);
    CHECK_THAT(r.output, Catch::Contains("headlab " + verb));
  }
  CHECK(run_headlab({"fly"}, s.dir / "log.txt").code == 2);
}

TEST_CASE("analyze --prompt writes every head's attention on the user's text; eval and analyze --mask switch heads off",
          "[cli][analysis]") {
  Scratch s;
  const fs::path out = s.dir / "run";
  REQUIRE(run_headlab({"train", s.config.string(), "--out", out.string()}, s.dir / "train.log").code == 0);
  const std::string ckpt = (out / "checkpoints" / "step_00000004.h5").string();

  const std::string prompt = "And God said";
  const auto analyze = run_headlab({"analyze", ckpt, "--prompt", prompt, "--out", (s.dir / "p").string()},
                                   s.dir / "analyze.log");
  INFO(analyze.output);
  REQUIRE(analyze.code == 0);
  CheckpointReader h5((s.dir / "p" / "attention_example_prompt.h5").string());
  const auto T = static_cast<int64_t>(prompt.size());
  CHECK(h5.shape("attention") == Shape{1, 2, T, T});
  CHECK(h5.read_array<int64_t>("tokens") == std::vector<int64_t>(prompt.begin(), prompt.end()));
  const std::vector<double> a = h5.read_array<double>("attention");
  for (int64_t t = 0; t < T; ++t) {  // causal rows of probabilities
    double sum = 0;
    for (int64_t k = 0; k < T; ++k) sum += a[t * T + k];
    CHECK(sum == Approx(1.0).epsilon(1e-6));
    CHECK(a[t * T + T - 1] == (t == T - 1 ? a[t * T + T - 1] : 0.0));
  }
  CHECK_THAT(test::read_file(s.dir / "p" / "attention_example_prompt_tokens.csv"), Catch::Contains("\n0,65,A,1"));
  s.write("prompt.txt", prompt);
  const auto from_file = run_headlab({"analyze", ckpt, "--prompt-file", (s.dir / "prompt.txt").string(), "--out",
                                      (s.dir / "f").string()}, s.dir / "file.log");
  CHECK(from_file.code == 0);
  CHECK(CheckpointReader((s.dir / "f" / "attention_example_prompt.h5").string()).read_array<double>("attention") == a);

  const auto plain = run_headlab({"eval", ckpt}, s.dir / "eval.log");
  const auto masked = run_headlab({"eval", ckpt, "--mask", "0:1"}, s.dir / "masked.log");
  REQUIRE(plain.code == 0);
  REQUIRE(masked.code == 0);
  CHECK_THAT(masked.output, Catch::Contains("heads switched off: 0:1"));
  CHECK(line_starting(masked.output, "loss ") != line_starting(plain.output, "loss "));
  const auto masked_prompt = run_headlab({"analyze", ckpt, "--prompt", prompt, "--mask", "0:1", "--out",
                                          (s.dir / "m").string()}, s.dir / "m.log");
  CHECK(masked_prompt.code == 0);

  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"eval", ckpt, "--mask", "1:0"}, "--mask: layer 1 in '1:0' is outside [0, 1)"},
      {{"eval", ckpt, "--mask", "0:a"}, "--mask: '0:a' is not LAYER:HEAD"},
      {{"analyze", ckpt, "--mask", "0:2", "--prompt", "x"}, "--mask: head 2 in '0:2' is outside [0, 2)"},
      {{"analyze", ckpt, "--prompt", "x", "--prompt-file", "y"}, "give --prompt or --prompt-file, not both"},
      {{"analyze", ckpt, "--prompt-file", (s.dir / "missing.txt").string()}, "cannot read prompt file"},
      {{"analyze", ckpt, "--prompt", std::string(17, 'x')}, "the prompt has 17 tokens; the model takes 1 to 16"},
  };
  for (const Case& c : cases) {
    const auto r = run_headlab(c.args, s.dir / "bad.log");
    INFO(c.args[0] << " " << c.args[2] << " printed: " << r.output);
    CHECK(r.code == 2);
    CHECK(count_lines(r.output) == 1);
    CHECK_THAT(r.output, Catch::Contains(c.expected));
  }
}
