// Alignment heads (analysis/alignment_heads.h) on the Bible's val verses with an untrained model:
// one row per cross head, per layer mean and per baseline, every method aligning the same target
// words, the baselines equal to the word_alignment functions run by hand; and the one-line
// refusal of a corpus without Strong's numbers.
#include <catch2/catch.hpp>

#include <vector>

#include "headlab/analysis/alignment_heads.h"
#include "headlab/common/error.h"
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
