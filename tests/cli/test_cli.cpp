#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"
#include "headlab/io/provenance.h"
#include "headlab/linalg/gemm.h"
#include "headlab/nn/prune.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"
#include "support/hdf5_edit.h"
#include "support/scratch.h"
#include "support/tiny_config.h"
#include "support/trained_run.h"
#include "cli/cli_scratch.h"

using namespace headlab;
using test::run_headlab;
namespace fs = std::filesystem;
using test::count_lines;
using Scratch = test::CliScratch;

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
    const auto r = run_headlab(
        {"train", s.config.string(), "--set", "data.offsets=" + value, "--set", "train.steps=1", "--out", out.string()},
        s.dir / "log.txt");
    INFO("--set data.offsets=" << value << " printed: " << r.output);
    CHECK(r.code == 0);
    CHECK_THAT(test::read_file(out / "config.toml"),
               Catch::Contains("offsets = [ 2, 5 ]") || Catch::Contains("offsets = [2, 5]"));
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
  const auto train = run_headlab(
      {"train", s.config.string(), "--set", "model.n_heads=4", "--set", "model.n_layers=2", "--out", out.string()},
      s.dir / "train.log");
  INFO(train.output);
  REQUIRE(train.code == 0);
  const std::string trained = (out / "checkpoints" / "step_00000004.h5").string();
  const Config config = checkpoint_config(trained);
  Model<float> model(model_spec(config));
  const RunProgress progress = load_training_checkpoint(trained, model, nullptr);
  for (auto [layer, head] : {std::pair{0, 1}, std::pair{0, 2}, std::pair{1, 3}})
    model.gates().value(layer)(head) = 0.0f;
  const std::string masked = (s.dir / "masked.h5").string(), pruned = (s.dir / "pruned.h5").string();
  save_training_checkpoint(masked, config, model, nullptr, progress, nullptr);
  save_pruned_checkpoint(pruned, config, prune_heads(model, heads_with_nonzero_gates(model)), progress.step, nullptr);

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
  const auto finetune = run_headlab(
      {"train", s.config.string(), "--init", pruned, "--set", "train.steps=2", "--out", (s.dir / "finetune").string()},
      s.dir / "finetune.log");
  INFO(finetune.output);
  CHECK(finetune.code == 0);
  CHECK(checkpoint_config((s.dir / "finetune" / "checkpoints" / "step_00000002.h5").string()).model.layer_heads ==
        std::vector<int64_t>{2, 3});
}

