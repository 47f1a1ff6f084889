#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "headlab/common/parallel.h"
#include "headlab/ops/cross_entropy.h"
#include "support/gradcheck.h"
#include "support/random.h"

using namespace headlab;
using headlab::test::convert;
using headlab::test::gradcheck;
using headlab::test::random_tensor;

namespace {

constexpr int32_t kIgnore = -100;

// loss and dlogits (dloss = 1), copied out of the tape.
template <typename T>
struct CrossEntropyRun {
  T loss;
  std::vector<T> dlogits;
};

template <typename T>
CrossEntropyRun<T> run_cross_entropy(const Tensor<T>& logits, const int32_t* targets) {
  Arena arena;
  Tape<T> tape(arena);
  Var<T> x = tape.leaf_with_grad(logits);
  Var<T> loss = cross_entropy(x, targets, kIgnore);
  tape.backward(loss);
  return {loss.value().data()[0], std::vector<T>(x.grad().data(), x.grad().data() + x.grad().numel())};
}

}  // namespace

TEST_CASE("cross_entropy forward gives the hand-worked loss of two rows", "[ops][cross_entropy]") {
  // Row [1, 2, 3], target 2: log(e + e^2 + e^3) - 3 = log(1 + e^-1 + e^-2) = 0.4076059644443804.
  // Row [1, 1, 1], target 1: log 3 = 1.0986122886681098. Mean 0.7531091265562451.
  // (Both by hand from the definition, digits from Python's math.log.)
  // The second row's argmax is its first maximum, 0, so only the first row is "correct".
  Arena arena;
  Tape<double> tape(arena);
  double logits[] = {1, 2, 3, 1, 1, 1};
  const int32_t targets[] = {2, 1};
  Var<double> loss = cross_entropy(tape.constant(Tensor<double>(logits, {2, 3})), targets, kIgnore);
  REQUIRE(loss.shape() == Shape({1}));
  CHECK(loss.value().data()[0] == Approx(0.7531091265562451).epsilon(1e-14));
  const CrossEntropyStats stats = cross_entropy_stats(Tensor<double>(logits, {2, 3}), targets, kIgnore);
  CHECK(stats.loss_sum == Approx(0.4076059644443804 + 1.0986122886681098).epsilon(1e-14));
  CHECK(stats.n_valid == 2);
  CHECK(stats.n_correct == 1);
  CHECK(stats.mean_loss() == loss.value().data()[0]);
}

TEST_CASE("cross_entropy stays finite for huge logits", "[ops][cross_entropy]") {
  // Shifting a row by a constant leaves log-softmax unchanged, while exp(1002) alone would
  // overflow float. The loss is lse - x[t] with both near 1002, so it can only be as exact as
  // the spacing of numbers there: about 6e-5 in float, 1e-13 in double.
  Arena arena;
  const int32_t targets[] = {2};
  auto loss_of = [&](auto scalar, double shift) {
    using T = decltype(scalar);
    Tape<T> tape(arena);
    T* logits = arena.empty<T>({1, 3}).data();
    for (int j = 0; j < 3; ++j) logits[j] = static_cast<T>(shift + j);
    return cross_entropy(tape.constant(Tensor<T>(logits, {1, 3})), targets, kIgnore).value().data()[0];
  };
  const float big_float = loss_of(0.0f, 1000);
  CHECK(std::isfinite(big_float));
  CHECK(big_float == Approx(0.4076059644443804).margin(2e-4));
  CHECK(loss_of(0.0, 1000) == Approx(0.4076059644443804).margin(1e-12));
}

TEST_CASE("cross_entropy backward matches central differences, with an ignored row", "[ops][cross_entropy][grad]") {
  Arena arena;
  const int32_t targets[] = {3, kIgnore, 0, 5, 1, 2};
  SECTION("[N, V] logits") {
    auto logits = random_tensor<double>(arena, {4, 6}, 1, -3.0, 3.0);
    auto r = gradcheck(
        [&](Tape<double>&, const std::vector<Var<double>>& in) { return cross_entropy(in[0], targets, kIgnore); },
        {logits});
    INFO(r.str());
    REQUIRE(r.max_rel_error <= 1e-6);
  }
  SECTION("[B, T, V] logits, one row") {
    const Shape shape = GENERATE(Shape{2, 3, 6}, Shape{1, 1, 6});
    auto logits = random_tensor<double>(arena, shape, 2, -3.0, 3.0);
    auto r = gradcheck(
        [&](Tape<double>&, const std::vector<Var<double>>& in) { return cross_entropy(in[0], targets, kIgnore); },
        {logits});
    INFO(shape.str() << ": " << r.str());
    REQUIRE(r.max_rel_error <= 1e-6);
  }
}

