// headlab translate and headlab eval on a translation run: one line per input line, BLEU and chrF
// in eval's output, and bad input as one line with exit code 2.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_scratch.h"
#include "headlab/analysis/attention_dump.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"
#include "support/json_reader.h"
#include "support/scratch.h"
#include "support/tiny_config.h"
#include "support/trained_run.h"

using namespace headlab;
using test::count_lines;
using test::run_headlab;
namespace fs = std::filesystem;

namespace {

// A translation run trained once (20 steps on word-for-word pairs), for every test here; its
// corpus lives as long as the run, which reads it again for eval.
const test::ScratchDir& translate_corpus() {
  static const test::ScratchDir corpus("translate_corpus");
  return corpus;
}

const test::TrainedRun& translate_run() {
  static const test::TrainedRun run("translate_cli",
                                    test::tiny_translate_config(translate_corpus().write_parallel_corpus(300)));
  return run;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("translate prints one line per input line, from --text or --input", "[cli][translate]") {
  const test::TrainedRun& run = translate_run();
  const fs::path& dir = run.scratch.dir;
  const auto one = run_headlab({"translate", run.run.string(), "--text", "the light was good"}, dir / "one.log");
  INFO(one.output);
  REQUIRE(one.code == 0);
  CHECK(lines_of(one.output).size() == 1);

  const fs::path input = run.scratch.write("input.txt", "the light was good\r\n\ngod said\n");
  const auto file = run_headlab({"translate", run.run.string(), "--input", input.string()}, dir / "file.log");
  INFO(file.output);
  REQUIRE(file.code == 0);
  const std::vector<std::string> got = lines_of(file.output);
  REQUIRE(got.size() == 3);
  CHECK(got[0] == lines_of(one.output)[0]);  // the '\r' is not part of the sentence
  CHECK(got[1].empty());                     // an empty line stays one, unsearched
  const auto beam = run_headlab(
      {"translate", run.run.string(), "--input", input.string(), "--beam", "3", "--lenpen", "0.6"}, dir / "beam.log");
  CHECK(beam.code == 0);
  CHECK(lines_of(beam.output).size() == 3);
}

TEST_CASE("translate's bad input is one line and exit code 2", "[cli][translate]") {
  const test::TrainedRun& run = translate_run();
  const test::ScratchDir& s = run.scratch;
  const fs::path latin1 = s.write("latin1.txt", "the light\nni\xF1o\n");
  test::CliScratch lm;  // a text decoder's run: no source side to translate from
  const auto lm_train =
      run_headlab({"train", lm.config.string(), "--out", (lm.dir / "run").string()}, lm.dir / "t.log");
  REQUIRE(lm_train.code == 0);
  const std::string ckpt = run.run.string();
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {{"translate", ckpt, "--text", "the", "--beam", "0"}, "--beam must be at least 1, got 0"},
      {{"translate", ckpt, "--input", (s.dir / "missing.txt").string()}, "cannot read input file"},
      {{"translate", ckpt, "--input", latin1.string()}, latin1.string() + ":2: not UTF-8 text"},
      {{"translate", ckpt, "--text", "ni\xF1o"}, "--text:1: not UTF-8 text"},
      {{"translate", ckpt}, "nothing to translate: give --text or --input"},
      {{"translate", ckpt, "--text", "a", "--input", latin1.string()}, "give --text or --input, not both"},
      {{"translate", ckpt, "--text", "a", "--lenpen", "abc"}, "invalid value 'abc' for --lenpen"},
      {{"translate", (lm.dir / "run").string(), "--text", "the"}, "translate reads encoder_decoder checkpoints"},
      {{"translate", (s.dir / "missing.h5").string(), "--text", "the"}, "missing.h5"},
      {{"eval", (lm.dir / "run").string(), "--beam", "2"}, "--beam: "},
      {{"eval", ckpt, "--baseline", "oracle"}, "--baseline must be copy (the source itself) or strongs"},
      {{"eval", ckpt, "--baseline", "strongs"}, "needs Strong's tags on the target side"},  // files, not the Bible
  };
  for (const Case& c : cases) {
    const auto r = run_headlab(c.args, s.dir / "bad.log");
    INFO(c.args[0] << " " << c.args.back() << ": " << r.output);
    CHECK(r.code == 2);
    CHECK(count_lines(r.output) == 1);
    CHECK_THAT(r.output, Catch::Contains(c.expected));
  }
}

TEST_CASE("eval of a translation run reports BLEU and chrF, greedy unless --beam, and writes the hypotheses",
          "[cli][translate]") {
  const test::TrainedRun& run = translate_run();
  const fs::path& dir = run.scratch.dir;
  const auto greedy = run_headlab({"eval", run.run.string(), "--split", "test"}, dir / "eval.log");
  INFO(greedy.output);
  REQUIRE(greedy.code == 0);
  CHECK_THAT(greedy.output, Catch::Contains("\nloss "));
  CHECK_THAT(greedy.output, Catch::Contains("\nbleu "));
  CHECK_THAT(greedy.output, Catch::Contains("(greedy decoding, "));
  CHECK_THAT(greedy.output, Catch::Contains("\nchrf "));

  const fs::path hypotheses = dir / "test.hyp";
  const auto beam = run_headlab(
      {"eval", run.run.string(), "--split", "test", "--beam", "2", "--hypotheses", hypotheses.string(), "--json"},
      dir / "beam.log");
  INFO(beam.output);
  REQUIRE(beam.code == 0);
  const test::JsonValue json = test::parse_json(beam.output);
  CHECK(json["beam"].number() == 2);
  CHECK(json["sentences"].number() > 20);  // the 30 test lines less any whose source is a training one
  CHECK(json["bleu"].number() >= 0);
  CHECK(json["chrf"].number() > 0);
  CHECK(lines_of(test::read_file(hypotheses)).size() == json["sentences"].number());
  CHECK_FALSE(fs::exists(hypotheses.string() + ".tmp"));
}

TEST_CASE("eval --baseline copy scores the sources themselves as the translations", "[cli][translate]") {
  const test::TrainedRun& run = translate_run();
  const fs::path& dir = run.scratch.dir;
  const fs::path hypotheses = dir / "copy.hyp";
  const auto r = run_headlab(
      {"eval", run.run.string(), "--split", "test", "--baseline", "copy", "--hypotheses", hypotheses.string()},
      dir / "copy.log");
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("(baseline copy, no model, "));
  // The hypotheses are test sentences of the source file: each is one of its lines.
  const std::vector<std::string> sources = lines_of(test::read_file(translate_corpus().dir / "source.txt"));
  const std::vector<std::string> written = lines_of(test::read_file(hypotheses));
  REQUIRE_FALSE(written.empty());
  for (const std::string& line : written) CHECK(std::find(sources.begin(), sources.end(), line) != sources.end());
}

