// The paired bootstrap over sentences (data/bleu_bootstrap.h): no difference between a system and
// itself, a clear one between a perfect and a poor system, a toss-up between two systems that
// each win half the sentences, determinism, and the one-line refusals.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "headlab/common/error.h"
#include "headlab/data/bleu_bootstrap.h"

using namespace headlab;

namespace {

std::vector<std::string> references() {
  std::vector<std::string> r;
  for (int i = 0; i < 40; ++i)
    r.push_back("and the lord spake unto moses in the wilderness of sinai on day " + std::to_string(i));
  return r;
}

}  // namespace

TEST_CASE("paired bootstrap: a system against itself differs by nothing, p = 1", "[data][bleu][bootstrap]") {
  const std::vector<std::string> refs = references();
  std::vector<std::string> hyps = refs;
  for (size_t i = 0; i < hyps.size(); i += 2) hyps[i] = "and the lord said to moses " + std::to_string(i);
  const std::vector<BleuStats> s = bleu_sentence_stats(hyps, refs);
  const PairedBootstrap b = paired_bootstrap_bleu(s, s, 200, 1);
  CHECK(b.delta == 0.0);
  CHECK(b.p_value == 1.0);
  CHECK(b.low == 0.0);
  CHECK(b.high == 0.0);
  CHECK(b.low99 == 0.0);
  CHECK(b.high99 == 0.0);
}

TEST_CASE("paired bootstrap: the references beat a poor system with the smallest p", "[data][bleu][bootstrap]") {
  const std::vector<std::string> refs = references();
  std::vector<std::string> poor;
  for (size_t i = 0; i < refs.size(); ++i) poor.push_back("the wilderness " + std::to_string(i));
  const std::vector<BleuStats> a = bleu_sentence_stats(poor, refs), b = bleu_sentence_stats(refs, refs);
  const PairedBootstrap r = paired_bootstrap_bleu(a, b, 999, 7);
  CHECK(r.delta == Approx(100.0 - corpus_bleu(poor, refs).score));
  CHECK(r.p_value == Approx(2.0 / 1000.0));  // B wins every resample: 2 (0 + 1) / (999 + 1)
  CHECK(r.low > 0);
  CHECK(r.high >= r.low);
  // Swapping the systems flips the delta and keeps p.
  const PairedBootstrap swapped = paired_bootstrap_bleu(b, a, 999, 7);
  CHECK(swapped.delta == Approx(-r.delta));
  CHECK(swapped.p_value == r.p_value);
}

TEST_CASE("paired bootstrap: two systems that each win half the sentences are not told apart",
          "[data][bleu][bootstrap]") {
  const std::vector<std::string> refs = references();
  std::vector<std::string> first = refs, second = refs;
  for (size_t i = 0; i < refs.size(); ++i) (i % 2 ? first : second)[i] = "moses " + std::to_string(i);
  const PairedBootstrap r =
      paired_bootstrap_bleu(bleu_sentence_stats(first, refs), bleu_sentence_stats(second, refs), 1000, 3);
  CHECK(std::abs(r.delta) < 1.0);
  CHECK(r.p_value > 0.2);
  CHECK(r.low < 0);
  CHECK(r.high > 0);
  // The 99% interval holds the 95% one and, over 1000 resamples of a spread-out delta, is wider.
  CHECK(r.low99 <= r.low);
  CHECK(r.high99 >= r.high);
  CHECK((r.low99 < r.low || r.high99 > r.high));
  // The same seed draws the same resamples; another seed other ones (the interval moves).
  const auto a = bleu_sentence_stats(first, refs), b = bleu_sentence_stats(second, refs);
  const PairedBootstrap again = paired_bootstrap_bleu(a, b, 1000, 3), other = paired_bootstrap_bleu(a, b, 1000, 4);
  CHECK(again.low == r.low);
  CHECK(again.high == r.high);
  CHECK(again.p_value == r.p_value);
  CHECK((other.low != r.low || other.high != r.high || other.p_value != r.p_value));
}

TEST_CASE("paired bootstrap refuses unpaired systems and zero samples in one line", "[data][bleu][bootstrap]") {
  const std::vector<BleuStats> two(2), three(3);
  CHECK_THROWS_WITH(paired_bootstrap_bleu(two, three, 10, 0), Catch::Contains("2 and 3 sentences"));
  CHECK_THROWS_WITH(paired_bootstrap_bleu({}, {}, 10, 0), Catch::Contains("at least one"));
  CHECK_THROWS_WITH(paired_bootstrap_bleu(two, two, 0, 0), Catch::Contains("samples must be at least 1"));
}