TEST_CASE("cross_entropy gives (softmax - onehot) / n_valid, and zero on ignored rows", "[ops][cross_entropy][grad]") {
  // Row [0, 0], target 1: softmax [1/2, 1/2], so dlogits = ([1/2, 1/2] - [0, 1]) / 2 valid rows.
  Arena arena;
  double logits[] = {0, 0, 5, -5, 0, 0};
  const int32_t targets[] = {1, kIgnore, 0};
  const auto run = run_cross_entropy(Tensor<double>(logits, {3, 2}), targets);
  CHECK(run.loss == Approx(std::log(2.0)));
  CHECK(run.dlogits[0] == Approx(0.25));
  CHECK(run.dlogits[1] == Approx(-0.25));
  CHECK(run.dlogits[2] == 0);
  CHECK(run.dlogits[3] == 0);
  CHECK(run.dlogits[4] == Approx(-0.25));
  CHECK(run.dlogits[5] == Approx(0.25));
}

TEST_CASE("cross_entropy with every target ignored is 0 with a zero gradient", "[ops][cross_entropy]") {
  Arena arena;
  auto logits = random_tensor<double>(arena, {3, 4}, 5);
  const int32_t targets[] = {kIgnore, kIgnore, kIgnore};
  const auto run = run_cross_entropy(logits, targets);
  CHECK(run.loss == 0);
  CHECK(std::all_of(run.dlogits.begin(), run.dlogits.end(), [](double g) { return g == 0; }));
  const CrossEntropyStats stats = cross_entropy_stats(logits, targets, kIgnore);
  CHECK(stats.n_valid == 0);
  CHECK(stats.mean_loss() == 0);
}

TEST_CASE("cross_entropy in float agrees with double", "[ops][cross_entropy]") {
  Arena arena;
  auto logits = random_tensor<double>(arena, {32, 50}, 6, -4.0, 4.0);
  std::vector<int32_t> targets(32);
  for (int r = 0; r < 32; ++r) targets[r] = r % 7 == 3 ? kIgnore : (r * 13) % 50;
  const auto ref = run_cross_entropy(logits, targets.data());
  const auto got = run_cross_entropy(convert<float>(arena, logits), targets.data());
  CHECK(std::abs(got.loss - ref.loss) <= 1e-5 * std::max(1.0, ref.loss));
  double worst = 0;
  for (size_t i = 0; i < ref.dlogits.size(); ++i) worst = std::max(worst, std::abs(got.dlogits[i] - ref.dlogits[i]));
  CHECK(worst <= 1e-5);
}

TEST_CASE("cross_entropy_stats counts argmax hits and sums the op's per-row losses", "[ops][cross_entropy]") {
  Arena arena;
  const int64_t N = 200, V = 10;
  auto logits = random_tensor<double>(arena, {N, V}, 7, -2.0, 2.0);
  std::vector<int32_t> targets(N);
  int64_t expected_correct = 0, expected_valid = 0;
  for (int64_t r = 0; r < N; ++r) {
    targets[r] = r % 11 == 0 ? kIgnore : static_cast<int32_t>((r * 3) % V);
    if (targets[r] == kIgnore) continue;
    const double* row = logits.data() + r * V;
    expected_correct += std::max_element(row, row + V) - row == targets[r];
    ++expected_valid;
  }
  const CrossEntropyStats stats = cross_entropy_stats(logits, targets.data(), kIgnore);
  CHECK(stats.n_valid == expected_valid);
  CHECK(stats.n_correct == expected_correct);
  CHECK(stats.mean_loss() == run_cross_entropy(logits, targets.data()).loss);  // one kernel, one order
}

