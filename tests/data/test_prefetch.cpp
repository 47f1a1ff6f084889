#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "headlab/common/error.h"
#include "headlab/data/prefetch.h"
#include "headlab/data/tasks.h"

using namespace headlab;

namespace {

bool same_batch(const Batch& a, const Batch& b) {
  return a.tokens == b.tokens && a.targets == b.targets && a.labels == b.labels && a.key_padding == b.key_padding &&
         a.gold_head == b.gold_head && a.gold_antecedent == b.gold_antecedent && a.is_delimiter == b.is_delimiter;
}

// A dataset whose batch i is all i, and which fails at one index.
struct CountingDataset : Dataset {
  int64_t fail_at = -1;
  std::string name() const override { return "counting"; }
  int64_t vocab_size() const override { return 1 << 20; }
  int64_t seq_len() const override { return 4; }
  void fill_batch(Split, int64_t index, Batch& out) const override {
    HEADLAB_CHECK(index != fail_at, "counting: batch " << index << " is broken");
    for (int32_t& t : out.tokens) t = static_cast<int32_t>(index);
    for (int32_t& t : out.targets) t = static_cast<int32_t>(index);
  }
};

}  // namespace

TEST_CASE("prefetched batches equal inline ones, in order and after jumps", "[data][prefetch]") {
  TaskOptions o;
  o.task = "grammar";  // every optional field: gold heads, antecedents, delimiters
  o.seq_len = 32;
  auto dataset = make_task(o);
  BatchPrefetcher prefetcher(*dataset, Split::train, 8, /*background=*/true);
  Batch expected = dataset->make_batch(8);
  // Sequential (the background fill is used), a jump forward and back (a resume), sequential again.
  for (int64_t index : {0, 1, 2, 3, 9, 10, 4, 5, 6}) {
    dataset->fill_batch(Split::train, index, expected);
    INFO("batch " << index);
    CHECK(same_batch(prefetcher.get(index), expected));
  }
}

TEST_CASE("the next batch is filled while the caller works, and errors reach the caller", "[data][prefetch]") {
  CountingDataset dataset;
  BatchPrefetcher prefetcher(dataset, Split::train, 2, /*background=*/true);
  for (int64_t index = 0; index < 4; ++index) {
    CHECK(prefetcher.get(index).tokens[0] == index);
    // A "training step": far longer than filling this batch takes.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Batch 0 is filled on demand; 1..3 were filled in the background during the "steps".
  CHECK(prefetcher.stats().batches == 4);
  CHECK(prefetcher.stats().ready == 3);

  dataset.fail_at = 5;
  CHECK(prefetcher.get(4).tokens[0] == 4);  // starts filling 5 in the background, which throws
  REQUIRE_THROWS_WITH(prefetcher.get(5), Catch::Contains("counting: batch 5 is broken"));
  dataset.fail_at = -1;
  CHECK(prefetcher.get(6).tokens[0] == 6);  // usable again afterwards
}
