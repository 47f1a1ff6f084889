// Pruning a translation model (src/prune/prune_loop.cpp on an encoder_decoder): heads numbered
// site by site over its three kinds of attention, --only one kind (Michel et al.'s Fig. 4), L0
// over some kinds with the model trained or frozen, and BLEU at every round.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <vector>

#include "headlab/decode/translate_split.h"
#include "headlab/prune/prune_loop.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/evaluate.h"
#include "headlab/train/setup.h"
#include "support/scratch.h"
#include "support/tiny_config.h"
#include "support/trained_run.h"

using namespace headlab;

namespace {

// tiny_translate_config trained 40 steps: 1 encoder and 1 decoder layer of 2 heads each, so the
// sites are enc.L0, dec.L0, cross.L0 with 2 heads each.
const test::TrainedRun& trained_translation() {
  static const test::ScratchDir corpus("prune_seq2seq_data");
  static const test::TrainedRun run("prune_seq2seq", [] {
    Config c = test::tiny_translate_config(corpus.write_parallel_corpus(200));
    c.train.steps = 40;
    c.train.eval_every = 40;
    c.train.checkpoint_every = 40;
    return c;
  }());
  return run;
}

PruneOptions seq2seq_options(PruneStrategy strategy) {
  PruneOptions o;
  o.strategy = strategy;
  o.step_frac = 0.2;  // 1 of 6 heads (or of the prunable ones) per round
  o.eval_batches = 2;
  o.score_batches = 2;
  o.bleu_sentences = 4;
  o.search.beam = 2;
  return o;
}

struct Pruned {
  OpenedCheckpoint checkpoint = open_checkpoint(trained_translation().checkpoint());
  std::unique_ptr<Optimizer<float>> optimizer = make_optimizer(checkpoint.config, checkpoint.model->params());
  std::vector<PruneRound> rounds;
  explicit Pruned(const PruneOptions& o) {
    rounds = iterative_prune(*checkpoint.model, *optimizer, checkpoint.config, *checkpoint.dataset, o,
                             checkpoint.progress.step);
  }
  std::vector<float> gates(int site) const {
    const Tensor<float> g = checkpoint.model->gates().value(site);
    return {g.data(), g.data() + g.numel()};
  }
};

// The loss and BLEU prune reports, measured afresh on `model` with its gates as they are.
std::pair<double, double> loss_and_bleu(Model<float>& model, const Dataset& data, const PruneOptions& o,
                                        int64_t batch_size) {
  Arena arena;
  Tape<float> tape(arena);
  Batch batch = data.make_batch(batch_size);
  const double loss = evaluate(model, data, o.split, o.eval_batches, batch, tape).loss;
  return {loss, translate_split(model, *data.translation(), o.split, o.search, o.bleu_sentences).bleu.score};
}

}  // namespace

TEST_CASE("pruning a translation model goes site by site over its three kinds, with BLEU at every round",
          "[prune][seq2seq]") {
  const PruneOptions o = seq2seq_options(PruneStrategy::importance);
  Pruned p(o);
  REQUIRE(p.rounds.size() == 4);  // 6 heads, 1 per round, until each of the 3 sites has one
  CHECK(p.rounds[0].heads_per_site == std::vector<int64_t>{2, 2, 2});
  CHECK(p.rounds.back().heads_per_site == std::vector<int64_t>{1, 1, 1});
  for (const PruneRound& r : p.rounds) {
    CHECK(r.bleu >= 0);
    CHECK(r.chrf >= 0);
  }
  // The last round's numbers are the pruned model's own, and round 0's the unpruned model's.
  const auto [loss, bleu] = loss_and_bleu(*p.checkpoint.model, *p.checkpoint.dataset, o, 4);
  CHECK(p.rounds.back().metric.loss == loss);
  CHECK(p.rounds.back().bleu == bleu);
  OpenedCheckpoint unpruned = open_checkpoint(trained_translation().checkpoint());
  const auto [loss0, bleu0] = loss_and_bleu(*unpruned.model, *unpruned.dataset, o, 4);
  CHECK(p.rounds[0].metric.loss == loss0);
  CHECK(p.rounds[0].bleu == bleu0);
  for (const SiteHead& x : p.rounds.back().pruned) CHECK(p.gates(static_cast<int>(x.site))[x.head] == 0.0f);

  PruneOptions quiet = o;
  quiet.bleu = false;
  const Pruned no_bleu(quiet);
  CHECK(no_bleu.rounds.back().bleu == -1);
  CHECK(no_bleu.rounds.back().metric.loss == p.rounds.back().metric.loss);
}

