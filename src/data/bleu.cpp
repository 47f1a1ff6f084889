// Corpus BLEU and chrF, sacreBLEU's defaults (include/headlab/data/bleu.h). Every step follows
// sacreBLEU 2.x's order of operations (tokenizer_13a.py, tokenizer_re.py, metrics/bleu.py,
// metrics/chrf.py, metrics/helpers.py), floating-point order included, so that scores agree to
// the last bits rather than to a tolerance.
#include "headlab/data/bleu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "headlab/common/error.h"

namespace headlab {
namespace {

// ---------------------------------------------------------------- UTF-8 and Python's whitespace

// The code points for which Python's str.isspace() is true: what str.split() and re's \s split on.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// The code point starting at text[pos]; pos moves past it. Strict UTF-8 (no overlong forms, no
// surrogates, nothing above U+10FFFF), since Python would not have decoded such text either.
char32_t next_code_point(std::string_view text, std::size_t& pos) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) {
    ++pos;
    return lead;
  }
  std::size_t length = 0;
  char32_t value = 0, smallest = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, value = lead & 0x1F, smallest = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, value = lead & 0x0F, smallest = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, value = lead & 0x07, smallest = 0x10000;
  }
  bool ok = length > 0 && pos + length <= text.size();
  for (std::size_t k = 1; ok && k < length; ++k) {
    ok = (byte(pos + k) & 0xC0) == 0x80;
    value = (value << 6) | (byte(pos + k) & 0x3F);
  }
  ok = ok && value >= smallest && value <= 0x10FFFF && !(value >= 0xD800 && value <= 0xDFFF);
  if (!ok) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", lead);
    throw Error(
        concat("bleu/chrf: text is not valid UTF-8: bad sequence starting with byte ", hex, " at offset ", pos));
  }
  pos += length;
  return value;
}

// Python's str.rstrip(): the text without its trailing whitespace.
std::string_view rstrip(std::string_view text) {
  std::size_t pos = 0, end = 0;
  while (pos < text.size()) {
    if (!is_python_space(next_code_point(text, pos))) end = pos;
  }
  return text.substr(0, end);
}

// Python's str.replace(from, to): every non-overlapping occurrence, left to right.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t at = text.find(from); at != std::string_view::npos; at = text.find(from, start)) {
    out.append(text.substr(start, at - start)).append(to);
    start = at + from.size();
  }
  return out.append(text.substr(start));
}

// ---------------------------------------------------------------- 13a's character classes

