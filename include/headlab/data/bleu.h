// Corpus BLEU and chrF as sacreBLEU 2.x computes them by default (docs/translation.md says which
// settings exactly): BLEU with the '13a' tokenizer, n-grams 1..4, clipped counts summed over the
// corpus, brevity penalty and 'exp' smoothing, case-sensitive; chrF with character n-grams 1..6,
// no word n-grams, beta 2, whitespace removed, statistics summed over the corpus before the F.
// Text is UTF-8 (chrF counts code points, whitespace is Python's str.split() set); text that is
// not valid UTF-8 throws headlab::Error. Everything is a pure function of its arguments.
// Per-sentence sufficient statistics add up (operator+=), so a score of any subset of sentences,
// a bootstrap resample among them, is the score of the summed statistics of that subset:
//   std::vector<BleuStats> s = bleu_sentence_stats(hyps, refs);
//   BleuScore all = bleu_from_stats(sum_stats(s)), some = bleu_from_stats(sum_stats(s, indices));
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace headlab {

inline constexpr int kBleuMaxOrder = 4;   // sacreBLEU's MAX_NGRAM_ORDER
inline constexpr int kChrfCharOrder = 6;  // sacreBLEU's CHRF.CHAR_ORDER
inline constexpr int kChrfBeta = 2;       // sacreBLEU's CHRF.BETA

// mteval-v13a's tokenization as sacreBLEU's Tokenizer13a does it: "<skipped>" and "-\n" removed,
// newlines made spaces, &quot; &amp; &lt; &gt; unescaped, then its four regex rules (most ASCII
// punctuation split off; '.' and ',' split off unless between digits; '-' after a digit split
// off), runs of whitespace made one space, none at either end.
std::string tokenize_13a(std::string_view line);

// Python's str.split(): the words between runs of Unicode whitespace (str.isspace()).
std::vector<std::string> split_words(std::string_view text);

enum class BleuTokenizer { v13a, none };  // none: the text is already tokenized (split on whitespace)

// One sentence's (or a sum of sentences') BLEU statistics: per order n = 1..4 the hypothesis
// n-grams (totals) and those matched by the reference, clipped to the reference's count
// (matches); the hypothesis length in tokens and the reference length (of the reference closest
// in length to the hypothesis, the shorter on a tie).
struct BleuStats {
  std::array<int64_t, kBleuMaxOrder> matches{};
  std::array<int64_t, kBleuMaxOrder> totals{};
  int64_t hyp_len = 0;
  int64_t ref_len = 0;
  BleuStats& operator+=(const BleuStats& other);
  bool operator==(const BleuStats& other) const = default;
};

struct BleuScore {
  double score = 0;                                // 0..100
  std::array<double, kBleuMaxOrder> precisions{};  // 0..100, smoothed as the score uses them
  double brevity_penalty = 0;
  int64_t sys_len = 0, ref_len = 0;
  std::array<int64_t, kBleuMaxOrder> counts{}, totals{};  // the summed matches and totals
};

// One hypothesis against one or more references (several: n-gram counts clipped to the largest
// count in any reference, as sacreBLEU does).
BleuStats bleu_sentence_stats(std::string_view hypothesis, const std::vector<std::string>& references,
                              BleuTokenizer tokenizer = BleuTokenizer::v13a);
// The same on tokens that are already split.
BleuStats bleu_token_stats(const std::vector<std::string>& hypothesis,
                           const std::vector<std::vector<std::string>>& references);
// Per sentence, one reference each (the two sizes must agree).
std::vector<BleuStats> bleu_sentence_stats(const std::vector<std::string>& hypotheses,
                                           const std::vector<std::string>& references,
                                           BleuTokenizer tokenizer = BleuTokenizer::v13a);

// sacreBLEU's compute_bleu with smooth_method 'exp': an order with no match gets precision
// 100 / (2^k * total) for its k-th such order; no unigram match at all scores 0.
BleuScore bleu_from_stats(const BleuStats& stats);

// Corpus BLEU of hypotheses against one reference each.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                      BleuTokenizer tokenizer = BleuTokenizer::v13a);

// One sentence's (or a sum of sentences') chrF statistics: per character order n = 1..6 the
// hypothesis n-grams, the reference n-grams and the matches (min of the two counts). As in
// sacreBLEU, a hypothesis's n-grams of an order count 0 when its reference has none of that order.
struct ChrfStats {
  std::array<int64_t, kChrfCharOrder> hyp{}, ref{}, match{};
  ChrfStats& operator+=(const ChrfStats& other);
  bool operator==(const ChrfStats& other) const = default;
};

struct ChrfScore {
  double score = 0;                  // 0..100
  double precision = 0, recall = 0;  // averaged over the orders with n-grams on both sides, 0..1
  int effective_order = 0;           // how many orders those are
};

// Several references: the statistics of the one with the best sentence chrF (the first on a tie).
ChrfStats chrf_sentence_stats(std::string_view hypothesis, const std::vector<std::string>& references);
std::vector<ChrfStats> chrf_sentence_stats(const std::vector<std::string>& hypotheses,
                                           const std::vector<std::string>& references);
ChrfScore chrf_from_stats(const ChrfStats& stats, int beta = kChrfBeta);
ChrfScore corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

// The sum of all per-sentence statistics, or of those at `indices` (repeats count again, as a
// bootstrap resample draws them).
BleuStats sum_stats(const std::vector<BleuStats>& per_sentence);
BleuStats sum_stats(const std::vector<BleuStats>& per_sentence, const std::vector<std::size_t>& indices);
ChrfStats sum_stats(const std::vector<ChrfStats>& per_sentence);
ChrfStats sum_stats(const std::vector<ChrfStats>& per_sentence, const std::vector<std::size_t>& indices);

}  // namespace headlab
