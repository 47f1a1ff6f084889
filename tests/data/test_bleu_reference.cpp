// data/bleu.h against reference implementations run by /usr/bin/python3
// (tests/tools/bleu_reference.py): NLTK (python3-nltk, which CI installs) on 300 random sentence
// pairs from a fixed seed and on 113 subsets of them (the whole corpus, prefixes, single
// sentences, bootstrap resamples); and sacreBLEU itself where it can be imported (it is not in
// Debian 12; point PYTHONPATH at a copy to run that half). docs/translation.md says what is
// compared and why NLTK's chrF is not sacreBLEU's.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "headlab/data/bleu.h"
#include "support/scratch.h"
#include "support/skip.h"

using namespace headlab;

namespace {

// Words with ASCII punctuation that 13a splits, HTML entities, digits with '.', ',' and '-', and
// multi-byte UTF-8 (2, 3 and 4 bytes); the first ones are drawn far more often, so n-grams repeat.
const std::vector<std::string> kWords = {"the",
                                         "cat",
                                         "sat",
                                         "on",
                                         "a",
                                         "mat",
                                         "dog",
                                         "ran",
                                         "big",
                                         "red",
                                         "house",
                                         "niño",
                                         "café",
                                         "über",
                                         "日本",
                                         "語",
                                         "€5",
                                         "naïve",
                                         "—",
                                         "x-ray",
                                         "end.",
                                         "3.5",
                                         "1,000",
                                         "1990-2000",
                                         "U.S.",
                                         "a,b",
                                         "(word)",
                                         "don't",
                                         "Zürich",
                                         "😀",
                                         "&quot;hi&quot;",
                                         "&amp;",
                                         "<skipped>",
                                         "over.",
                                         "fox,",
                                         "[sic]"};
// Between words: mostly a space, sometimes other Unicode whitespace that str.split() splits on.
const std::vector<std::string> kSeparators = {" ", " ", " ", " ", " ", " ", "  ", "\u00a0", "\u3000", " \u2003"};

struct Corpus {
  std::vector<std::string> hypotheses, references;
  std::vector<std::vector<std::size_t>> subsets;
};

Corpus random_corpus(uint32_t seed, int n_pairs) {
  std::mt19937 rng(seed);
  const auto below = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  const auto word = [&] {
    const std::size_t skewed = std::min(below(kWords.size()), below(kWords.size()));
    return kWords[skewed];
  };
  const auto join = [&](const std::vector<std::string>& words) {
    std::string out;
    for (std::size_t i = 0; i < words.size(); ++i) out += (i ? kSeparators[below(kSeparators.size())] : "") + words[i];
    return out;
  };
  Corpus c;
  for (int i = 0; i < n_pairs; ++i) {
    std::vector<std::string> ref, hyp;
    const std::size_t length = 5 + below(16);
    for (std::size_t k = 0; k < length; ++k) ref.push_back(word());
    if (below(20) == 0) {  // an unrelated hypothesis
      for (std::size_t k = 0; k < 4 + below(8); ++k) hyp.push_back(word());
    } else {  // the reference with deletions, substitutions and insertions (hypotheses run short)
      for (const std::string& w : ref) {
        const std::size_t edit = below(100);
        if (edit < 12) continue;
        hyp.push_back(edit < 27 ? word() : w);
        if (edit >= 94) hyp.push_back(word());
      }
    }
    while (hyp.size() < 4) hyp.push_back(word());  // NLTK counts an n-gram-less sentence as 1 n-gram
    c.hypotheses.push_back(join(hyp));
    c.references.push_back(join(ref));
  }
  std::vector<std::size_t> all(n_pairs);
  for (int i = 0; i < n_pairs; ++i) all[i] = i;
  c.subsets.push_back(all);
  for (const int prefix : {1, 2, 3, 5, 10, 30, 100}) c.subsets.emplace_back(all.begin(), all.begin() + prefix);
  for (int i = 0; i < 100; ++i) c.subsets.push_back({static_cast<std::size_t>(i)});
  for (int draw = 0; draw < 5; ++draw) {  // bootstrap resamples: n_pairs draws with replacement
    std::vector<std::size_t> resample;
    for (int i = 0; i < n_pairs; ++i) resample.push_back(below(n_pairs));
    c.subsets.push_back(resample);
  }
  return c;
}

double relative_difference(double a, double b) {
  const double scale = std::max(std::abs(a), std::abs(b));
  return scale == 0 ? 0 : std::abs(a - b) / scale;
}

// NLTK's corpus_chrf from per-sentence statistics: per sentence and order the F-beta of that
// order (1e-16 where a side has no n-gram or nothing matches), averaged over orders and sentences.
double nltk_style_chrf(const std::vector<ChrfStats>& per_sentence, const std::vector<std::size_t>& subset, int beta) {
  const double factor = beta * beta;
  double total = 0;
  for (int n = 0; n < kChrfCharOrder; ++n) {
    double order_sum = 0;
    for (const std::size_t i : subset) {
      const ChrfStats& s = per_sentence[i];
      if (s.hyp[n] > 0 && s.ref[n] > 0 && s.match[n] > 0) {
        const double prec = static_cast<double>(s.match[n]) / static_cast<double>(s.hyp[n]);
        const double rec = static_cast<double>(s.match[n]) / static_cast<double>(s.ref[n]);
        order_sum += (1 + factor) * (prec * rec) / (factor * prec + rec);
      } else {
        order_sum += 1e-16;
      }
    }
    total += order_sum;
  }
  return total / kChrfCharOrder / static_cast<double>(subset.size());
}

}  // namespace

