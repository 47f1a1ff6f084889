// Activation and path patching (analysis/patching.h): patching the clean run into itself changes
// nothing, bit for bit, for every kind of patch; every head and the residual of a block patched at
// once give the clean metric; positions where the two inputs agree change nothing; a head switched
// off sends nothing down a path; and on the hand-built induction circuit the induction head's
// output carries the clean loss, and the previous-token head reaches it through its keys only.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include "headlab/analysis/patching.h"
#include "headlab/common/error.h"
#include "support/induction_circuit.h"
#include "support/tiny_model.h"

using namespace headlab;

TEST_CASE("patching the clean run into itself changes nothing, bit for bit", "[analysis][patching]") {
  const int64_t kv = GENERATE(2, 1);
  ModelSpec spec = test::tiny_spec(ModelKind::decoder, 11, 2, kv, 8);
  Model<float> model(spec);
  test::randomize(model, 4);
  PatchingInputs in = repeated_token_pairs(3, 4, 11, 2);
  in.corrupt = in.clean;
  const ActivationPatching p = activation_patching(model, in);
  REQUIRE(p.clean == p.corrupt);
  for (double v : p.head_out) CHECK(v == p.clean);
  for (const auto& site : p.qkv)
    for (double v : site) CHECK(v == p.clean);
  for (double v : p.resid) CHECK(v == p.clean);
  const PathPatching pp = path_patching(model, in);
  for (const auto& site : pp.scores)
    for (double v : site)
      if (!std::isnan(v)) CHECK(v == p.clean);
}

TEST_CASE("a block's residual and heads patched at once give the clean metric; equal positions change nothing",
          "[analysis][patching]") {
  ModelSpec spec = test::tiny_spec(ModelKind::decoder, 11, 2, 2, 8);
  Model<float> model(spec);
  test::randomize(model, 6);
  const PatchingInputs in = repeated_token_pairs(3, 4, 11, 5);
  const ActivationPatching p = activation_patching(model, in);
  REQUIRE(p.clean != p.corrupt);
  REQUIRE(p.all_patched.size() == 2u);
  for (double v : p.all_patched) CHECK(v == p.clean);
  // Block 0's input at positions 4..7 (the second copies, the same tokens in both) is the same.
  for (int64_t t = 4; t < 8; ++t) CHECK(p.resid[static_cast<size_t>(t)] == p.corrupt);
  for (int64_t t = 0; t < 4; ++t) CHECK(p.resid[static_cast<size_t>(t)] != p.corrupt);
  CHECK(p.forwards == 2 * (2 * 4 + 8) + 2);  // per layer: 2 heads x (out, q, k, v), 8 positions; all_patched
}

TEST_CASE("a switched-off head sends nothing down a path", "[analysis][patching]") {
  ModelSpec spec = test::tiny_spec(ModelKind::decoder, 11, 2, 2, 8);
  Model<float> model(spec);
  test::randomize(model, 7);
  model.gates().value(0).data()[1] = 0;  // L0H1 off
  const PathPatching pp = path_patching(model, repeated_token_pairs(3, 4, 11, 5));
  REQUIRE(pp.labels.size() == 4u);
  for (size_t r : {2u, 3u})
    for (int s = 0; s < kPatchSites; ++s) {
      CHECK(pp.score(static_cast<PatchSite>(s), 1, r) == pp.corrupt);
      CHECK(std::isnan(pp.score(static_cast<PatchSite>(s), r, 1)));
    }
}

TEST_CASE("the induction circuit: the induction head carries the loss; the previous-token head reaches it by its keys",
          "[analysis][patching]") {
  Model<double> model = test::induction_circuit_model(6, 12);
  const PatchingInputs in = repeated_token_pairs(16, 6, 6, 3);
  const ActivationPatching p = activation_patching(model, in);
  CHECK(p.clean < 0.5 * p.corrupt);                   // the circuit copies; the corrupted first copy leaves it guessing
  CHECK(p.restored(p.head_out[2]) > 0.9);             // L1H0's output carries the prediction
  CHECK(std::abs(p.restored(p.head_out[1])) < 1e-9);  // L0H1 writes nothing
  const PathPatching pp = path_patching(model, in);
  auto restored = [&](PatchSite s, size_t sender, size_t receiver) {
    return (pp.score(s, sender, receiver) - pp.corrupt) / (pp.clean - pp.corrupt);
  };
  // The corrupted run's first copy is other tokens: with the clean previous tokens in its keys
  // (the path through k) the induction head looks where the clean run looks, but reads the
  // corrupted tokens there, so the loss moves without coming back. Queries and values read the
  // token subspace, which the previous-token head does not write: nothing moves.
  CHECK(std::abs(restored(PatchSite::k, 0, 2)) > 0.1);
  CHECK(std::abs(restored(PatchSite::q, 0, 2)) < 1e-6);
  CHECK(std::abs(restored(PatchSite::v, 0, 2)) < 1e-6);
  CHECK(std::abs(restored(PatchSite::k, 1, 2)) < 1e-9);
}

TEST_CASE("patching refuses inputs that do not fit in one line", "[analysis][patching]") {
  const ModelSpec spec = test::tiny_spec(ModelKind::decoder, 11, 2, 2, 8);
  PatchingInputs in = repeated_token_pairs(2, 4, 11, 0);
  in.corrupt.pop_back();
  CHECK_THROWS_WITH(check_patching_inputs(spec, in), Catch::Contains("differ in length"));
  in = repeated_token_pairs(2, 4, 11, 0);
  in.answer = 3;
  in.wrong = 11;
  CHECK_THROWS_WITH(check_patching_inputs(spec, in), Catch::Contains("token 11 is outside the model's vocabulary"));
  CHECK_THROWS_WITH(check_patching_inputs(spec, repeated_token_pairs(2, 5, 11, 0)),
                    Catch::Contains("the model takes 1 to 8"));
  CHECK_THROWS_WITH(check_patching_inputs(test::tiny_spec(ModelKind::encoder, 11, 2, 2, 8), in),
                    Catch::Contains("model.kind = decoder"));
}
