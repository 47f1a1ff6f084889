#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "headlab/train/gradient_sum.h"
#include "headlab/train/step.h"
#include "support/tree_sum.h"

using namespace headlab;
using test::canonical_tree_sum;
using test::order_sensitive_values;

namespace {

std::vector<std::vector<float>> micro_gradients(size_t count, size_t n) {
  std::vector<std::vector<float>> g;
  for (size_t i = 0; i < count; ++i) g.push_back(order_sensitive_values(static_cast<unsigned>(i + 1), n));
  return g;
}

std::vector<float> micro_batch_sum(const std::vector<std::vector<float>>& grads, MicroBatchSum& sum) {
  std::vector<float> out(grads[0].size());
  sum.begin(static_cast<int64_t>(out.size()));
  for (const std::vector<float>& g : grads) sum.add(g.data());
  sum.finish(out.data());
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("MicroBatchSum adds micro-batch gradients in the canonical tree, for any count", "[train]") {
  MicroBatchSum sum;  // reused: its buffers carry over between steps
  bool order_matters = false;
  for (size_t count = 1; count <= 13; ++count) {
    const auto grads = micro_gradients(count, 257);
    const std::vector<float> tree = micro_batch_sum(grads, sum);
    INFO(count << " micro-batches");
    CHECK(same_bits(tree, canonical_tree_sum(grads)));
    std::vector<float> in_order = grads[0];
    for (size_t i = 1; i < count; ++i)
      for (size_t e = 0; e < in_order.size(); ++e) in_order[e] += grads[i][e];
    order_matters = order_matters || !same_bits(tree, in_order);
  }
  CHECK(order_matters);  // the test data tells the orders apart, so the checks above have teeth
}

TEST_CASE("P ranks x 2^j micro-batches each sum to the bits of one process with all of them", "[train]") {
  // What a data-parallel step computes: each rank's MicroBatchSum over its aligned block, then the
  // canonical tree over the ranks' partials (dist::sum_over_ranks).
  MicroBatchSum sum;
  for (size_t ranks : {1, 2, 3, 4, 5, 8}) {
    for (size_t per_rank : {1, 2, 4}) {
      const auto grads = micro_gradients(ranks * per_rank, 101);
      std::vector<std::vector<float>> partials;
      for (size_t r = 0; r < ranks; ++r) {
        const MicroBatchRange mine =
            micro_batches_of_rank(static_cast<int64_t>(ranks * per_rank), static_cast<int>(r), static_cast<int>(ranks));
        partials.push_back(micro_batch_sum({grads.begin() + mine.begin, grads.begin() + mine.end}, sum));
      }
      INFO(ranks << " ranks x " << per_rank);
      CHECK(same_bits(canonical_tree_sum(partials), micro_batch_sum(grads, sum)));
    }
  }
}

TEST_CASE("micro-batches split over ranks only in aligned power-of-two blocks", "[train]") {
  const MicroBatchRange r = micro_batches_of_rank(8, 1, 4);
  CHECK(r.begin == 2);
  CHECK(r.end == 4);
  CHECK(micro_batches_of_rank(3, 0, 1).end == 3);  // one process: any count
  CHECK(micro_batches_of_rank(3, 2, 3).begin == 2);
  CHECK_THROWS_WITH(micro_batches_of_rank(1, 0, 2),
                    Catch::Matchers::Contains("train.grad_accum = 1 does not split over 2 ranks"));
  CHECK_THROWS_WITH(micro_batches_of_rank(6, 0, 2), Catch::Matchers::Contains("3 micro-batches per rank"));
}