// tokenizer_re.py's first rule, [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation except ' - . ,
// (and the space, which splitting removes again).
bool is_13a_punctuation(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') || (c >= '(' && c <= '+') ||
         (c >= ':' && c <= '@') || c == '/';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_period_or_comma(char c) {
  return c == '.' || c == ',';
}

// The regex rules work on bytes here, on code points in Python. The results are the same: every
// rule's pattern names ASCII characters only, so a match never starts or ends inside a multi-byte
// character except where the negated class [^0-9] takes one byte of it, and the other bytes of that
// character are never '.', ',' or '-', so no later match can differ.

// ---------------------------------------------------------------- n-gram counting

// An n-gram as a string of token ids (BLEU) or of code points (chrF), counted.
using NgramCounts = std::unordered_map<std::u32string, int64_t>;

void count_ngrams(const std::u32string& sequence, std::size_t n, NgramCounts& counts) {
  for (std::size_t i = 0; i + n <= sequence.size(); ++i) ++counts[sequence.substr(i, n)];
}

template <class Stats>
Stats sum_indexed(const std::vector<Stats>& per_sentence, const std::vector<std::size_t>& indices) {
  Stats total;
  for (const std::size_t i : indices) {
    HEADLAB_CHECK(i < per_sentence.size(),
                  "bleu/chrf sum_stats: index " << i << " is past the " << per_sentence.size() << " sentences");
    total += per_sentence[i];
  }
  return total;
}

void check_same_size(const char* metric, std::size_t hypotheses, std::size_t references) {
  HEADLAB_CHECK(hypotheses == references,
                metric << ": " << hypotheses << " hypotheses but " << references << " references (one per hypothesis)");
}

// Code points of the text with its whitespace removed (chrF's ''.join(line.split())).
std::u32string chrf_characters(std::string_view text) {
  std::u32string out;
  for (std::size_t pos = 0; pos < text.size();) {
    const char32_t c = next_code_point(text, pos);
    if (!is_python_space(c)) out.push_back(c);
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------- tokenizer

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  std::size_t pos = 0, start = std::string_view::npos;
  while (pos < text.size()) {
    const std::size_t here = pos;
    if (is_python_space(next_code_point(text, pos))) {
      if (start != std::string_view::npos) words.emplace_back(text.substr(start, here - start));
      start = std::string_view::npos;
    } else if (start == std::string_view::npos) {
      start = here;
    }
  }
  if (start != std::string_view::npos) words.emplace_back(text.substr(start));
  return words;
}

std::string tokenize_13a(std::string_view text) {
  // tokenizer_13a.py: the language-independent part.
  std::string line = replace_all(text, "<skipped>", "");
  line = replace_all(line, "-\n", "");
  line = replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    line = replace_all(line, "&quot;", "\"");
    line = replace_all(line, "&amp;", "&");
    line = replace_all(line, "&lt;", "<");
    line = replace_all(line, "&gt;", ">");
  }
  const std::string padded = " " + line + " ";

  // tokenizer_re.py's four rules, each one re.sub pass (left to right, matches not overlapping).
  std::string punct;  // ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 '
  for (const char c : padded) {
    if (is_13a_punctuation(c)) {
      punct.append({' ', c, ' '});
    } else {
      punct.push_back(c);
    }
  }
  std::string before;  // ([^0-9])([\.,]) -> '\1 \2 ': period and comma unless preceded by a digit
  for (std::size_t i = 0; i < punct.size();) {
    if (i + 1 < punct.size() && !is_digit(punct[i]) && is_period_or_comma(punct[i + 1])) {
      before.append({punct[i], ' ', punct[i + 1], ' '});
      i += 2;
    } else {
      before.push_back(punct[i++]);
    }
  }
  std::string after;  // ([\.,])([^0-9]) -> ' \1 \2': period and comma unless followed by a digit
  for (std::size_t i = 0; i < before.size();) {
    if (i + 1 < before.size() && is_period_or_comma(before[i]) && !is_digit(before[i + 1])) {
      after.append({' ', before[i], ' ', before[i + 1]});
      i += 2;
    } else {
      after.push_back(before[i++]);
    }
  }
  std::string dash;  // ([0-9])(-) -> '\1 \2 ': a dash after a digit
  for (std::size_t i = 0; i < after.size();) {
    if (i + 1 < after.size() && is_digit(after[i]) && after[i + 1] == '-') {
      dash.append({after[i], ' ', '-', ' '});
      i += 2;
    } else {
      dash.push_back(after[i++]);
    }
  }

  // ' '.join(line.split())
  std::string out;
  for (const std::string& word : split_words(dash)) {
    if (!out.empty()) out.push_back(' ');
    out += word;
  }
  return out;
}

// ---------------------------------------------------------------- BLEU

BleuStats& BleuStats::operator+=(const BleuStats& other) {
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    matches[n] += other.matches[n];
    totals[n] += other.totals[n];
  }
  hyp_len += other.hyp_len;
  ref_len += other.ref_len;
  return *this;
}

BleuStats bleu_token_stats(const std::vector<std::string>& hypothesis,
                           const std::vector<std::vector<std::string>>& references) {
  HEADLAB_CHECK(!references.empty(), "bleu: a hypothesis needs at least one reference, got none");
  // Tokens as ids, so that an n-gram is a short string of ids.
  std::unordered_map<std::string, char32_t> ids;
  const auto encode = [&](const std::vector<std::string>& tokens) {
    std::u32string out;
    for (const std::string& token : tokens)
      out.push_back(ids.emplace(token, static_cast<char32_t>(ids.size())).first->second);
    return out;
  };

  // metrics/bleu.py _extract_reference_info: a reference n-gram's count is its largest in any one
  // reference; the reference length is the one closest to the hypothesis's, the shorter on a tie.
  BleuStats stats;
  stats.hyp_len = static_cast<int64_t>(hypothesis.size());
  NgramCounts reference_counts;
  int64_t closest_diff = -1;
  for (const std::vector<std::string>& reference : references) {
    const std::u32string ref = encode(reference);
    NgramCounts counts;
    for (std::size_t n = 1; n <= kBleuMaxOrder; ++n) count_ngrams(ref, n, counts);
    for (const auto& [ngram, count] : counts) {
      int64_t& kept = reference_counts[ngram];
      kept = std::max(kept, count);
    }
    const int64_t length = static_cast<int64_t>(ref.size());
    const int64_t diff = std::abs(stats.hyp_len - length);
    if (closest_diff == -1 || diff < closest_diff || (diff == closest_diff && length < stats.ref_len)) {
      closest_diff = diff;
      stats.ref_len = length;
    }
  }

  const std::u32string hyp = encode(hypothesis);
  NgramCounts hypothesis_counts;
  for (std::size_t n = 1; n <= kBleuMaxOrder; ++n) count_ngrams(hyp, n, hypothesis_counts);
  for (const auto& [ngram, count] : hypothesis_counts) {
    const std::size_t order = ngram.size() - 1;
    stats.totals[order] += count;
    const auto found = reference_counts.find(ngram);
    if (found != reference_counts.end()) stats.matches[order] += std::min(count, found->second);
  }
  return stats;
}

BleuStats bleu_sentence_stats(std::string_view hypothesis, const std::vector<std::string>& references,
                              BleuTokenizer tokenizer) {
  // metrics/bleu.py _preprocess_segment: tokenize(sentence.rstrip()); then split on whitespace.
  const auto words = [&](std::string_view sentence) {
    return split_words(tokenizer == BleuTokenizer::v13a ? tokenize_13a(rstrip(sentence)) : std::string(sentence));
  };
  std::vector<std::vector<std::string>> reference_words;
  for (const std::string& reference : references) reference_words.push_back(words(reference));
  return bleu_token_stats(words(hypothesis), reference_words);
}

std::vector<BleuStats> bleu_sentence_stats(const std::vector<std::string>& hypotheses,
                                           const std::vector<std::string>& references, BleuTokenizer tokenizer) {
  check_same_size("bleu", hypotheses.size(), references.size());
  std::vector<BleuStats> out;
  out.reserve(hypotheses.size());
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    try {
      out.push_back(bleu_sentence_stats(hypotheses[i], {references[i]}, tokenizer));
    } catch (const Error& e) {
      throw Error(concat(e.what(), " (sentence ", i, ")"));
    }
  }
  return out;
}