TEST_CASE("prune --only cross prunes cross-attention heads and leaves enc and dec whole", "[prune][seq2seq]") {
  PruneOptions o = seq2seq_options(PruneStrategy::random);
  o.only = {AttentionKind::cross};
  o.bleu = false;
  const Pruned p(o);
  REQUIRE(p.rounds.size() == 2);
  CHECK(p.rounds.back().heads_per_site == std::vector<int64_t>{2, 2, 1});
  CHECK(p.gates(0) == std::vector<float>{1, 1});
  CHECK(p.gates(1) == std::vector<float>{1, 1});
  REQUIRE(p.rounds.back().pruned.size() == 1);
  CHECK(p.rounds.back().pruned[0].site == 2);

  o.only = {AttentionKind::enc, AttentionKind::dec};
  const Pruned two(o);
  CHECK(two.rounds.back().heads_per_site == std::vector<int64_t>{1, 1, 2});
}

TEST_CASE("L0 over the encoder's heads only, the model frozen or trained", "[prune][seq2seq][l0]") {
  PruneOptions o = seq2seq_options(PruneStrategy::l0);
  o.only = {AttentionKind::enc};
  o.lambda = 5.0;  // strong enough to close heads within the run
  o.l0_steps = 30;
  o.l0_lr = 0.3;
  o.bleu = false;
  o.l0_freeze = true;
  const Pruned frozen(o);
  const OpenedCheckpoint original = open_checkpoint(trained_translation().checkpoint());
  const Parameters<float>& after = frozen.checkpoint.model->params();
  CHECK(std::equal(after.values(), after.values() + after.slab_size(), original.model->params().values()));
  CHECK(frozen.gates(1) == std::vector<float>{1, 1});  // dec and cross are not gated by L0
  CHECK(frozen.gates(2) == std::vector<float>{1, 1});
  for (float g : frozen.gates(0)) CHECK((g == 0.0f || g == 1.0f));
  INFO("enc heads closed: " << frozen.rounds.back().pruned.size());
  CHECK(!frozen.rounds.back().pruned.empty());
  for (const SiteHead& x : frozen.rounds.back().pruned) CHECK(x.site == 0);

  o.l0_freeze = false;
  const Pruned trained(o);
  int64_t changed = 0;
  const Parameters<float>& tuned = trained.checkpoint.model->params();
  for (int64_t i = 0; i < tuned.slab_size(); ++i) changed += tuned.values()[i] != original.model->params().values()[i];
  CHECK(changed > tuned.count() / 2);
  CHECK(trained.gates(2) == std::vector<float>{1, 1});
}

TEST_CASE("--only names kinds of attention, and a one-stack model has no kinds to pick", "[prune]") {
  CHECK(parse_attention_kinds({"cross", "enc"}) ==
        std::vector<AttentionKind>{AttentionKind::cross, AttentionKind::enc});
  CHECK_THROWS_WITH(parse_attention_kinds({"encoder"}),
                    "--only: 'encoder' is not a kind of attention (enc, dec or cross)");
  CHECK_THROWS_WITH(parse_attention_kinds({"dec", "dec"}), "--only: 'dec' is given twice");

  const test::TrainedRun run("prune_only_decoder", test::k_relation_config(1, 2, {1}, 30));
  OpenedCheckpoint decoder = open_checkpoint(run.checkpoint());
  auto optimizer = make_optimizer(decoder.config, decoder.model->params());
  PruneOptions o;
  o.only = {AttentionKind::dec};
  CHECK_THROWS_WITH(iterative_prune(*decoder.model, *optimizer, decoder.config, *decoder.dataset, o, 0),
                    "--only: a decoder model has one kind of attention; --only picks among an encoder_decoder's enc, "
                    "dec and cross heads");
}
