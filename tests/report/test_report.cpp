#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/analysis/attention_dump.h"
#include "headlab/io/checkpoint.h"
#include "headlab/report/report.h"
#include "support/bible_verse.h"
#include "support/scratch.h"
#include "support/tiny_config.h"

using namespace headlab;
using test::run_headlab;
namespace fs = std::filesystem;

namespace {

// A byte-level text run trained, analysed (one dumped example) and pruned by the binary, once for
// every test that reads it: 2 layers x 2 heads, T = 16.
struct AnalysedRun {
  test::ScratchDir scratch{"report"};
  fs::path run = scratch.dir / "run";
  AnalysedRun() {
    Config c = test::tiny_text_config(scratch.write_corpus("corpus.txt", 600));
    c.model.n_layers = 2;
    c.train.steps = 6;
    c.train.eval_every = c.train.checkpoint_every = 3;
    const fs::path config = scratch.write_config("tiny.toml", c);
    const std::vector<std::vector<std::string>> steps = {
        {"train", config.string(), "--out", run.string()},
        {"analyze", run.string(), "--batches", "1", "--no-ablation", "--dump-example", "0"},
        {"prune", run.string(), "--strategy", "entropy", "--batches", "1", "--step-frac", "0.5"},
    };
    for (const auto& args : steps) {
      const auto r = run_headlab(args, scratch.dir / (args[0] + ".log"));
      INFO(r.output);
      REQUIRE(r.code == 0);
    }
  }
};

const AnalysedRun& analysed_run() {
  static const AnalysedRun run;
  return run;
}

int count_lines(const std::string& text) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

// Self-contained: no script, style, image or link from elsewhere, and no URL at all.
void check_self_contained(const std::string& html) {
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=)", std::regex::icase)));
  CHECK_FALSE(std::regex_search(html, std::regex(R"(<link|@import|url\()", std::regex::icase)));
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("</html>") != std::string::npos);
}

}  // namespace

TEST_CASE("base64 and the one-byte quantisation of attention maps", "[report]") {
  CHECK(base64_encode({}) == "");
  CHECK(base64_encode({'M'}) == "TQ==");
  CHECK(base64_encode({'M', 'a'}) == "TWE=");
  CHECK(base64_encode({'M', 'a', 'n'}) == "TWFu");
  CHECK(base64_encode({0xff, 0x00, 0x80, 0x7f}) == "/wCAfw==");
  // [[1, 0], [0.25, 0.75]]: causal keeps rows' first t + 1 entries; round(255 p).
  const std::vector<double> map = {1.0, 0.0, 0.25, 0.75};
  CHECK(quantise_map(map.data(), 2, 2, true) == std::vector<unsigned char>{255, 64, 191});
  CHECK(quantise_map(map.data(), 2, 2, false) == std::vector<unsigned char>{255, 0, 64, 191});
  // zlib format: header 0x78, then deflate; 1000 zeros compress to a few bytes.
  const std::vector<unsigned char> packed = deflate_bytes(std::vector<unsigned char>(1000, 0));
  CHECK(packed.size() < 30);
  CHECK(packed[0] == 0x78);
}