BleuScore bleu_from_stats(const BleuStats& stats) {
  // metrics/bleu.py compute_bleu, smooth_method 'exp', effective_order off.
  BleuScore out;
  out.counts = stats.matches;
  out.totals = stats.totals;
  out.sys_len = stats.hyp_len;
  out.ref_len = stats.ref_len;
  out.brevity_penalty = 1.0;
  if (stats.hyp_len < stats.ref_len) {
    out.brevity_penalty =
        stats.hyp_len > 0 ? std::exp(1 - static_cast<double>(stats.ref_len) / static_cast<double>(stats.hyp_len)) : 0.0;
  }
  if (std::all_of(stats.matches.begin(), stats.matches.end(), [](int64_t m) { return m == 0; })) return out;

  double smooth = 1.0;
  for (int n = 0; n < kBleuMaxOrder; ++n) {
    const auto total = static_cast<double>(stats.totals[n]);
    if (stats.totals[n] == 0) break;  // this order and the ones above keep precision 0
    if (stats.matches[n] == 0) {
      smooth *= 2;
      out.precisions[n] = 100. / (smooth * total);
    } else {
      out.precisions[n] = 100. * static_cast<double>(stats.matches[n]) / total;
    }
  }
  // utils.py my_log: log(0) is floored to -9999999999, so a missing order scores 0 (not NaN).
  double log_sum = 0;
  for (const double p : out.precisions) log_sum += p == 0.0 ? -9999999999.0 : std::log(p);
  out.score = out.brevity_penalty * std::exp(log_sum / kBleuMaxOrder);
  return out;
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                      BleuTokenizer tokenizer) {
  return bleu_from_stats(sum_stats(bleu_sentence_stats(hypotheses, references, tokenizer)));
}

// ---------------------------------------------------------------- chrF

ChrfStats& ChrfStats::operator+=(const ChrfStats& other) {
  for (int n = 0; n < kChrfCharOrder; ++n) {
    hyp[n] += other.hyp[n];
    ref[n] += other.ref[n];
    match[n] += other.match[n];
  }
  return *this;
}

