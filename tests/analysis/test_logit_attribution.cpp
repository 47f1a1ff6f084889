// Direct logit attribution and the logit lens (analysis/logit_attribution.h) on a random double
// model: the terms add up to the model's own logit of the correct token at every target (to 1e-10,
// with biases, LayerNorm gains and gates all non-trivial, MHA and GQA), a switched-off head adds 0,
// the lens after the last block is the model's own output (its loss and logit), and a model
// without an LM head is refused. An encoder_decoder's decoder stream holds the self- and the
// cross-attention's heads: its terms add up too, a cross head switched off adds 0, and the
// encoder's heads have no term.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include "headlab/analysis/logit_attribution.h"
#include "headlab/data/model_input.h"
#include "support/tiny_model.h"
#include "support/tiny_translation.h"

using namespace headlab;

TEST_CASE("direct logit attributions add up to the logit; the last lens layer is the model's output",
          "[analysis][dla]") {
  const int64_t kv = GENERATE(2, 1);
  const ModelSpec spec = test::tiny_spec(ModelKind::decoder, 11, 2, kv, 8);
  Model<double> model(spec);
  test::randomize(model, 9);
  const std::unique_ptr<Dataset> data = test::tiny_task(ModelKind::decoder, 8);
  const LogitAttribution a = logit_attribution(model, *data, Split::val, 2, 4);
  REQUIRE(a.targets > 0);
  CHECK(a.max_sum_error < 1e-10);
  double sum = 0;
  for (const DlaComponent& c : a.components) sum += c.mean;
  CHECK(sum == Approx(a.mean_logit).epsilon(1e-12));
  // embed, 2 layers x (2 heads + attn bias + mlp), ln_f bias
  REQUIRE(a.components.size() == 1u + 2u * 4u + 1u);
  CHECK(a.components[1].label == "L0H0");
  CHECK(a.components[4].label == "L0 mlp");

  // The lens after both blocks applies the model's own final LayerNorm and head: its loss and logit.
  REQUIRE(a.lens.size() == 3u);
  CHECK(a.lens[2].mean_logit == Approx(a.mean_logit).epsilon(1e-12));
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  Batch batch = data->make_batch(4);
  double loss_sum = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < 2; ++i) {
    data->fill_batch(Split::val, i, batch);
    const ModelInput in = model_input(spec, batch);
    const ModelOutput<double> out = model.forward(tape, in, {});
    int64_t targets = 0;
    for (int64_t r = 0; r < in.batch_size * in.seq_len; ++r) targets += in.targets[r] >= 0;
    loss_sum += out.loss.value().data()[0] * static_cast<double>(targets);
    n += targets;
    tape.reset();
  }
  CHECK(a.lens[2].loss == Approx(loss_sum / static_cast<double>(n)).epsilon(1e-12));
  CHECK(a.lens[0].loss != Approx(a.lens[2].loss).epsilon(1e-3));  // earlier layers are other predictions

  // A head switched off writes nothing.
  model.gates().value(1).data()[1] = 0;
  const LogitAttribution off = logit_attribution(model, *data, Split::val, 2, 4);
  CHECK(off.components[6].label == "L1H1");
  CHECK(off.components[6].mean == 0);
  CHECK(off.max_sum_error < 1e-10);
}

TEST_CASE("an encoder_decoder's attributions: self and cross heads of each decoder layer, adding up to the logit",
          "[analysis][dla]") {
  const int64_t cross_kv = GENERATE(2, 1);  // MHA and MQA cross-attention
  test::ScratchDir scratch("dla_seq2seq");
  const TranslationDataset data(translation_options(test::tiny_translate_config(scratch.write_parallel_corpus(200))));
  Model<double> model(test::TinyTranslation::fitted(test::tiny_seq2seq_spec(2, 2, 2, cross_kv), data));
  test::randomize(model, 5);
  const LogitAttribution a = logit_attribution(model, data, Split::val, 2, 3);
  REQUIRE(a.targets > 0);
  CHECK(a.max_sum_error < 1e-10);
  // embed, 2 decoder layers x (2 self heads + self bias + 2 cross heads + cross bias + mlp), ln_f bias
  REQUIRE(a.components.size() == 1u + 2u * 7u + 1u);
  const std::vector<std::string> layer0 = {
      "dec.L0H0", "dec.L0H1", "dec.L0 attn bias", "cross.L0H0", "cross.L0H1", "cross.L0 attn bias", "L0 mlp"};
  for (size_t i = 0; i < layer0.size(); ++i) CHECK(a.components[1 + i].label == layer0[i]);
  CHECK(a.components[4].attention == "cross");
  for (const DlaComponent& c : a.components) CHECK(c.label.rfind("enc.", 0) == std::string::npos);
  REQUIRE(a.lens.size() == 3u);
  CHECK(a.lens[2].mean_logit == Approx(a.mean_logit).epsilon(1e-12));

  // Cross head 1 of layer 1 switched off (site: 2 encoder layers, then self and cross per layer).
  model.gates().value(model.spec().site_index({AttentionKind::cross, 1})).data()[1] = 0;
  const LogitAttribution off = logit_attribution(model, data, Split::val, 2, 3);
  CHECK(off.components[12].label == "cross.L1H1");
  CHECK(off.components[12].mean == 0);
  CHECK(off.max_sum_error < 1e-10);
}

TEST_CASE("logit attribution refuses a model without an LM head", "[analysis][dla]") {
  Model<double> encoder(test::tiny_spec(ModelKind::encoder, 16, 2, 2, 8));
  const std::unique_ptr<Dataset> data = test::tiny_task(ModelKind::encoder, 8);
  CHECK_THROWS_WITH(logit_attribution(encoder, *data, Split::val, 1, 4), Catch::Contains("model.kind = decoder"));
}
