#include <catch2/catch.hpp>

#include <vector>

#include "headlab/ops/hard_concrete.h"
#include "headlab/prune/l0_gates.h"
#include "support/gradcheck.h"
#include "support/random.h"
#include "support/tiny_model.h"

using namespace headlab;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

namespace {

// The penalty and its gradient on fresh leaves of `log_alpha` (one tensor per gated site).
struct Penalty {
  double value = 0;
  std::vector<std::vector<double>> grad;  // per site, per head
};

Penalty penalty_of(const std::vector<Tensor<double>>& log_alpha, L0Penalty mode, double lambda) {
  Arena arena;
  Tape<double> tape(arena);
  std::vector<Var<double>> leaves;
  for (const Tensor<double>& t : log_alpha) leaves.push_back(tape.leaf_with_grad(t));
  const Var<double> p = l0_penalty(leaves, mode, lambda);
  tape.backward(p);
  Penalty out;
  out.value = p.value()(0);
  for (const Var<double>& leaf : leaves) {
    const Tensor<double>& g = leaf.grad();
    out.grad.emplace_back(g.data(), g.data() + g.numel());
  }
  return out;
}

// The sum of P(g != 0) over every head, written out from the definition.
double open_sum(const std::vector<Tensor<double>>& log_alpha) {
  double total = 0;
  for (const Tensor<double>& t : log_alpha)
    for (int64_t h = 0; h < t.numel(); ++h) total += 1 - hard_concrete_closed_probability(t(h));
  return total;
}

}  // namespace

TEST_CASE("the L0 penalty's gradient matches central differences in every aggregate", "[prune][l0][grad]") {
  const L0Penalty mode = GENERATE(L0Penalty::layer_mean, L0Penalty::mean, L0Penalty::sum);
  INFO(l0_penalty_name(mode));
  Arena arena;
  // Three sites of different widths, log_alpha spread over where P(g != 0) bends.
  const std::vector<Tensor<double>> log_alpha = {random_tensor<double>(arena, {3}, 1, -3, 3),
                                                 random_tensor<double>(arena, {5}, 2, -3, 3),
                                                 random_tensor<double>(arena, {2}, 3, -3, 3)};
  const auto r = gradcheck([&](Tape<double>&, const std::vector<Var<double>>& in) { return l0_penalty(in, mode, 0.7); },
                           log_alpha);
  INFO(r.str());
  CHECK(r.checked == 10);
  CHECK(r.max_rel_error <= 1e-6);
}

TEST_CASE("the L0 penalty's aggregates: sum, mean = sum / heads, layer_mean = sum / sites", "[prune][l0]") {
  Arena arena;
  const double lambda = 0.3;
  SECTION("powers of two: the divisions are exact, in value and gradient") {
    // 2 sites x 4 heads: mean divides by 8, layer_mean by 2 (Voita's: each site's sum, averaged).
    const std::vector<Tensor<double>> log_alpha = {random_tensor<double>(arena, {4}, 4, -3, 3),
                                                   random_tensor<double>(arena, {4}, 5, -3, 3)};
    const Penalty sum = penalty_of(log_alpha, L0Penalty::sum, lambda);
    const Penalty mean = penalty_of(log_alpha, L0Penalty::mean, lambda);
    const Penalty layer_mean = penalty_of(log_alpha, L0Penalty::layer_mean, lambda);
    CHECK(sum.value == Approx(lambda * open_sum(log_alpha)).epsilon(1e-14));
    CHECK(mean.value == sum.value / 8);
    CHECK(layer_mean.value == sum.value / 2);
    for (size_t l = 0; l < 2; ++l)
      for (size_t h = 0; h < 4; ++h) {
        CHECK(sum.grad[l][h] != 0);
        CHECK(mean.grad[l][h] == sum.grad[l][h] / 8);
        CHECK(layer_mean.grad[l][h] == sum.grad[l][h] / 2);
      }
  }
  SECTION("sites of 3 and 2 heads: mean over 5 heads, layer_mean over 2 sites") {
    const std::vector<Tensor<double>> log_alpha = {random_tensor<double>(arena, {3}, 6, -3, 3),
                                                   random_tensor<double>(arena, {2}, 7, -3, 3)};
    const double sum = penalty_of(log_alpha, L0Penalty::sum, lambda).value;
    CHECK(sum == Approx(lambda * open_sum(log_alpha)).epsilon(1e-14));
    CHECK(penalty_of(log_alpha, L0Penalty::mean, lambda).value == Approx(sum / 5).epsilon(1e-15));
    CHECK(penalty_of(log_alpha, L0Penalty::layer_mean, lambda).value == Approx(sum / 2).epsilon(1e-15));
  }
}