TEST_CASE("prune of a GQA model writes pruned.h5 and says in one line why there is no pruned_small.h5",
          "[cli][prune]") {
  Scratch s;
  const fs::path run = s.dir / "run", out = s.dir / "p";
  const auto train = run_headlab({"train", s.config.string(), "--set", "model.n_kv_heads=1", "--out", run.string()},
                                 s.dir / "train.log");
  INFO(train.output);
  REQUIRE(train.code == 0);
  const auto prune =
      run_headlab({"prune", run.string(), "--strategy", "random", "--out", out.string()}, s.dir / "prune.log");
  INFO(prune.output);
  CHECK(prune.code == 0);
  CHECK(fs::exists(out / "pruned.h5"));
  CHECK_FALSE(fs::exists(out / "pruned_small.h5"));
  // The reason is nn's one check of physical removal (prune_problem), not a copy of it.
  CHECK_THAT(prune.output, Catch::Contains("\nno pruned_small.h5: physical removal needs multi-head attention "
                                           "(n_kv_heads=n_heads), got n_kv_heads=1, n_heads=2"));
  // A decoder has one kind of attention and no BLEU: refused before anything is written.
  for (const auto& [option, value, message] : std::vector<std::array<std::string, 3>>{
           {"--only", "dec", "--only: a decoder model has one kind of attention"},
           {"--beam", "3", "models data.task = text; BLEU is measured on translation models only"}}) {
    const auto refused = run_headlab(
        {"prune", run.string(), "--strategy", "random", option, value, "--out", (s.dir / "no").string()}, s.dir / "r");
    CHECK(refused.code == 2);
    CHECK(count_lines(refused.output) == 1);
    CHECK_THAT(refused.output, Catch::Contains(message));
  }
  CHECK_FALSE(fs::exists(s.dir / "no"));
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

namespace {
// The build's lines as `headlab --version` prints them.
std::string build_lines() {
  std::string text;
  for (const ProvenanceField& f : provenance()) {
    char line[256];
    std::snprintf(line, sizeof line, "%-12s %s\n", f.label, f.value.c_str());
    text += line;
  }
  return text;
}
}  // namespace

TEST_CASE("--version, -V and the version verb print the version, commit, build type and BLIS kernels", "[cli]") {
  Scratch s;
  for (const std::string arg : {"--version", "-V", "version"}) {
    const auto r = run_headlab({arg}, s.dir / "log.txt");
    INFO(arg << ": " << r.output);
    CHECK(r.code == 0);
    CHECK(r.output == build_lines());
  }
  CHECK_FALSE(provenance_value("headlab_commit").empty());  // a hash, or "unknown" outside git
  CHECK_FALSE(provenance_value("headlab_build_type").empty());
  CHECK(provenance_value("blis_kernels") == blis_kernel_name());
  const auto info = run_headlab({"info"}, s.dir / "info.log");
  CHECK(info.code == 0);
  CHECK(info.output.rfind(build_lines(), 0) == 0);  // info starts with the same lines
}

TEST_CASE("a run records its build in config.toml and its checkpoints, and info shows it; older checkpoints load",
          "[cli]") {
  Scratch s;
  const fs::path out = s.dir / "run";
  REQUIRE(run_headlab({"train", s.config.string(), "--out", out.string()}, s.dir / "train.log").code == 0);
  const std::string config_toml = test::read_file(out / "config.toml");
  CHECK(config_toml.rfind(provenance_comment(), 0) == 0);
  CHECK_THAT(config_toml, Catch::Contains("# headlab_commit = \"" + provenance_value("headlab_commit") + "\"\n"));
  CHECK(load_config((out / "config.toml").string()).model.d_model == 16);  // comments only

  const std::string ckpt = (out / "checkpoints" / "step_00000004.h5").string();
  {
    CheckpointReader r(ckpt);
    for (const ProvenanceField& f : provenance()) CHECK(r.string_attr(f.key) == f.value);
  }
  const auto info = run_headlab({"info", ckpt}, s.dir / "info.log");
  CHECK(info.code == 0);
  CHECK_THAT(info.output, Catch::Contains("written by   headlab " + provenance_value("headlab_version") + ", commit " +
                                          provenance_value("headlab_commit") + ", build type " +
                                          provenance_value("headlab_build_type") + ", blis kernels " +
                                          provenance_value("blis_kernels") + "\n"));

  test::delete_root_attrs(ckpt, {"headlab_version", "headlab_commit", "headlab_build_type", "blis_kernels"});
  const auto old_info = run_headlab({"info", ckpt}, s.dir / "old_info.log");
  INFO(old_info.output);
  CHECK(old_info.code == 0);
  CHECK_THAT(old_info.output, Catch::Contains("written by   (not recorded: an older checkpoint)"));
  CHECK(run_headlab({"eval", ckpt}, s.dir / "old_eval.log").code == 0);
}

TEST_CASE("--resume auto says whether it found a run", "[cli]") {
  Scratch s;
  const fs::path out = s.dir / "run";
  const auto first =
      run_headlab({"train", s.config.string(), "--out", out.string(), "--resume", "auto"}, s.dir / "first.log");
  INFO(first.output);
  REQUIRE(first.code == 0);
  CHECK_THAT(first.output, Catch::Contains("no run in " + out.string() + ": starting a new run\n"));
  const auto second =
      run_headlab({"train", s.config.string(), "--out", out.string(), "--resume", "auto", "--set", "train.steps=6"},
                  s.dir / "second.log");
  INFO(second.output);
  REQUIRE(second.code == 0);
  CHECK_THAT(second.output, Catch::Contains("resuming " + out.string() + " at step 4 ("));
}

TEST_CASE("eval, analyze, sample, info and prune take a run folder: its best checkpoint, else its newest", "[cli]") {
  Scratch s;
  const fs::path out = s.dir / "run";
  REQUIRE(run_headlab({"train", s.config.string(), "--out", out.string()}, s.dir / "train.log").code == 0);
  const std::string best = (out / "checkpoints" / "best.h5").string();
  REQUIRE(fs::exists(best));
  const auto eval = run_headlab({"eval", out.string()}, s.dir / "eval.log");
  INFO(eval.output);
  CHECK(eval.code == 0);
  CHECK(eval.output.rfind("checkpoint " + best + " (step ", 0) == 0);
  CHECK(run_headlab({"sample", out.string(), "--tokens", "5"}, s.dir / "sample.log").code == 0);
  const auto analyze =
      run_headlab({"analyze", out.string(), "--batches", "1", "--no-similarity"}, s.dir / "analyze.log");
  INFO(analyze.output);
  CHECK(analyze.code == 0);
  CHECK(fs::exists(out / "heads.csv"));
  CHECK_THAT(run_headlab({"info", out.string()}, s.dir / "info.log").output, Catch::Contains("checkpoint   " + best));

  fs::remove(best);  // a run stopped before its first evaluation: the newest step
  CHECK(resolve_checkpoint(out.string()) == (out / "checkpoints" / "step_00000004.h5").string());
  CHECK(resolve_checkpoint(best) == best);  // a file is taken as it is, even a missing one
  const auto newest = run_headlab({"eval", out.string()}, s.dir / "eval_newest.log");
  CHECK(newest.code == 0);
  CHECK_THAT(newest.output, Catch::Contains("step_00000004.h5 (step 4)"));
}

TEST_CASE("sample on a model of a generated task says so in one line", "[cli]") {
  static const test::TrainedRun run("cli_sample", test::k_relation_config(1, 2, {1}, 20));
  const auto r = run_headlab({"sample", run.checkpoint()}, run.scratch.dir / "log.txt");
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(count_lines(r.output) == 1);
  CHECK_THAT(r.output, Catch::Contains("trained on data.task = k_relation (vocab 8)") &&
                           Catch::Contains("sample generates text from text decoders only"));
}

TEST_CASE("info --keys lists every config key with its type, default and meaning", "[cli]") {
  Scratch s;
  const auto r = run_headlab({"info", "--keys"}, s.dir / "log.txt");
  CHECK(r.code == 0);
  CHECK(count_lines(r.output) == 1 + static_cast<int>(config_schema().size()));
  for (const ConfigKeyInfo& k : config_schema()) {
    INFO(k.key);
    const std::string line = line_starting(r.output, k.key + " ");
    CHECK_THAT(line, Catch::Contains(" " + k.type + " ") && Catch::Contains(" " + k.default_value + " ") &&
                         Catch::Contains(k.doc));
    if (!k.allowed.empty()) CHECK_THAT(line, Catch::EndsWith("(allowed: " + k.allowed + ")"));
  }
}

TEST_CASE("analyze --prompt writes every head's attention on the user's text; eval and analyze --mask switch heads off",
          "[cli][analysis]") {
  Scratch s;
  const fs::path out = s.dir / "run";
  REQUIRE(run_headlab({"train", s.config.string(), "--out", out.string()}, s.dir / "train.log").code == 0);
  const std::string ckpt = (out / "checkpoints" / "step_00000004.h5").string();

  const std::string prompt = "And God said";
  const auto analyze =
      run_headlab({"analyze", ckpt, "--prompt", prompt, "--out", (s.dir / "p").string()}, s.dir / "analyze.log");
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
  const auto from_file =
      run_headlab({"analyze", ckpt, "--prompt-file", (s.dir / "prompt.txt").string(), "--out", (s.dir / "f").string()},
                  s.dir / "file.log");
  CHECK(from_file.code == 0);
  CHECK(CheckpointReader((s.dir / "f" / "attention_example_prompt.h5").string()).read_array<double>("attention") == a);

  const auto plain = run_headlab({"eval", ckpt}, s.dir / "eval.log");
  const auto masked = run_headlab({"eval", ckpt, "--mask", "0:1"}, s.dir / "masked.log");
  REQUIRE(plain.code == 0);
  REQUIRE(masked.code == 0);
  CHECK_THAT(masked.output, Catch::Contains("heads switched off: 0:1"));
  CHECK(line_starting(masked.output, "loss ") != line_starting(plain.output, "loss "));
  const auto masked_prompt = run_headlab(
      {"analyze", ckpt, "--prompt", prompt, "--mask", "0:1", "--out", (s.dir / "m").string()}, s.dir / "m.log");
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

TEST_CASE(
    "a run folder and its data move: the config stores absolute paths, and eval, analyze, prune and sample "
    "take --set for data.* keys and threads only",
    "[cli]") {
  Scratch s;
  const fs::path work = s.dir / "work";
  fs::create_directories(work);
  fs::copy_file(s.dir / "corpus.txt", work / "my.txt");
  const std::string relative_config = s.write("relative.toml", test::read_file(s.config)).string();
  // Trained from `work` with a relative data.path: the stored path is absolute.
  const auto train = run_headlab({"train", relative_config, "--set", "data.path=\"my.txt\"", "--out", "run"},
                                 s.dir / "train.log", {}, work);
  INFO(train.output);
  REQUIRE(train.code == 0);
  const Config stored = load_config((work / "run" / "config.toml").string());
  CHECK(fs::path(stored.data.path) == (work / "my.txt").lexically_normal());
  CHECK(checkpoint_config((work / "run" / "checkpoints" / "best.h5").string()).data.path == stored.data.path);
  // So another working directory evaluates it as it is.
  const auto here = run_headlab({"eval", (work / "run").string()}, s.dir / "here.log");
  CHECK(here.code == 0);

  // The run and its data move elsewhere: the old path is gone, --set data.path points at the new one.
  const fs::path moved = s.dir / "moved";
  fs::rename(work, moved);
  const std::string run = (moved / "run").string(), data = "data.path=\"" + (moved / "my.txt").string() + "\"";
  const auto lost = run_headlab({"eval", run}, s.dir / "lost.log");
  CHECK(lost.code == 2);
  CHECK_THAT(lost.output, Catch::Contains("my.txt"));
  const auto found = run_headlab({"eval", run, "--set", data, "--set", "train.threads=1"}, s.dir / "found.log");
  INFO(found.output);
  CHECK(found.code == 0);
  CHECK(line_starting(found.output, "loss ") == line_starting(here.output, "loss "));
  CHECK(run_headlab({"analyze", run, "--set", data, "--no-similarity", "--out", (s.dir / "a").string()},
                    s.dir / "analyze.log")
            .code == 0);
  CHECK(run_headlab({"prune", run, "--set", data, "--strategy", "random", "--out", (s.dir / "p").string()},
                    s.dir / "prune.log")
            .code == 0);
  CHECK(run_headlab({"sample", run, "--set", "train.threads=1", "--tokens", "4"}, s.dir / "sample.log").code == 0);

  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"eval", run, "--set", "model.n_heads=4"},
       "--set model.n_heads=4: only data.*, train.threads can change here (the model is the checkpoint's)"},
      {{"analyze", run, "--set", "train.lr=0.1"}, "--set train.lr=0.1: only data.*, train.threads can change here"},
      {{"sample", run, "--set", data}, "only train.threads can change here"},
      {{"prune", run, "--set", "model.d_model=8", "--strategy", "random"}, "only train.*, data.* can change here"},
      {{"eval", run, "--set", "data.seq_len=99"}, "data.seq_len=99 exceeds model.max_seq_len=16"},
  };
  for (const Case& c : cases) {
    const auto r = run_headlab(c.args, s.dir / "bad.log");
    INFO(c.args[0] << " " << c.args[3] << " printed: " << r.output);
    CHECK(r.code == 2);
    CHECK(count_lines(r.output) == 1);
    CHECK_THAT(r.output, Catch::Contains(c.expected));
  }
}

