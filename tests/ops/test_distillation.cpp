// The distillation loss (ops/distillation.h): a hand-worked row, 0 when the student is the
// teacher, its gradient against central differences (student only; the teacher is data), ignored
// rows, and the temperature's tau^2 scaling.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "headlab/ops/distillation.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

TEST_CASE("distillation_loss gives the hand-worked KL, and 0 for a student equal to its teacher",
          "[ops][distillation]") {
  // One row, tau 1: student [0, 0] -> p_s = [1/2, 1/2]; teacher [log 3, 0] -> p_t = [3/4, 1/4].
  // KL(p_t || p_s) = 3/4 log(3/2) + 1/4 log(1/2) = 0.13081203594113694 (Python's math.log).
  Arena arena;
  Tape<double> tape(arena);
  double student[] = {0, 0}, teacher[] = {std::log(3.0), 0};
  const int32_t targets[] = {1};
  const Var<double> kl = distillation_loss(tape.constant(Tensor<double>(student, {1, 2})),
                                           tape.constant(Tensor<double>(teacher, {1, 2})), targets, -1, 1.0);
  CHECK(kl.value()(0) == Approx(0.13081203594113694).epsilon(1e-13));
  // At tau = 2 the logits halve; the loss is tau^2 times the KL of the softened rows.
  const Var<double> kl2 = distillation_loss(tape.constant(Tensor<double>(student, {1, 2})),
                                            tape.constant(Tensor<double>(teacher, {1, 2})), targets, -1, 2.0);
  const double pt = std::sqrt(3.0) / (std::sqrt(3.0) + 1);  // softmax([log 3 / 2, 0])[0]
  CHECK(kl2.value()(0) == Approx(4 * (pt * std::log(2 * pt) + (1 - pt) * std::log(2 * (1 - pt)))).epsilon(1e-13));
  const Var<double> same = distillation_loss(tape.constant(Tensor<double>(teacher, {1, 2})),
                                             tape.constant(Tensor<double>(teacher, {1, 2})), targets, -1, 1.5);
  CHECK(std::abs(same.value()(0)) < 1e-15);
}

TEST_CASE("distillation_loss's gradient matches central differences; ignored rows get none", "[ops][distillation]") {
  Arena arena;
  const double tau = GENERATE(1.0, 2.5);
  const Tensor<double> student = random_tensor<double>(arena, {2, 3, 5}, 7, -3.0, 3.0),
                       teacher = random_tensor<double>(arena, {2, 3, 5}, 8, -3.0, 3.0);
  const int32_t targets[] = {1, -1, 4, 0, 2, -1};
  test::GradCheckOptions options;
  options.differentiable = {true, false};
  auto r =
      gradcheck([&](Tape<double>&,
                    const std::vector<Var<double>>& in) { return distillation_loss(in[0], in[1], targets, -1, tau); },
                {student, teacher}, options);
  INFO("tau " << tau << ": " << r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
  // The ignored rows (1 and 5) get a zero gradient and change nothing.
  Tape<double> tape(arena);
  Var<double> x = tape.leaf_with_grad(student);
  tape.backward(distillation_loss(x, tape.constant(teacher), targets, -1, tau));
  for (const int64_t row : {1, 5})
    for (int64_t j = 0; j < 5; ++j) CHECK(x.grad().data()[row * 5 + j] == 0);
}

TEST_CASE("distillation_loss refuses a teacher of another shape and a temperature <= 0", "[ops][distillation]") {
  Arena arena;
  Tape<double> tape(arena);
  const Tensor<double> a = random_tensor<double>(arena, {2, 4}, 1), b = random_tensor<double>(arena, {2, 3}, 2);
  const int32_t targets[] = {0, 1};
  CHECK_THROWS_WITH(distillation_loss(tape.constant(a), tape.constant(b), targets, -1, 1.0),
                    Catch::Contains("must match the student's"));
  CHECK_THROWS_WITH(distillation_loss(tape.constant(a), tape.constant(a), targets, -1, 0.0),
                    Catch::Contains("must be positive"));
}