TEST_CASE("analyze --prompt on a translation model dumps the source, its greedy translation and all three maps",
          "[cli][translate]") {
  const test::TrainedRun& run = translate_run();
  const fs::path out = run.scratch.dir / "prompt_dump";
  const std::string sentence = "the light was good";
  const auto r = run_headlab({"analyze", run.run.string(), "--prompt", sentence, "--out", out.string()},
                             run.scratch.dir / "prompt.log");
  INFO(r.output);
  REQUIRE(r.code == 0);
  const auto translated = run_headlab({"translate", run.run.string(), "--text", sentence}, run.scratch.dir / "t.log");
  CHECK_THAT(r.output, Catch::Contains("greedy translation: " + lines_of(translated.output).at(0)));
  const AttentionDump dump = read_attention_dump(out.string(), "prompt");
  const AttentionExample& a = dump.attention;
  const auto S = static_cast<int64_t>(a.row.source_tokens.size());  // the reader fills tokens, not source_len
  const int64_t T = a.seq_len;
  CHECK(S == static_cast<int64_t>(sentence.size()) + 1);  // the sentence's bytes and </s>
  CHECK(static_cast<int64_t>(dump.source_labels.size()) == S);
  REQUIRE(a.row.tokens.size() == static_cast<size_t>(T));
  CHECK(a.row.tokens[0] == 257);  // <s> (bytes with specials): the decoder reads <s> and the translation
  CHECK(a.encoder.n_queries == S);
  CHECK(a.encoder.n_keys == S);
  CHECK(a.cross.n_queries == T);
  CHECK(a.cross.n_keys == S);
  // Every cross-attention row is a distribution over the whole source (no source padding).
  for (int64_t h = 0; h < a.cross.n_heads; ++h)
    for (int64_t t = 0; t < T; ++t) {
      double sum = 0;
      for (int64_t s = 0; s < S; ++s) sum += a.cross.probs[((0 * a.cross.n_heads + h) * T + t) * S + s];
      CHECK(sum == Approx(1.0).margin(1e-5));
    }
}