TEST_CASE("prune's round lines, info's model line and analyze's summary count one thing in the singular", "[cli]") {
  Scratch s;
  const fs::path run = s.dir / "run";
  const auto train = run_headlab({"train", s.config.string(), "--out", run.string()}, s.dir / "train.log");
  INFO(train.output);
  REQUIRE(train.code == 0);
  // One layer of 2 heads, half of them a round: the first round prunes the one head it may.
  const auto prune = run_headlab({"prune", run.string(), "--strategy", "random", "--step-frac", "0.5", "--batches", "1",
                                  "--out", (s.dir / "prune").string()},
                                 s.dir / "prune.log");
  INFO(prune.output);
  REQUIRE(prune.code == 0);
  CHECK_THAT(prune.output, Catch::Contains("\nround 0: 0 heads pruned, heads per layer 2,") &&
                               Catch::Contains("\nround 1: 1 head pruned, heads per layer 1,"));
  const auto info = run_headlab({"info", s.config.string(), "--set", "model.n_heads=1"}, s.dir / "info.log");
  CHECK(info.code == 0);
  CHECK_THAT(info.output, Catch::Contains(", d_model 16, 1 layer, 1 head x d_head 16, 1 kv head, mlp "));
  const auto analyze =
      run_headlab({"analyze", run.string(), "--batches", "1", "--no-ablation", "--out", (s.dir / "analysis").string()},
                  s.dir / "analyze.log");
  INFO(analyze.output);
  CHECK(analyze.code == 0);
  CHECK_THAT(analyze.output, Catch::Contains(" split: 1 batch of 4, 4 examples, "));
  for (const std::string* out : {&prune.output, &info.output, &analyze.output})
    CHECK_THAT(*out, !Catch::Contains(" 1 heads") && !Catch::Contains(" 1 layers") && !Catch::Contains(" 1 batches"));
}