TEST_CASE("report of a trained run holds its config, curves, heads, pruning and attention maps, offline", "[report]") {
  const AnalysedRun& a = analysed_run();
  const fs::path out = a.scratch.dir / "out" / "r.html";
  const auto r = run_headlab({"report", a.run.string(), "--out", out.string(), "--prompt", "And God said"},
                             a.scratch.dir / "report.log");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::StartsWith("wrote " + out.string()));
  const std::string html = test::read_file(out);
  check_self_contained(html);
  CHECK(html.find("{{DATA}}") == std::string::npos);
  CHECK_THAT(html, Catch::Contains("id=\"report-data\">{\"generated\":"));
  CHECK_THAT(html, Catch::Contains("\"kind\":\"run\""));
  CHECK_THAT(html, Catch::Contains(
                       "\"config\":\"# the build that wrote this file (headlab --version)\\n# headlab_version = "));
  CHECK_THAT(html, Catch::Contains("\"metrics\":{\"columns\":[\"step\",\"tokens\",\"lr\",\"train_loss\",\"val_loss\""));
  CHECK_THAT(html, Catch::Contains("\"heads\":{\"columns\":[\"layer\",\"head\",\"gate\",\"importance\""));
  CHECK_THAT(html, Catch::Contains("\"similarity\":{\"columns\":[\"head\",\"L0H0\",\"L0H1\",\"L1H0\",\"L1H1\"]"));
  CHECK_THAT(html, Catch::Contains("\"checkpoints\":[\"best.h5\""));
  CHECK_THAT(html, Catch::Contains("\"prune\":[{\"name\":\"entropy"));
  CHECK_THAT(html, Catch::Contains("\"csv\":{\"columns\":[\"strategy\",\"seed\""));
  CHECK_THAT(html,
             Catch::Contains(
                 "{\"name\":\"0\",\"n_layers\":2,\"n_heads\":2,\"T\":16,\"causal\":true,\"encoding\":\"deflate\""));
  CHECK_THAT(
      html, Catch::Contains(
                "{\"name\":\"prompt\",\"n_layers\":2,\"n_heads\":2,\"T\":12,\"causal\":true,\"encoding\":\"deflate\""));
  CHECK_THAT(html, Catch::Contains("\"tokens\":[\"A\",\"n\",\"d\",\" \",\"G\""));  // the prompt, as characters

  // Every head of the dumped example, as the page receives it: base64 of zlib of round(255 p) over
  // the lower triangle of attention_example_0.h5's maps.
  const CheckpointReader h5((a.run / "attention_example_0.h5").string());
  const std::vector<double> probs = h5.read_array<double>("attention");
  std::string heads = "\"heads\":[";
  for (int64_t k = 0; k < 4; ++k)
    heads +=
        (k ? ",\"" : "\"") + base64_encode(deflate_bytes(quantise_map(probs.data() + k * 256, 16, 16, true))) + "\"";
  CHECK_THAT(html, Catch::Contains(heads + "]}"));

  SECTION("the default output is RUN/report.html, and the template is the one compiled in") {
    const auto d = run_headlab({"report", a.run.string()}, a.scratch.dir / "default.log");
    INFO(d.output);
    REQUIRE(d.code == 0);
    const std::string page = test::read_file(a.run / "report.html");
    check_self_contained(page);
    CHECK_THAT(page, Catch::Contains("function lineChart"));     // src/report/report_charts.js
    CHECK_THAT(page, Catch::Contains("function createViewer"));  // src/report/report_views.js, after it
    CHECK(page.find("function lineChart") < page.find("function createViewer"));
    CHECK(page.find("{{SCRIPT}}") == std::string::npos);
    CHECK(page.find("\"name\":\"prompt\"") == std::string::npos);
  }
}

TEST_CASE("report reads an attention dump from its CSV when there is no .h5", "[report]") {
  // run_small's attention_example_0.csv (+ _tokens.csv) is hand-written: no .h5, no checkpoints.
  test::ScratchDir s("report_csv");
  fs::copy(fs::path(HEADLAB_SOURCE_DIR) / "tests/fixtures/run_small", s.dir / "run", fs::copy_options::recursive);
  const auto r =
      run_headlab({"report", (s.dir / "run").string(), "--out", (s.dir / "r.html").string()}, s.dir / "log.txt");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const std::string html = test::read_file(s.dir / "r.html");
  check_self_contained(html);
  CHECK_THAT(html, Catch::Contains(
                       "{\"name\":\"0\",\"n_layers\":2,\"n_heads\":4,\"T\":16,\"causal\":true,"
                       "\"encoding\":\"deflate\",\"layer_heads\":[4,4],\"tokens\":[\"A\",\"n\",\"d\",\" \",\"G\""));
  CHECK_THAT(html, Catch::Contains("\"checkpoints\":[]"));
}