TEST_CASE("BLEU and chrF agree with NLTK (and sacreBLEU where importable) on 300 random pairs", "[data][bleu]") {
  test::ScratchDir dir("bleu_reference");
  const std::string python = "/usr/bin/python3";
  if (test::run_program(python, {"-c", "import nltk.translate.chrf_score"}, dir.dir / "probe.log").code != 0) {
    SKIP_FOR_MISSING_PACKAGE("python3-nltk is not installed (apt-get install python3-nltk): no BLEU reference");
    return;
  }
  const Corpus corpus = random_corpus(20240527, 300);
  std::ostringstream input;
  for (std::size_t i = 0; i < corpus.hypotheses.size(); ++i)
    input << "pair\t" << corpus.hypotheses[i] << "\t" << corpus.references[i] << "\n";
  for (const auto& subset : corpus.subsets) {
    input << "subset\t";
    for (const std::size_t i : subset) input << i << " ";
    input << "\n";
  }
  const auto in_path = dir.write("pairs.tsv", input.str());
  const auto out_path = dir.dir / "reference.txt";
  const auto result = test::run_program(
      python, {std::string(HEADLAB_SOURCE_DIR) + "/tests/tools/bleu_reference.py", in_path.string(), out_path.string()},
      dir.dir / "python.log");
  INFO(result.output);
  REQUIRE(result.code == 0);

  // BLEU on the same whitespace-split tokens as NLTK; chrF on the raw text.
  const auto bleu_none = bleu_sentence_stats(corpus.hypotheses, corpus.references, BleuTokenizer::none);
  const auto bleu_13a = bleu_sentence_stats(corpus.hypotheses, corpus.references, BleuTokenizer::v13a);
  const auto chrf = chrf_sentence_stats(corpus.hypotheses, corpus.references);

  std::map<std::string, double> worst;  // the largest relative difference per comparison
  std::map<std::string, int> compared;
  const auto compare = [&](const std::string& what, double ours, double theirs) {
    const double d = relative_difference(ours, theirs);
    worst[what] = std::max(worst[what], d);
    ++compared[what];
    INFO(what << ": headlab " << ours << " reference " << theirs);
    CHECK(d <= 1e-9);
  };
  std::ifstream lines(out_path);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "nltk_chrf_order") {
      std::size_t i = 0;
      int n = 0;
      int64_t tp = 0;
      double prec = 0, rec = 0;
      fields >> i >> n >> tp >> prec >> rec;
      const ChrfStats& s = chrf[i];
      CHECK(tp == s.match[n - 1]);
      const bool defined = s.hyp[n - 1] > 0 && s.ref[n - 1] > 0 && s.match[n - 1] > 0;
      compare("nltk chrF precision per order",
              defined ? static_cast<double>(s.match[n - 1]) / static_cast<double>(s.hyp[n - 1]) : 1e-16, prec);
      compare("nltk chrF recall per order",
              defined ? static_cast<double>(s.match[n - 1]) / static_cast<double>(s.ref[n - 1]) : 1e-16, rec);
      continue;
    }
    std::size_t s = 0;
    double value = 0;
    fields >> s >> value;
    const auto& subset = corpus.subsets.at(s);
    const BleuStats summed = sum_stats(bleu_none, subset);
    if (kind == "nltk_bleu") {
      compare("nltk BLEU (method3)", bleu_from_stats(summed).score, 100 * value);
    } else if (kind == "nltk_bleu_plain") {
      // Without smoothing NLTK and sacreBLEU differ only where some order has no match.
      if (std::all_of(summed.matches.begin(), summed.matches.end(), [](int64_t m) { return m > 0; }))
        compare("nltk BLEU (no smoothing)", bleu_from_stats(summed).score, 100 * value);
    } else if (kind == "nltk_chrf") {
      compare("nltk chrF (macro average, beta 2)", nltk_style_chrf(chrf, subset, 2), value);
    } else if (kind == "sacrebleu_bleu") {
      compare("sacreBLEU BLEU (13a)", bleu_from_stats(sum_stats(bleu_13a, subset)).score, value);
    } else if (kind == "sacrebleu_chrf") {
      compare("sacreBLEU chrF", chrf_from_stats(sum_stats(chrf, subset)).score, value);
    }
  }
  CHECK(compared["nltk BLEU (method3)"] == static_cast<int>(corpus.subsets.size()));
  CHECK(compared["nltk chrF (macro average, beta 2)"] == static_cast<int>(corpus.subsets.size()));
  CHECK(compared["nltk BLEU (no smoothing)"] >= 13);  // the whole corpus, its long prefixes, the resamples
  if (std::getenv("HEADLAB_BLEU_REPORT") != nullptr) {
    for (const auto& [what, d] : worst)
      std::printf("%-40s %4d compared, max relative difference %.3g\n", what.c_str(), compared[what], d);
  }
}
