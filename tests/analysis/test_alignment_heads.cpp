// Alignment heads (analysis/alignment_heads.h) on the Bible's val verses with an untrained model:
// one row per cross head, per layer mean and per baseline, every method aligning the same target
// words, the baselines equal to the word_alignment functions run by hand; the one-line
// refusal of a corpus without Strong's numbers; and the alignment columns of heads.csv through
// its readers (read_csv, the report's gather_report, heads.h5).
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "headlab/analysis/alignment_heads.h"
#include "headlab/analysis/head_roles.h"
#include "headlab/common/error.h"
#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"
#include "headlab/report/report.h"
#include "support/random.h"
#include "support/scratch.h"
#include "support/skip.h"
#include "support/tiny_model.h"

using namespace headlab;

namespace {

TranslationOptions bible_bytes(int64_t seq_len) {
  TranslationOptions o;  // path "bible": KJV -> RV1909, Ruth val; byte tokens (nothing to train)
  o.seq_len = seq_len;
  return o;
}

}  // namespace

TEST_CASE("alignment heads: every method aligns the same words, the baselines as computed by hand",
          "[analysis][alignment][bible]") {
  REQUIRE_SWORD();
  const TranslationDataset data(bible_bytes(512));
  ModelSpec spec = test::tiny_seq2seq_spec(2, 2, 2, 1);
  spec.vocab_size = 259;
  spec.max_seq_len = 512;
  Model<float> model(spec);
  test::randomize(model, 5);
  AlignmentOptions options;
  options.max_sentences = 12;
  options.ibm_iterations = 2;
  options.ibm_training_sentences = 3000;
  const AlignmentReport r = score_alignment_heads(model, data, Split::val, options);
  REQUIRE(r.rows.size() == static_cast<size_t>(spec.n_layers * (spec.cross_n_heads + 1) + 2));
  CHECK(r.rows[0].method == "cross.L0H0");
  CHECK(r.rows[2].method == "cross.L0 mean");
  CHECK(r.rows[r.rows.size() - 2].method == "diagonal");
  CHECK(r.rows.back().method == "ibm1");
  CHECK(r.ibm_log_likelihoods.size() == 3);
  CHECK(r.sentences > 0);
  CHECK(r.sentences + r.skipped <= 12);

  // The baselines by hand over the verses the report scored (none cut at seq_len 512).
  REQUIRE(r.skipped == 0);
  std::vector<IbmModel1::Sentence> training;
  for (size_t i = 0; i < 3000; ++i) {
    const BiblePair& pair = data.sentences(Split::train)[i].pair;
    training.push_back({split_words(pair.source), split_words(pair.target)});
  }
  const IbmModel1 ibm(training, 2);
  AlignmentCounts diagonal, ibm1;
  for (size_t i = 0; i < 12; ++i) {
    const BiblePair& pair = data.sentences(Split::val)[i].pair;
    const std::vector<AlignmentLink> gold = gold_links(pair);
    const std::vector<int> targets = aligned_target_words(gold);
    if (targets.empty()) continue;
    const auto src = split_words(pair.source), tgt = split_words(pair.target);
    diagonal.add(diagonal_alignment(static_cast<int>(src.size()), static_cast<int>(tgt.size()), targets), gold);
    ibm1.add(ibm.align(src, tgt, targets), gold);
  }
  const AlignmentRow &d = r.rows[r.rows.size() - 2], &m = r.rows.back();
  CHECK(d.counts.correct == diagonal.correct);
  CHECK(d.counts.gold == diagonal.gold);
  CHECK(m.counts.correct == ibm1.correct);
  CHECK(d.counts.gold > 0);
  for (const AlignmentRow& row : r.rows) {
    INFO(row.method);
    CHECK(row.counts.predicted == d.counts.predicted);  // one link per aligned target word, every method
    CHECK(row.counts.gold == d.counts.gold);
    CHECK(row.alignment_head == (row.layer >= 0 && row.counts.aer() < std::min(d.counts.aer(), m.counts.aer())));
  }
}

TEST_CASE("alignment needs gold alignments: two plain files are one error line", "[analysis][alignment]") {
  test::ScratchDir s("alignment_files");
  const auto source = s.write_parallel_corpus(40);
  TranslationOptions o;
  o.path = source.string();
  o.target_path = (source.parent_path() / "target.txt").string();
  o.seq_len = 48;
  const TranslationDataset data(o);
  ModelSpec spec = test::tiny_seq2seq_spec(2, 2, 2, 1);
  spec.vocab_size = 259;
  spec.max_seq_len = 64;
  Model<float> model(spec);
  CHECK_THROWS_WITH(score_alignment_heads(model, data, Split::val, {}), Catch::Contains("carry no Strong's numbers"));
}