TEST_CASE("cross_entropy loss and gradient are bit-identical for any thread count", "[ops][cross_entropy]") {
  Arena arena;
  const int64_t N = 512, V = 100;
  auto logits = random_tensor<float>(arena, {N, V}, 8, -3.0, 3.0);
  std::vector<int32_t> targets(N);
  for (int64_t r = 0; r < N; ++r) targets[r] = static_cast<int32_t>((r * 37) % V);
  const int previous = num_threads();
  set_num_threads(1);
  const auto one = run_cross_entropy(logits, targets.data());
  set_num_threads(3);
  const auto three = run_cross_entropy(logits, targets.data());
  set_num_threads(previous);
  CHECK(one.loss == three.loss);
  CHECK(one.dlogits == three.dlogits);
}

TEST_CASE("cross_entropy rejects a target outside the vocabulary", "[ops][cross_entropy]") {
  Arena arena;
  Tape<double> tape(arena);
  auto logits = tape.constant(random_tensor<double>(arena, {2, 4}, 9));
  const int32_t targets[] = {1, 4};
  REQUIRE_THROWS_WITH(cross_entropy(logits, targets, kIgnore),
                      Catch::Contains("cross_entropy: target=4 at row 1 is outside [0, V=4)"));
  REQUIRE_THROWS_WITH(cross_entropy_stats(logits.value(), targets, kIgnore),
                      Catch::Contains("cross_entropy_stats: target=4 at row 1"));
}

TEST_CASE("cross_entropy with label smoothing gives the hand-worked loss and gradient", "[ops][cross_entropy]") {
  // Row [1, 2, 3], target 2, eps = 0.3, V = 3: q = (0.1, 0.1, 0.8), lse = 3.4076059644443804.
  // loss = lse - 0.7 * 3 - 0.1 * (1 + 2 + 3) = 0.7076059644443804; d/dx = softmax - q with
  // softmax = (0.09003057317038046, 0.24472847105479767, 0.6652409557748219) (math.exp).
  Arena arena;
  Tape<double> tape(arena);
  double logits[] = {1, 2, 3};
  const int32_t targets[] = {2};
  Var<double> x = tape.leaf_with_grad(Tensor<double>(logits, {1, 3}));
  Var<double> loss = cross_entropy(x, targets, kIgnore, 0.3);
  CHECK(loss.value().data()[0] == Approx(0.7076059644443804).epsilon(1e-14));
  tape.backward(loss);
  CHECK(x.grad().data()[0] == Approx(0.09003057317038046 - 0.1).epsilon(1e-12));
  CHECK(x.grad().data()[1] == Approx(0.24472847105479767 - 0.1).epsilon(1e-12));
  CHECK(x.grad().data()[2] == Approx(0.6652409557748219 - 0.8).epsilon(1e-12));
  // Evaluation statistics stay the NLL of the target.
  CHECK(cross_entropy_stats(Tensor<double>(logits, {1, 3}), targets, kIgnore).loss_sum ==
        Approx(0.4076059644443804).epsilon(1e-14));
}

TEST_CASE("cross_entropy with label smoothing matches central differences", "[ops][cross_entropy][grad]") {
  Arena arena;
  const int32_t targets[] = {3, kIgnore, 0, 5};
  auto logits = random_tensor<double>(arena, {4, 6}, 7, -3.0, 3.0);
  const double eps = GENERATE(0.1, 0.9);
  auto r = gradcheck(
      [&](Tape<double>&, const std::vector<Var<double>>& in) { return cross_entropy(in[0], targets, kIgnore, eps); },
      {logits});
  INFO("eps " << eps << ": " << r.str());
  REQUIRE(r.max_rel_error <= 1e-6);
}

TEST_CASE("cross_entropy refuses a label smoothing outside [0, 1)", "[ops][cross_entropy]") {
  Arena arena;
  Tape<double> tape(arena);
  double logits[] = {1, 2};
  const int32_t targets[] = {0};
  CHECK_THROWS_WITH(cross_entropy(tape.constant(Tensor<double>(logits, {1, 2})), targets, kIgnore, 1.0),
                    Catch::Contains("label_smoothing=1 is outside [0, 1)"));
}
