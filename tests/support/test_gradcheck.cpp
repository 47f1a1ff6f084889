// The gradient checker checked: every op's gradient test trusts it, so it must fail on the
// backwards it exists to catch. The op under test is y = a * b + a (elementwise), whose backward
// is da = dy * (b + 1), db = dy * a; each broken copy below gets one thing wrong.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "headlab/ops/elementwise.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

namespace {

enum class Backward : int64_t { correct, writes_nan, writes_inf, wrong_sign, missing_term, writes_nothing };

void product_plus_a_backward(Tape<double>& tape, const Node<double>& node) {
  const auto kind = static_cast<Backward>(node.ints[0]);
  const double* a = tape.node(node.inputs[0]).value.data();
  const double* b = tape.node(node.inputs[1]).value.data();
  const double* g = node.grad.data();
  const int64_t n = node.value.numel();
  if (kind == Backward::writes_nothing) return;  // leaves the gradients as the arena had them (NaN)
  const Tensor<double> da = tape.input_grad(node, 0), db = tape.input_grad(node, 1);
  for (int64_t i = 0; i < n; ++i) {
    double d_a = g[i] * (b[i] + 1);
    if (kind == Backward::wrong_sign) d_a = -d_a;
    if (kind == Backward::missing_term) d_a = g[i] * b[i];  // forgets y's "+ a"
    if (kind == Backward::writes_nan && i == n / 2) d_a = std::numeric_limits<double>::quiet_NaN();
    if (kind == Backward::writes_inf && i == n / 2) d_a = std::numeric_limits<double>::infinity();
    da.data()[i] += d_a;
    db.data()[i] += g[i] * a[i];
  }
}

Var<double> product_plus_a(Var<double> a, Var<double> b, Backward kind) {
  Tensor<double> out = a.tape->arena().empty<double>(a.shape());
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data()[i] = a.value().data()[i] * b.value().data()[i] + a.value().data()[i];
  a.tape->record(out, product_plus_a_backward, {a, b}).ints[0] = static_cast<int64_t>(kind);
  return a.tape->last();
}

test::GradCheckResult check(Backward kind) {
  Arena arena;
  const auto a = random_tensor<double>(arena, {3, 5}, 1), b = random_tensor<double>(arena, {3, 5}, 2);
  return gradcheck(
      [kind](Tape<double>&, const std::vector<Var<double>>& in) { return product_plus_a(in[0], in[1], kind); }, {a, b});
}

}  // namespace

TEST_CASE("gradcheck passes a correct backward", "[autograd][gradcheck]") {
  const auto r = check(Backward::correct);
  INFO(r.str());
  CHECK(r.checked == 30);
  CHECK(r.max_rel_error <= 1e-8);
}

TEST_CASE("gradcheck fails a backward that writes NaN or infinity into one element", "[autograd][gradcheck]") {
  for (Backward kind : {Backward::writes_nan, Backward::writes_inf}) {
    const auto r = check(kind);
    INFO(r.str());
    CHECK(std::isinf(r.max_rel_error));
    CHECK(r.worst_input == 0);
    CHECK(r.worst_index == 7);  // the element the backward broke, n / 2 of 15
  }
}

TEST_CASE("gradcheck fails a backward with a wrong sign or a missing term", "[autograd][gradcheck]") {
  const auto sign = check(Backward::wrong_sign);
  INFO(sign.str());
  CHECK(sign.max_rel_error > 1.0);  // |a - (-a)| / |a| = 2 on every element
  CHECK(sign.worst_input == 0);
  const auto missing = check(Backward::missing_term);
  INFO(missing.str());
  CHECK(missing.max_rel_error > 0.1);  // off by dy, where the gradient is dy * (b + 1) with |b| <= 1
  CHECK(missing.worst_input == 0);
}

TEST_CASE("gradcheck fails a backward that leaves its gradients unwritten", "[autograd][gradcheck]") {
  // No gradient flows to the inputs at all: the checker compares the numeric gradient with 0.
  const auto r = check(Backward::writes_nothing);
  INFO(r.str());
  CHECK(r.max_rel_error > 0.5);
}

TEST_CASE("gradcheck that checks no element fails", "[autograd][gradcheck]") {
  Arena arena;
  // No input needs a gradient: the backward itself refuses.
  test::GradCheckOptions constant_only;
  constant_only.differentiable = {false};
  const auto identity = [](Tape<double>&, const std::vector<Var<double>>& in) { return in[0]; };
  CHECK_THROWS_WITH(gradcheck(identity, {random_tensor<double>(arena, {4}, 1)}, constant_only),
                    Catch::Contains("does not depend on anything that needs a gradient"));
  // An input with no elements: nothing compared, which must not read as a pass.
  const auto r = gradcheck([](Tape<double>&, const std::vector<Var<double>>& in) { return sum(in[0]); },
                           {random_tensor<double>(arena, {0}, 1)});
  INFO(r.str());
  CHECK(r.checked == 0);
  CHECK(std::isinf(r.max_rel_error));
}