ChrfScore chrf_from_stats(const ChrfStats& stats, int beta) {
  // metrics/chrf.py _compute_f_score with eps_smoothing off: precision and recall averaged over
  // the orders that have n-grams on both sides, then one F-beta of the two averages.
  ChrfScore out;
  const int factor = beta * beta;
  double avg_prec = 0, avg_rec = 0;
  for (int n = 0; n < kChrfCharOrder; ++n) {
    if (stats.hyp[n] > 0 && stats.ref[n] > 0) {
      avg_prec += static_cast<double>(stats.match[n]) / static_cast<double>(stats.hyp[n]);
      avg_rec += static_cast<double>(stats.match[n]) / static_cast<double>(stats.ref[n]);
      ++out.effective_order;
    }
  }
  if (out.effective_order == 0) return out;
  avg_prec /= out.effective_order;
  avg_rec /= out.effective_order;
  out.precision = avg_prec;
  out.recall = avg_rec;
  if (avg_prec + avg_rec != 0) {
    double score = (1 + factor) * avg_prec * avg_rec;
    score /= (factor * avg_prec) + avg_rec;
    out.score = 100 * score;
  }
  return out;
}

ChrfStats chrf_sentence_stats(std::string_view hypothesis, const std::vector<std::string>& references) {
  HEADLAB_CHECK(!references.empty(), "chrf: a hypothesis needs at least one reference, got none");
  const std::u32string hyp = chrf_characters(hypothesis);
  std::array<NgramCounts, kChrfCharOrder> hypothesis_counts;
  for (std::size_t n = 1; n <= kChrfCharOrder; ++n) count_ngrams(hyp, n, hypothesis_counts[n - 1]);

  // metrics/chrf.py _compute_segment_statistics: the reference with the best sentence chrF.
  ChrfStats best;
  double best_score = -1;
  for (const std::string& reference : references) {
    const std::u32string ref = chrf_characters(reference);
    ChrfStats stats;
    for (std::size_t n = 1; n <= kChrfCharOrder; ++n) {
      NgramCounts reference_counts;
      count_ngrams(ref, n, reference_counts);
      int64_t hyp_count = 0, match_count = 0, ref_count = 0;
      for (const auto& [ngram, count] : hypothesis_counts[n - 1]) {
        hyp_count += count;
        const auto found = reference_counts.find(ngram);
        if (found != reference_counts.end()) match_count += std::min(count, found->second);
      }
      for (const auto& entry : reference_counts) ref_count += entry.second;
      // _get_match_statistics: "hyp_count if ref_ngrams else 0".
      stats.hyp[n - 1] = ref_count > 0 ? hyp_count : 0;
      stats.ref[n - 1] = ref_count;
      stats.match[n - 1] = match_count;
    }
    const double score = chrf_from_stats(stats).score;
    if (score > best_score) {
      best_score = score;
      best = stats;
    }
  }
  return best;
}

std::vector<ChrfStats> chrf_sentence_stats(const std::vector<std::string>& hypotheses,
                                           const std::vector<std::string>& references) {
  check_same_size("chrf", hypotheses.size(), references.size());
  std::vector<ChrfStats> out;
  out.reserve(hypotheses.size());
  for (std::size_t i = 0; i < hypotheses.size(); ++i) {
    try {
      out.push_back(chrf_sentence_stats(hypotheses[i], {references[i]}));
    } catch (const Error& e) {
      throw Error(concat(e.what(), " (sentence ", i, ")"));
    }
  }
  return out;
}

ChrfScore corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  return chrf_from_stats(sum_stats(chrf_sentence_stats(hypotheses, references)));
}

// ---------------------------------------------------------------- sums over sentences

BleuStats sum_stats(const std::vector<BleuStats>& per_sentence) {
  BleuStats total;
  for (const BleuStats& s : per_sentence) total += s;
  return total;
}
BleuStats sum_stats(const std::vector<BleuStats>& per_sentence, const std::vector<std::size_t>& indices) {
  return sum_indexed(per_sentence, indices);
}
ChrfStats sum_stats(const std::vector<ChrfStats>& per_sentence) {
  ChrfStats total;
  for (const ChrfStats& s : per_sentence) total += s;
  return total;
}
ChrfStats sum_stats(const std::vector<ChrfStats>& per_sentence, const std::vector<std::size_t>& indices) {
  return sum_indexed(per_sentence, indices);
}

}  // namespace headlab