TEST_CASE("analyze --alignment needs Strong's numbers: a run on two plain files is one line, exit 2",
          "[cli][translate][alignment]") {
  const test::TrainedRun& run = translate_run();
  const auto r = run_headlab({"analyze", run.run.string(), "--alignment"}, run.scratch.dir / "alignment.log");
  CHECK(r.code == 2);
  CHECK_THAT(r.output, Catch::Contains("carry no Strong's numbers"));
  CHECK(count_lines(r.output) == 1);
  CHECK_FALSE(fs::exists(run.run / "alignment.csv"));
}

TEST_CASE(
    "analyze --alignment adds each cross head's AER, precision and recall to heads.csv, as alignment.csv has them",
    "[cli][translate][alignment]") {
  // A Bible run on tests/fixtures/bible_pairs_small (Strong's numbers on both sides), placed where
  // the export of the default modules and books goes under XDG_CACHE_HOME.
  test::ScratchDir s("alignment_cli");
  const fs::path cache = s.dir / "cache";
  fs::create_directories(cache / "headlab");
  fs::copy(fs::path(HEADLAB_SOURCE_DIR) / "tests/fixtures/bible_pairs_small",
           cache / "headlab" / "bible-pairs-engKJV2006eb-spaRV1909eb-val-Ruth-test-Mark", fs::copy_options::recursive);
  const std::map<std::string, std::string> env = {{"XDG_CACHE_HOME", cache.string()}};
  Config c = test::tiny_translate_config(s.dir / "unused.txt");
  c.data.path = "bible";
  c.data.target_path = "";
  c.data.batch_tokens = 4 * 48;
  c.train.steps = 2;
  c.train.eval_every = 2;
  c.train.checkpoint_every = 2;
  c.train.eval_bleu_sentences = 0;
  const fs::path run = s.dir / "run";
  const auto train =
      run_headlab({"train", s.write_config("bible.toml", c).string(), "--out", run.string()}, s.dir / "train.log", env);
  INFO(train.output);
  REQUIRE(train.code == 0);

  const fs::path out = s.dir / "analysis";
  const auto r = run_headlab({"analyze", run.string(), "--alignment", "--out", out.string()}, s.dir / "a.log", env);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::Contains("alignment against the Strong's gold, val split: 3 verses scored"));
  CHECK_THAT(r.output, Catch::Contains("positional baseline of rare_token_agreement (enc heads): "));
  const CsvTable heads = read_csv(out / "heads.csv");
  const CsvTable alignment = read_csv(out / "alignment.csv");
  CHECK(std::vector<std::string>(heads.header.end() - 3, heads.header.end()) ==
        std::vector<std::string>{"role", "attention", "label"});
  REQUIRE(heads.rows.size() == 6);  // 2 heads each of enc.L0, dec.L0, cross.L0
  int64_t compared = 0;
  for (const std::vector<std::string>& h : heads.rows) {
    const std::string label = h[heads.column("label")];
    INFO(label);
    const bool cross = h[heads.column("attention")] == "cross";
    CHECK(h[heads.column("role")].empty() == cross);  // enc and dec heads get a role, "none" at least
    if (!cross) {
      for (const char* column : {"alignment_aer", "alignment_precision", "alignment_recall"})
        CHECK(h[heads.column(column)].empty());
      continue;
    }
    CHECK(!h[heads.column("alignment_aer")].empty());
    for (const std::vector<std::string>& a : alignment.rows)
      if (a[alignment.column("method")] == label) {
        CHECK(h[heads.column("alignment_aer")] == a[alignment.column("aer")]);
        CHECK(h[heads.column("alignment_precision")] == a[alignment.column("precision")]);
        CHECK(h[heads.column("alignment_recall")] == a[alignment.column("recall")]);
        ++compared;
      }
  }
  CHECK(compared == 2);
  const CheckpointReader h5((out / "heads.h5").string());
  CHECK(h5.string_attr("baseline_attention") == "enc");
  const double chance = h5.double_attr("chance_rare_token_agreement");
  CHECK(chance > 0);
  CHECK(chance < 1);
  CHECK(h5.double_attr("baseline_rare_token_agreement") >= chance * 0.999);  // offset 0 scores chance exactly

  // --alignment-only: alignment.csv alone, the same table.
  const fs::path only = s.dir / "only";
  const auto o =
      run_headlab({"analyze", run.string(), "--alignment-only", "--out", only.string()}, s.dir / "o.log", env);
  INFO(o.output);
  REQUIRE(o.code == 0);
  CHECK(test::read_file(only / "alignment.csv") == test::read_file(out / "alignment.csv"));
  CHECK_FALSE(fs::exists(only / "heads.csv"));
}
