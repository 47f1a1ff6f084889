// The collectives, as however many ranks run this binary: one in the `dist` CTest entry, 2, 3
// and 4 under mpirun in dist_N_ranks. Every rank checks the result against what it computes
// alone from every rank's (reproducible) input.
#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "headlab/dist/dist.h"
#include "support/tree_sum.h"

using namespace headlab;
using test::canonical_tree_sum;
using test::order_sensitive_values;

TEST_CASE("sum_over_ranks gives every rank the canonical tree's bits", "[dist]") {
  const int ranks = dist::size();
  // Lengths below, at and above the rank count, odd and even (recursive halving splits unevenly).
  for (size_t n : {1, 3, 4, 7, 1000, 4099}) {
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < ranks; ++r) inputs.push_back(order_sensitive_values(static_cast<unsigned>(100 + r), n));
    std::vector<float> mine = inputs[static_cast<size_t>(dist::rank())];
    dist::sum_over_ranks(mine.data(), static_cast<int64_t>(n));
    const std::vector<float> expected = canonical_tree_sum(inputs);
    INFO(ranks << " ranks, n = " << n << ", rank " << dist::rank());
    CHECK(std::memcmp(mine.data(), expected.data(), n * sizeof(float)) == 0);
  }
}

TEST_CASE("all_gather, integer sums, any_rank and broadcast", "[dist]") {
  const int ranks = dist::size(), me = dist::rank();
  const double mine[2] = {me + 0.25, -me - 0.5};
  std::vector<double> all(2 * static_cast<size_t>(ranks));
  dist::all_gather(mine, 2, all.data());
  for (int r = 0; r < ranks; ++r) {
    CHECK(all[2 * static_cast<size_t>(r)] == r + 0.25);
    CHECK(all[2 * static_cast<size_t>(r) + 1] == -r - 0.5);
  }
  CHECK(dist::sum_over_ranks(int64_t{me + 1}) == int64_t{ranks} * (ranks + 1) / 2);
  CHECK(dist::any_rank(me == ranks - 1));
  CHECK_FALSE(dist::any_rank(false));
  CHECK(dist::broadcast(me == 0 ? "from rank 0" : "not this") == "from rank 0");
}

TEST_CASE("agree: an error on one rank is the same error on every rank, naming that rank", "[dist]") {
  const int ranks = dist::size(), failing = ranks - 1;
  auto body = [&] {
    if (dist::rank() == failing) throw Error("the data file is unreadable");
  };
  if (ranks == 1) {
    CHECK_THROWS_WITH(dist::together(body), "the data file is unreadable");
  } else {
    const std::string expected =
        "rank " + std::to_string(failing) + " of " + std::to_string(ranks) + ": the data file is unreadable";
    CHECK_THROWS_WITH(dist::together(body), expected);
    // A JobError from an inner agreement passes through unchanged.
    try {
      dist::together([&] { dist::together(body); });
      FAIL("no error");
    } catch (const dist::JobError& e) {
      CHECK(std::string(e.what()) == expected);
      CHECK(e.failed_rank == failing);
    }
  }
  CHECK_NOTHROW(dist::together([] {}));
}
