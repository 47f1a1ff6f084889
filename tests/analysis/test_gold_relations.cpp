// The gold-relation agreements (Clark et al.'s syntactic heads, Voita et al.'s relations) measured
// by head analysis on the grammar task, recounted by hand from the model's attention.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "headlab/analysis/attention_stats.h"
#include "headlab/analysis/heads.h"
#include "headlab/data/tasks.h"
#include "support/tiny_model.h"

using namespace headlab;
using test::tiny_spec;

TEST_CASE("on the grammar task every gold agreement is measured and padding rows are skipped", "[analysis]") {
  TaskOptions t;
  t.task = "grammar";
  t.seq_len = 40;
  t.eval_examples = 16;
  auto data = make_task(t);
  ModelSpec spec = tiny_spec(ModelKind::decoder, data->vocab_size(), 2, 2, 40);
  Model<float> model(spec);
  model.params().init(5);
  AnalysisOptions o;
  o.batch_size = 8;
  o.ablation = false;
  o.pad_token = 0;  // <pad>
  const HeadScores s = analyze_heads(model, *data, Split::val, 2, o);
  int64_t rows = 0;  // non-pad tokens after the first of each row
  Batch batch = data->make_batch(8);
  for (int64_t i = 0; i < 2; ++i) {
    data->fill_batch(Split::val, i, batch);
    for (int64_t r = 0; r < 8 * 40; ++r) rows += r % 40 > 0 && batch.tokens[r] != 0;
  }
  CHECK(s.n_query_rows == rows);
  CHECK(rows < 16 * 39);  // the rows did end in padding
  for (int64_t k = 0; k < s.n_total(); ++k) {
    for (const auto* v :
         {&s.syntactic_head_agreement, &s.dependent_agreement, &s.antecedent_agreement, &s.delimiter_agreement,
          &s.delimiter_mass, &s.previous_token_agreement, &s.positional_share, &s.rare_token_agreement}) {
      CHECK((*v)[k] >= 0);
      CHECK((*v)[k] <= 1);
    }
    CHECK(s.positional_offset[k] >= 0);  // a decoder attends to t - offset <= t
    CHECK(std::isnan(s.ablation_loss_delta[k]));
    CHECK(std::isnan(s.ablation_accuracy_delta[k]));  // grammar has no accuracy
  }
  for (const BaselineField& f : positional_baselines()) {
    const PositionalBaseline& b = s.*f.baseline;
    INFO(f.relation << ": baseline " << b.agreement << " at offset " << b.offset);
    CHECK(b.agreement > 0);
    CHECK(b.agreement <= 1);
    CHECK(b.chance > 0);
    CHECK(b.chance < 1);
    // A gold key before t; the rarest visible token may be t's own.
    CHECK(b.offset >= (std::string(f.relation) == "rare_token" ? 0 : 1));
  }
  REQUIRE(s.role.size() == static_cast<size_t>(s.n_total()));
  for (int r : s.role) CHECK(r >= 0);  // every head of a decoder has positions, so a role or none
  // analyze_heads counts the baselines over its query rows: the same from the batches directly.
  AttentionSums direct(s.n_total());
  const std::vector<int64_t> counts = data->train_token_counts();
  for (int64_t i = 0; i < 2; ++i) {
    data->fill_batch(Split::val, i, batch);
    std::vector<uint8_t> query_rows(batch.tokens.size());
    for (size_t r = 0; r < query_rows.size(); ++r) query_rows[r] = r % 40 > 0 && batch.tokens[r] != 0;
    AttentionBatchInfo info;
    info.batch_size = 8;
    info.seq_len = 40;
    info.query_rows = query_rows.data();
    info.gold_head = batch.gold_head.data();
    info.gold_antecedent = batch.gold_antecedent.data();
    info.tokens = batch.tokens.data();
    info.token_counts = counts.data();
    info.vocab_size = static_cast<int64_t>(counts.size());
    accumulate_positional_baselines(info, direct);
  }
  HeadScores recount;
  recount.n_sites = s.n_sites;
  recount.n_heads = s.n_heads;
  finish_attention_stats(direct, recount);
  for (const BaselineField& f : positional_baselines()) {
    CHECK((recount.*f.baseline).agreement == (s.*f.baseline).agreement);
    CHECK((recount.*f.baseline).offset == (s.*f.baseline).offset);
    CHECK((recount.*f.baseline).chance == (s.*f.baseline).chance);
  }
}