TEST_CASE(
    "analyze of an encoder_decoder scores its three kinds of heads, named by label, masks take labels, "
    "--dump-example writes all three kinds of maps and report shows the cross map",
    "[cli][analysis]") {
  Scratch s;
  Config c = test::tiny_text_config(s.write_uneven_parallel_corpus(40));
  c.model.kind = "encoder_decoder";
  c.model.vocab_size = 259;
  c.model.max_seq_len = 32;
  c.data.task = "translate";
  c.data.target_path = (s.dir / "tgt.txt").string();
  c.data.seq_len = 32;
  c.data.batch_tokens = 128;
  c.data.train_fraction = 0.5;
  c.data.val_fraction = 0.25;
  c.train.steps = 2;
  const fs::path run = s.dir / "run";
  const auto train = run_headlab({"train", s.write_config("t.toml", c).string(), "--out", run.string()}, s.dir / "t");
  INFO(train.output);
  REQUIRE(train.code == 0);

  const fs::path analysis = s.dir / "analysis";
  const auto analyzed = run_headlab(
      {"analyze", run.string(), "--batches", "1", "--mask", "cross.L0H1,enc.L0H0", "--out", analysis.string()},
      s.dir / "analyze.log");
  INFO(analyzed.output);
  REQUIRE(analyzed.code == 0);
  CHECK_THAT(analyzed.output, Catch::Contains("cross.L0H1"));
  const std::string csv = test::read_file(analysis / "heads.csv");
  CHECK(count_lines(csv) == 1 + 6);  // 2 heads each of enc.L0, dec.L0, cross.L0
  // A row per head, site by site; enc.L0H0 and cross.L0H1 are masked. attention,label come last.
  const CsvTable heads_csv = read_csv(analysis / "heads.csv");
  CHECK(heads_csv.header.back() == "label");
  std::vector<std::string> rows;
  for (const std::vector<std::string>& row : heads_csv.rows) {
    auto at = [&](const char* name) { return row[heads_csv.column(name)]; };
    rows.push_back(at("attention") + " " + at("layer") + " " + at("head") + " " + at("label") + " gate " + at("gate"));
  }
  CHECK(rows == std::vector<std::string>{"enc 0 0 enc.L0H0 gate 0", "enc 0 1 enc.L0H1 gate 1",
                                         "dec 0 0 dec.L0H0 gate 1", "dec 0 1 dec.L0H1 gate 1",
                                         "cross 0 0 cross.L0H0 gate 1", "cross 0 1 cross.L0H1 gate 0"});
  CHECK_THAT(test::read_file(analysis / "heads_similarity.csv"),
             Catch::StartsWith("head,enc.L0H0,enc.L0H1,dec.L0H0,dec.L0H1,cross.L0H0,cross.L0H1\n"));
  const CheckpointReader heads((analysis / "heads.h5").string());
  CHECK(heads.shape("heads/gate") == Shape{3, 2});
  CHECK(heads.string_attr("site_kinds") == "enc,dec,cross");
  CHECK(heads.read_array<int64_t>("site_layer") == std::vector<int64_t>{0, 0, 0});
  for (const auto& [mask, message] : std::vector<std::pair<std::string, std::string>>{
           {"0:1",
            "--mask: '0:1' does not say which attention: an encoder_decoder's heads are named "
            "KIND.L<layer>H<head> (e.g. --mask enc.L0H3,cross.L1H2)"},
           {"cross.L1H0", "--mask: layer 1 in 'cross.L1H0' is outside [0, 1) (the model's cross layers)"},
           {"enc.L0H2", "--mask: head 2 in 'enc.L0H2' is outside [0, 2) (enc.L0's heads)"},
           {"dec.L0H1,dec.L0H1", "--mask: head dec.L0H1 is named twice"}}) {
    const auto refused = run_headlab({"eval", run.string(), "--mask", mask}, s.dir / "refused.log");
    CHECK(refused.code == 2);
    CHECK(count_lines(refused.output) == 1);
    CHECK_THAT(refused.output, Catch::Contains(message));
  }
  const auto masked_eval = run_headlab({"eval", run.string(), "--mask", "cross.L0H0", "--batches", "1"}, s.dir / "e");
  INFO(masked_eval.output);
  CHECK(masked_eval.code == 0);

  // prune --only cross: the cross site loses a head, enc and dec keep theirs; BLEU every round.
  const auto pruned = run_headlab({"prune", run.string(), "--strategy", "random", "--only", "cross", "--batches", "1",
                                   "--beam", "1", "--sentences", "2", "--out", (s.dir / "prune").string()},
                                  s.dir / "prune.log");
  INFO(pruned.output);
  CHECK(pruned.code == 0);
  CHECK_THAT(pruned.output, Catch::Contains("round 1: 1 head pruned, heads per site 2 2 1, val loss "));
  CHECK_THAT(pruned.output, Catch::Contains(", BLEU "));
  const CsvTable prune_csv = read_csv(s.dir / "prune" / "prune.csv");
  REQUIRE(prune_csv.rows.size() == 2);
  CHECK(prune_csv.rows[1][prune_csv.column("only")] == "cross");
  CHECK(prune_csv.rows[1][prune_csv.column("pruned_heads")].rfind("2:", 0) == 0);  // site 2 is cross.L0
  CHECK(!prune_csv.rows[1][prune_csv.column("val_bleu")].empty());

  // --bleu: every head's ablation in BLEU beside the loss; the masked head changes nothing.
  const fs::path bleu_dir = s.dir / "bleu";
  const auto bleu = run_headlab({"analyze", run.string(), "--batches", "1", "--no-similarity", "--mask", "dec.L0H1",
                                 "--bleu", "--beam", "2", "--sentences", "3", "--out", bleu_dir.string()},
                                s.dir / "bleu.log");
  INFO(bleu.output);
  REQUIRE(bleu.code == 0);
  CHECK_THAT(bleu.output, Catch::Contains("(3 sentences, beam 2)"));
  const CsvTable bleu_heads = read_csv(bleu_dir / "heads.csv");
  REQUIRE(bleu_heads.rows.size() == 6);
  for (const std::vector<std::string>& row : bleu_heads.rows) {
    INFO(row[bleu_heads.column("label")]);
    CHECK(!row[bleu_heads.column("ablation_bleu_delta")].empty());
    CHECK(!row[bleu_heads.column("ablation_bleu_p")].empty());
    CHECK(row[bleu_heads.column("layer_only_bleu_delta")].empty());  // not asked for
    if (row[bleu_heads.column("label")] == "dec.L0H1") {
      CHECK(row[bleu_heads.column("ablation_bleu_delta")] == "0");
      CHECK(row[bleu_heads.column("ablation_bleu_p")] == "1");
    }
  }
  CHECK(count_lines(test::read_file(bleu_dir / "bleu_ablation.csv")) == 1 + 6);
  CHECK(fs::exists(bleu_dir / "bleu_ablation.h5"));
  const auto beam_alone = run_headlab({"analyze", run.string(), "--beam", "2"}, s.dir / "beam.log");
  CHECK(beam_alone.code == 2);
  CHECK_THAT(beam_alone.output, Catch::Contains("--beam applies to --bleu only"));

  const auto dumped = run_headlab({"analyze", run.string(), "--dump-example", "1"}, s.dir / "dump.log");
  INFO(dumped.output);
  REQUIRE(dumped.code == 0);
  CHECK(fs::exists(run / "heads.csv"));
  const CheckpointReader h5((run / "attention_example_1.h5").string());
  const Shape self = h5.shape("attention"), enc = h5.shape("encoder_attention"), cross = h5.shape("cross_attention");
  const int64_t T = self[2], S = enc[2];
  CHECK(cross == Shape{1, 2, T, S});
  CHECK(h5.read_array<int64_t>("source_tokens").size() == static_cast<size_t>(S));

  const auto report = run_headlab({"report", run.string()}, s.dir / "report.log");
  INFO(report.output);
  REQUIRE(report.code == 0);
  const std::string html = test::read_file(run / "report.html");
  CHECK_THAT(html, Catch::Contains("{\"name\":\"1 cross\",\"n_layers\":1,\"n_heads\":2,\"T\":" + std::to_string(T) +
                                   ",\"causal\":false,"));
  CHECK_THAT(html, Catch::Contains("\"kind\":\"cross\",\"S\":" + std::to_string(S) + ",\"key_tokens\":["));
  CHECK_THAT(html, Catch::Contains("{\"name\":\"1 encoder\",\"n_layers\":1,\"n_heads\":2,\"T\":" + std::to_string(S)));
}