TEST_CASE("heads.csv's alignment columns hold each cross head's scores and read back through the readers",
          "[analysis][alignment]") {
  // An encoder_decoder's scores by hand: enc.L0, dec.L0, cross.L0 and cross.L1 of 2 heads each.
  HeadScores s;
  s.n_sites = 4;
  s.n_heads = 2;
  s.sites = {{AttentionKind::enc, 0}, {AttentionKind::dec, 0}, {AttentionKind::cross, 0}, {AttentionKind::cross, 1}};
  s.baseline_kind = AttentionKind::enc;
  for (const HeadColumn& c : head_columns()) (s.*c.values).assign(8, std::nan(""));
  s.gate.assign(8, 1.0);
  s.positional_share = {0.95, 0.2, 0.3, 0.4, std::nan(""), std::nan(""), std::nan(""), std::nan("")};
  assign_roles(s);
  // The report as score_alignment_heads lays it out: heads and a mean per layer, then baselines.
  AlignmentReport r;
  auto row = [](const std::string& method, int64_t layer, int64_t head, int64_t predicted, int64_t correct) {
    AlignmentRow a;
    a.method = method;
    a.layer = layer;
    a.head = head;
    a.counts.predicted = predicted;
    a.counts.gold = 20;
    a.counts.correct = correct;
    return a;
  };
  r.rows = {row("cross.L0H0", 0, 0, 10, 5), row("cross.L0H1", 0, 1, 10, 2), row("cross.L0 mean", 0, -1, 10, 4),
            row("cross.L1H0", 1, 0, 10, 9), row("cross.L1H1", 1, 1, 10, 0), row("cross.L1 mean", 1, -1, 10, 6),
            row("diagonal", -1, -1, 10, 3), row("ibm1", -1, -1, 10, 4)};
  add_alignment_columns(r, s);

  test::ScratchDir dir("alignment_columns");
  write_heads_csv((dir.dir / "heads.csv").string(), s);
  write_alignment_csv((dir.dir / "alignment.csv").string(), r);
  const CsvTable heads = read_csv(dir.dir / "heads.csv");
  const std::vector<std::string> last(heads.header.end() - 3, heads.header.end());
  CHECK(last == std::vector<std::string>{"role", "attention", "label"});
  const CsvTable alignment = read_csv(dir.dir / "alignment.csv");
  REQUIRE(heads.rows.size() == 8);
  int64_t cross = 0;
  for (const std::vector<std::string>& h : heads.rows) {
    const std::string label = h[heads.column("label")];
    INFO(label);
    if (h[heads.column("attention")] != "cross") {
      for (const char* column : {"alignment_aer", "alignment_precision", "alignment_recall"})
        CHECK(h[heads.column(column)].empty());
      CHECK(!h[heads.column("role")].empty());
      continue;
    }
    ++cross;
    CHECK(h[heads.column("role")].empty());  // cross heads have no positions to give a role by
    for (const std::vector<std::string>& a : alignment.rows)
      if (a[alignment.column("method")] == label) {
        CHECK(h[heads.column("alignment_aer")] == a[alignment.column("aer")]);
        CHECK(h[heads.column("alignment_precision")] == a[alignment.column("precision")]);
        CHECK(h[heads.column("alignment_recall")] == a[alignment.column("recall")]);
      }
  }
  CHECK(cross == 4);
  CHECK(heads.rows[0][heads.column("role")] == "positional");
  CHECK(heads.rows[1][heads.column("role")] == "none");
  // cross.L1H0: 9 of 10 predicted links correct, 9 of 20 gold found: AER 1 - 18/30.
  CHECK(heads.rows[6][heads.column("alignment_aer")] == "0.4");
  CHECK(heads.rows[6][heads.column("alignment_precision")] == "0.9");
  CHECK(heads.rows[6][heads.column("alignment_recall")] == "0.45");

  // The report reads the columns as numbers, the role as text.
  const std::string report = gather_report(dir.dir.string(), {});
  CHECK_THAT(report, Catch::Contains("\"alignment_aer\",\"alignment_precision\",\"alignment_recall\""));
  CHECK_THAT(report, Catch::Contains("\"role\",\"attention\",\"label\"]"));
  CHECK_THAT(report, Catch::Contains("\"positional\",\"enc\",\"enc.L0H0\"]"));

  write_heads_h5((dir.dir / "heads.h5").string(), s, {});
  const CheckpointReader h5((dir.dir / "heads.h5").string());
  const std::vector<double> aer = h5.read_array<double>("heads/alignment_aer");  // [sites, H]
  REQUIRE(aer.size() == 8);
  CHECK(std::isnan(aer[0]));
  CHECK(aer[6] == Approx(0.4));
  const std::vector<double> role = h5.read_array<double>("heads/role");
  CHECK(role[0] == 1.0);  // kRolePositional
  CHECK(role[1] == 0);
  CHECK(std::isnan(role[4]));
  CHECK(h5.string_attr("role_bits") == "positional=1,syntactic=2,rare_token=4");
  CHECK(h5.string_attr("baseline_attention") == "enc");
  CHECK(std::isnan(h5.double_attr("chance_rare_token_agreement")));

  // A report of another model's heads is refused in one line.
  r.rows.erase(r.rows.begin() + 3, r.rows.begin() + 6);  // no cross.L1
  CHECK_THROWS_WITH(add_alignment_columns(r, s), Catch::Contains("2 heads scored as aligners, 4 cross heads"));
}