TEST_CASE("a folder with only headlab circuits' files is a run, and its files go in as CSV tables", "[report]") {
  // The file names and columns headlab circuits writes (docs/circuits.md); the values are made up.
  test::ScratchDir s("report_circuits");
  const fs::path dir = s.write("detectors.csv",
                               "step,label,layer,head,previous_token,duplicate_token,induction,prefix_matching\n"
                               "20,L0H0,0,0,0.5,0.1,0.1,0.1\n20,L1H0,1,0,0.1,0.1,0.6,0.7\n")
                           .parent_path();
  s.write("patching_resid.csv", "layer,position,metric,restored\n0,0,1.5,0.25\n");
  const std::string json = gather_report(dir.string(), {});
  CHECK_THAT(json, Catch::Contains("\"circuits\":{\"detectors\":{\"columns\":[\"step\",\"label\",\"layer\",\"head\","
                                   "\"previous_token\",\"duplicate_token\",\"induction\",\"prefix_matching\"],"
                                   "\"rows\":[[20,\"L0H0\",0,0,0.5,0.1,0.1,0.1],[20,\"L1H0\",1,0,0.1,0.1,0.6,0.7]]}"));
  CHECK_THAT(json, Catch::Contains("\"patching_resid\":{\"columns\":[\"layer\",\"position\",\"metric\",\"restored\"],"
                                   "\"rows\":[[0,0,1.5,0.25]]}"));
  CHECK_THAT(json, Catch::Contains("\"composition\":null"));
  // Without them (nor anything else a run holds) the folder is refused, naming them.
  fs::remove(dir / "detectors.csv");
  fs::remove(dir / "patching_resid.csv");
  CHECK_THROWS_WITH(gather_report(dir.string(), {}), Catch::Contains("headlab circuits' files"));
}

TEST_CASE("the report's cross-attention entry carries the dump's gold alignment, as [t, s] cells", "[report]") {
  test::ScratchDir s("report_gold");
  const std::unique_ptr<TranslationDataset> data = test::bible_fixture_data(s);
  const test::VerseDump v = test::verse_dump(*data, 0, 3);
  REQUIRE(std::count(v.gold.begin(), v.gold.end(), 1) > 0);
  write_attention_dump(s.dir.string(), "0", v.attention, *data, -1, "ckpt.h5", "val", v.gold);
  const std::vector<uint8_t>& gold = v.gold;
  std::string want = ",\"gold\":[";
  const int64_t S = v.attention.row.source_len;
  for (size_t i = 0; i < gold.size(); ++i)
    if (gold[i]) want += (want.back() == '[' ? "[" : ",[") + std::to_string(i / S) + "," + std::to_string(i % S) + "]";
  want += "]";
  const std::string json = gather_report(s.dir.string(), {});
  const size_t cross = json.find("{\"name\":\"0 cross\"");
  REQUIRE(cross != std::string::npos);
  CHECK(json.find(want) > cross);
  CHECK(json.find("\"gold\"") == json.rfind("\"gold\""));  // the cross entry's only
}

TEST_CASE("analyze --prompt's dump and report --prompt are two examples with distinct names", "[report]") {
  const AnalysedRun& a = analysed_run();
  const fs::path run = a.scratch.dir / "both_prompts";
  fs::copy(a.run, run, fs::copy_options::recursive);
  auto headlab = [&](const std::vector<std::string>& args) {
    const auto r = run_headlab(args, a.scratch.dir / "both_prompts.log");
    INFO(r.output);
    REQUIRE(r.code == 0);
  };
  headlab({"report", run.string(), "--prompt", "And God said", "--out", (run / "alone.html").string()});
  CHECK_THAT(test::read_file(run / "alone.html"),
             Catch::Contains("{\"name\":\"prompt\",\"n_layers\":2,\"n_heads\":2,\"T\":12,"));
  headlab({"analyze", run.string(), "--prompt", "In the beginning"});  // attention_example_prompt.h5: "prompt"
  headlab({"report", run.string(), "--prompt", "And God said", "--out", (run / "both.html").string()});
  const std::string html = test::read_file(run / "both.html");
  CHECK_THAT(html, Catch::Contains("{\"name\":\"prompt\",\"n_layers\":2,\"n_heads\":2,\"T\":16,"));
  CHECK_THAT(html, Catch::Contains("{\"name\":\"prompt (report)\",\"n_layers\":2,\"n_heads\":2,\"T\":12,"));
  CHECK(html.find("\"name\":\"prompt\"") == html.rfind("\"name\":\"prompt\""));  // once
}