TEST_CASE("L0 gates on some sites only: the penalty and its gradient count the gated heads alone", "[prune][l0]") {
  // enc.L0 enc.L1 (2 heads each), then dec.L0 (4) cross.L0 (2) dec.L1 (4) cross.L1 (2): gates on
  // the cross sites only (--only cross), 4 heads in 2 sites.
  const ModelSpec spec = test::tiny_seq2seq_spec(4, 2, 2, 2);
  Model<float> model(spec);
  const std::vector<AttentionSite> sites = spec.attention_sites();
  REQUIRE(sites.size() == 6);
  const double lambda = 0.25;
  struct Result {
    float value = 0;
    std::vector<float> grad;  // every head's, site by site
    double expected = 0;      // lambda * the sum over the cross sites' heads, from the definition
  };
  auto run = [&](L0Penalty mode) {
    L0Options o;
    o.lambda = lambda;
    o.penalty = mode;
    for (const AttentionSite& s : sites) o.sites.push_back(s.kind == AttentionKind::cross);
    L0Gates l0(model, o);
    // A different log_alpha on every head, the ungated sites' too (which must not count).
    for (int l = 0; l < l0.log_alpha().size(); ++l) {
      Tensor<float> t = l0.log_alpha().value(l);
      for (int64_t h = 0; h < t.numel(); ++h) t(h) = static_cast<float>(-2.0 + 0.7 * l + 0.9 * static_cast<double>(h));
    }
    Arena arena;
    Tape<float> tape(arena);
    l0.sample(tape, 0, 0);
    const Var<float> p = l0.penalty(tape);
    tape.backward(p);
    Result r;
    r.value = p.value()(0);
    for (int l = 0; l < l0.log_alpha().size(); ++l) {
      const Tensor<float> g = l0.log_alpha().grad(l), a = l0.log_alpha().value(l);
      r.grad.insert(r.grad.end(), g.data(), g.data() + g.numel());
      if (sites[static_cast<size_t>(l)].kind != AttentionKind::cross) continue;
      for (int64_t h = 0; h < a.numel(); ++h)
        r.expected += lambda * (1 - hard_concrete_closed_probability(static_cast<double>(a(h))));
    }
    return r;
  };
  const Result sum = run(L0Penalty::sum), mean = run(L0Penalty::mean), layer_mean = run(L0Penalty::layer_mean);
  CHECK(sum.value == Approx(sum.expected).epsilon(1e-6));
  CHECK(mean.value == sum.value / 4);        // the 4 gated heads, not the model's 16
  CHECK(layer_mean.value == sum.value / 2);  // the 2 gated sites, not the model's 6
  REQUIRE(sum.grad.size() == 16);
  int64_t k = 0, gated = 0;
  for (const AttentionSite& s : sites)
    for (int64_t h = 0; h < spec.attention_shape(s).heads; ++h, ++k) {
      INFO(attention_kind_name(s.kind) << ".L" << s.layer << " head " << h);
      if (s.kind != AttentionKind::cross) {
        CHECK(sum.grad[k] == 0);
        continue;
      }
      ++gated;
      CHECK(sum.grad[k] > 0);  // P(g != 0) rises with log_alpha
      CHECK(mean.grad[k] == sum.grad[k] / 4);
      CHECK(layer_mean.grad[k] == sum.grad[k] / 2);
    }
  CHECK(gated == 4);
}

TEST_CASE("L0 penalty names parse back, and a wrong one is one line with the choices", "[prune][l0]") {
  for (L0Penalty p : {L0Penalty::layer_mean, L0Penalty::mean, L0Penalty::sum})
    CHECK(parse_l0_penalty(l0_penalty_name(p)) == p);
  CHECK_THROWS_WITH(parse_l0_penalty("average"), "unknown l0 penalty 'average' (expected layer_mean, mean or sum)");
  CHECK_THROWS_WITH(parse_l0_penalty("summ"), "unknown l0 penalty 'summ'; did you mean 'sum'?");
}