TEST_CASE("report of a sweep holds the results table and every run", "[report]") {
  test::ScratchDir s("report_sweep");
  fs::copy(fs::path(HEADLAB_SOURCE_DIR) / "tests/fixtures/sweep_small", s.dir / "sweep", fs::copy_options::recursive);
  const auto r = run_headlab({"report", (s.dir / "sweep").string()}, s.dir / "log.txt");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const std::string html = test::read_file(s.dir / "sweep" / "report.html");
  check_self_contained(html);
  CHECK_THAT(html, Catch::Contains("\"kind\":\"sweep\""));
  CHECK_THAT(html,
             Catch::Contains("\"grid\":{\"columns\":[\"run\",\"model.n_heads\",\"train.seed\",\"params\",\"steps\"]"));
  CHECK_THAT(html, Catch::Contains("\"results\":{\"columns\":[\"model.n_heads\",\"n_seeds\""));
  CHECK_THAT(html, Catch::Contains("\"summary\":\""));
  for (const char* run :
       {"model.n_heads=1,train.seed=0", "model.n_heads=2,train.seed=1", "model.n_heads=4,train.seed=1"})
    CHECK_THAT(html, Catch::Contains(std::string("{\"name\":\"") + run + "\",\"path\":"));
  CHECK_THAT(html, Catch::Contains("\"heads\":{\"columns\":[\"layer\",\"head\""));  // n_heads=4, seed 0 was analysed
  CHECK(fs::exists(s.dir / "sweep" / "results.csv"));
}

TEST_CASE("report of a missing folder, a folder that is not a run, or with bad options is one line and exit code 2",
          "[report]") {
  test::ScratchDir s("report_bad");
  fs::create_directories(s.dir / "empty");
  fs::create_directories(s.dir / "stuff");
  fs::create_directories(s.dir / "badcsv");
  s.write("badcsv/attention_example_0.csv", "layer,head,query,k0\nx,0,0,1\n");
  s.write("stuff/notes.txt", "not a run\n");
  fs::copy(fs::path(HEADLAB_SOURCE_DIR) / "tests/fixtures/sweep_small", s.dir / "sweep", fs::copy_options::recursive);
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"report", (s.dir / "missing").string()}, "no such folder: " + (s.dir / "missing").string()},
      {{"report", (s.dir / "empty").string()}, "is not a run or sweep folder"},
      {{"report", (s.dir / "stuff").string()}, "is not a run or sweep folder"},
      {{"report", (s.dir / "stuff" / "notes.txt").string()}, "no such folder"},
      {{"report"}, "no folder given"},
      {{"report", (s.dir / "sweep").string(), "--prompt", "x"}, "is a sweep folder: --prompt needs a run folder"},
      {{"report", (s.dir / "stuff").string(), "--prompt", "x", "--prompt-file", "y"},
       "give --prompt or --prompt-file, not both"},
      {{"report", (s.dir / "stuff").string(), "extra"}, "extra"},
      {{"report", (s.dir / "stuff").string(), "--colour"}, "colour"},
      {{"reprot", (s.dir / "stuff").string()}, "unknown verb 'reprot'; did you mean 'report'?"},
      {{"report", (s.dir / "badcsv").string()}, "attention_example_0.csv: row 1 has 'x' for layer, not a count"},
  };
  for (const Case& c : cases) {
    const auto r = run_headlab(c.args, s.dir / "log.txt");
    INFO(r.output);
    CHECK(r.code == 2);
    CHECK(count_lines(r.output) == 1);
    CHECK_THAT(r.output, Catch::Contains(c.expected));
  }
  CHECK_FALSE(fs::exists(s.dir / "empty" / "report.html"));
}
