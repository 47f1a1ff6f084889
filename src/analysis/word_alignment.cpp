// Word alignments and their scores (see include/headlab/analysis/word_alignment.h).
#include "headlab/analysis/word_alignment.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "headlab/common/error.h"

namespace headlab {

std::vector<AlignmentLink> gold_links(const BiblePair& pair) {
  std::map<std::string, std::vector<int>> source_words_of;  // lemma -> source words tagged with it
  for (const auto& [word, lemma] : pair.source_tags) source_words_of[lemma].push_back(word);
  std::set<AlignmentLink> links;
  for (const auto& [word, lemma] : pair.target_tags) {
    const auto it = source_words_of.find(lemma);
    if (it == source_words_of.end()) continue;
    for (const int i : it->second) links.insert({i, word});
  }
  return {links.begin(), links.end()};
}

std::vector<int> aligned_target_words(const std::vector<AlignmentLink>& gold) {
  std::set<int> words;
  for (const AlignmentLink& l : gold) words.insert(l.second);
  return {words.begin(), words.end()};
}

void AlignmentCounts::add(const std::vector<AlignmentLink>& predicted_links,
                          const std::vector<AlignmentLink>& gold_links) {
  const std::set<AlignmentLink> a(predicted_links.begin(), predicted_links.end()),
      g(gold_links.begin(), gold_links.end());
  predicted += static_cast<int64_t>(a.size());
  gold += static_cast<int64_t>(g.size());
  for (const AlignmentLink& l : a) correct += g.count(l) ? 1 : 0;
}

double AlignmentCounts::precision() const {
  return predicted ? static_cast<double>(correct) / static_cast<double>(predicted)
                   : std::numeric_limits<double>::quiet_NaN();
}
double AlignmentCounts::recall() const {
  return gold ? static_cast<double>(correct) / static_cast<double>(gold) : std::numeric_limits<double>::quiet_NaN();
}
double AlignmentCounts::aer() const {
  return predicted + gold ? 1.0 - 2.0 * static_cast<double>(correct) / static_cast<double>(predicted + gold)
                          : std::numeric_limits<double>::quiet_NaN();
}

std::vector<AlignmentLink> diagonal_alignment(int n_source, int n_target, const std::vector<int>& targets) {
  HEADLAB_CHECK(n_source >= 1 && n_target >= 1, "diagonal alignment: a sentence pair needs words on both sides");
  std::vector<AlignmentLink> links;
  for (const int j : targets) {
    HEADLAB_CHECK(j >= 0 && j < n_target, "diagonal alignment: target word " << j << " of " << n_target);
    const auto i = static_cast<int>((j + 0.5) * n_source / n_target);
    links.push_back({std::min(i, n_source - 1), j});
  }
  return links;
}

namespace {

// Words (runs of non-space bytes) in a prefix of decoded text, which may end inside a character.
int count_words(const std::string& text) {
  int n = 0;
  bool in_word = false;
  for (const char c : text) {
    const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
    n += !space && !in_word;
    in_word = !space;
  }
  return n;
}

}  // namespace

std::vector<int> token_words(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::vector<int> words(ids.size(), -1);
  std::string before;  // decode of the tokens so far
  for (size_t k = 0; k < ids.size(); ++k) {
    const std::string now = tokenizer.decode(ids.data(), static_cast<int64_t>(k + 1));
    if (now.size() <= before.size()) continue;  // a special, or nothing new
    // Words in `before`, and whether this token's first non-space byte starts a new one.
    const int n_before = count_words(before);
    size_t first = before.size();
    while (first < now.size() && std::isspace(static_cast<unsigned char>(now[first]))) ++first;
    const bool starts_word =
        first > before.size() || before.empty() || std::isspace(static_cast<unsigned char>(before.back()));
    if (first == now.size()) {
      words[k] = n_before;  // spaces only: the next word's
    } else {
      words[k] = starts_word ? n_before : n_before - 1;
    }
    before = now;
  }
  // A spaces-only token at the end belongs to no word.
  const int n_words = count_words(before);
  for (int& w : words)
    if (w >= n_words) w = -1;
  return words;
}

VerseTokenWords verse_token_words(const Tokenizer& tokenizer, const TranslationSentence& sentence) {
  VerseTokenWords w;
  w.source = token_words(tokenizer, sentence.source_ids);
  w.target = token_words(tokenizer, sentence.target_ids);
  w.source.push_back(-1);  // </s>
  w.target.push_back(-1);
  w.n_source_words = static_cast<int>(split_words(sentence.pair.source).size());
  w.n_target_words = static_cast<int>(split_words(sentence.pair.target).size());
  auto words_in = [](const std::vector<int>& token_words) {
    return *std::max_element(token_words.begin(), token_words.end()) + 1;
  };
  if (words_in(w.source) != w.n_source_words || words_in(w.target) != w.n_target_words) return {};
  return w;
}

std::vector<uint8_t> gold_token_matrix(const std::vector<AlignmentLink>& gold, const VerseTokenWords& words, int64_t T,
                                       int64_t S) {
  HEADLAB_CHECK(static_cast<int64_t>(words.target.size()) <= T && static_cast<int64_t>(words.source.size()) <= S,
                "gold token matrix: a verse of " << words.target.size() << " target and " << words.source.size()
                                                 << " source tokens on a " << T << " x " << S << " map");
  const std::set<AlignmentLink> links(gold.begin(), gold.end());
  std::vector<uint8_t> m(static_cast<size_t>(T * S), 0);
  for (size_t t = 0; t < words.target.size(); ++t)
    for (size_t s = 0; s < words.source.size(); ++s)
      if (words.target[t] >= 0 && words.source[s] >= 0 && links.count({words.source[s], words.target[t]}))
        m[t * static_cast<size_t>(S) + s] = 1;
  return m;
}

std::vector<AlignmentLink> attention_alignment(const double* attn, int64_t T, int64_t S,
                                               const std::vector<int>& target_token_words,
                                               const std::vector<int>& source_token_words, int n_source_words,
                                               const std::vector<int>& targets) {
  HEADLAB_CHECK(
      static_cast<int64_t>(target_token_words.size()) == T && static_cast<int64_t>(source_token_words.size()) == S,
      "attention alignment: " << target_token_words.size() << " target and " << source_token_words.size()
                              << " source token words for a " << T << " x " << S << " map");
  std::vector<AlignmentLink> links;
  std::vector<double> score(static_cast<size_t>(n_source_words));
  for (const int j : targets) {
    std::fill(score.begin(), score.end(), 0.0);
    int64_t rows = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (target_token_words[t] != j) continue;
      ++rows;
      for (int64_t s = 0; s < S; ++s) {
        const int i = source_token_words[s];
        if (i >= 0 && i < n_source_words) score[static_cast<size_t>(i)] += attn[t * S + s];
      }
    }
    if (rows == 0) continue;  // the word was cut off (truncated source or hypothesis): no prediction
    links.push_back({static_cast<int>(std::max_element(score.begin(), score.end()) - score.begin()), j});
  }
  return links;
}

std::string normalize_word(const std::string& word) {
  size_t a = 0, b = word.size();
  while (a < b && std::ispunct(static_cast<unsigned char>(word[a]))) ++a;
  while (b > a && std::ispunct(static_cast<unsigned char>(word[b - 1]))) --b;
  std::string out = a < b ? word.substr(a, b - a) : word;  // punctuation alone stays itself
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

namespace {

std::vector<std::string> sorted_vocab(const std::vector<IbmModel1::Sentence>& corpus, bool source) {
  std::set<std::string> words;
  for (const IbmModel1::Sentence& s : corpus)
    for (const std::string& w : source ? s.first : s.second) words.insert(normalize_word(w));
  if (source) words.insert("");  // NULL
  return {words.begin(), words.end()};
}

int32_t id_in(const std::vector<std::string>& vocab, const std::string& word) {
  const auto it = std::lower_bound(vocab.begin(), vocab.end(), word);
  return it != vocab.end() && *it == word ? static_cast<int32_t>(it - vocab.begin()) : -1;
}

}  // namespace

IbmModel1::IbmModel1(const std::vector<Sentence>& training, int iterations) {
  HEADLAB_CHECK(!training.empty() && iterations >= 0, "IBM Model 1: needs training pairs and iterations >= 0");
  source_vocab_ = sorted_vocab(training, true);
  target_vocab_ = sorted_vocab(training, false);
  const int32_t null_id = id_in(source_vocab_, "");
  // Word ids per sentence (NULL first on the source side).
  std::vector<std::vector<int32_t>> src(training.size()), tgt(training.size());
  for (size_t n = 0; n < training.size(); ++n) {
    src[n].push_back(null_id);
    for (const std::string& w : training[n].first) src[n].push_back(id_in(source_vocab_, normalize_word(w)));
    for (const std::string& w : training[n].second) tgt[n].push_back(id_in(target_vocab_, normalize_word(w)));
  }
  // t(f | e) for co-occurring pairs only: row e holds its targets sorted, in one flat array.
  std::vector<std::vector<int32_t>> targets_of(source_vocab_.size());
  for (size_t n = 0; n < training.size(); ++n)
    for (const int32_t e : src[n])
      targets_of[static_cast<size_t>(e)].insert(targets_of[static_cast<size_t>(e)].end(), tgt[n].begin(), tgt[n].end());
  row_start_.assign(source_vocab_.size() + 1, 0);
  for (size_t e = 0; e < targets_of.size(); ++e) {
    std::vector<int32_t>& row = targets_of[e];
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    row_start_[e + 1] = row_start_[e] + static_cast<int64_t>(row.size());
  }
  row_target_.reserve(static_cast<size_t>(row_start_.back()));
  for (const std::vector<int32_t>& row : targets_of) row_target_.insert(row_target_.end(), row.begin(), row.end());
  t_.assign(row_target_.size(), 1.0 / static_cast<double>(std::max<size_t>(1, target_vocab_.size())));
  // Each sentence's (target word, source word) slots in t_, target by target: computed once.
  std::vector<std::vector<uint32_t>> slots(training.size());
  for (size_t n = 0; n < training.size(); ++n)
    for (const int32_t f : tgt[n])
      for (const int32_t e : src[n]) slots[n].push_back(static_cast<uint32_t>(slot(e, f)));

  auto log_likelihood = [&] {
    double sum = 0;
    for (size_t n = 0; n < training.size(); ++n) {
      const size_t l = src[n].size();
      for (size_t j = 0; j < tgt[n].size(); ++j) {
        double p = 0;
        for (size_t i = 0; i < l; ++i) p += t_[slots[n][j * l + i]];
        sum += std::log(p / static_cast<double>(l));
      }
    }
    return sum;
  };
  log_likelihood_.push_back(log_likelihood());
  std::vector<double> counts(t_.size());
  for (int it = 0; it < iterations; ++it) {
    std::fill(counts.begin(), counts.end(), 0.0);
    for (size_t n = 0; n < training.size(); ++n) {  // E: expected counts of f generated by e
      const size_t l = src[n].size();
      for (size_t j = 0; j < tgt[n].size(); ++j) {
        const uint32_t* k = slots[n].data() + j * l;
        double denominator = 0;
        for (size_t i = 0; i < l; ++i) denominator += t_[k[i]];
        for (size_t i = 0; i < l; ++i) counts[k[i]] += t_[k[i]] / denominator;
      }
    }
    for (size_t e = 0; e + 1 < row_start_.size(); ++e) {  // M: t(. | e) = counts normalized
      double total = 0;
      for (int64_t k = row_start_[e]; k < row_start_[e + 1]; ++k) total += counts[static_cast<size_t>(k)];
      for (int64_t k = row_start_[e]; k < row_start_[e + 1]; ++k)
        t_[static_cast<size_t>(k)] = total > 0 ? counts[static_cast<size_t>(k)] / total : 0.0;
    }
    log_likelihood_.push_back(log_likelihood());
  }
}

int64_t IbmModel1::slot(int32_t e, int32_t f) const {
  const auto begin = row_target_.begin() + row_start_[static_cast<size_t>(e)],
             end = row_target_.begin() + row_start_[static_cast<size_t>(e) + 1];
  const auto it = std::lower_bound(begin, end, f);
  return it != end && *it == f ? static_cast<int64_t>(it - row_target_.begin()) : -1;
}

int32_t IbmModel1::source_id(const std::string& word) const {
  return id_in(source_vocab_, normalize_word(word));
}
int32_t IbmModel1::target_id(const std::string& word) const {
  return id_in(target_vocab_, normalize_word(word));
}

double IbmModel1::probability(const std::string& target_word, const std::string& source_word) const {
  const int32_t e = source_word.empty() ? id_in(source_vocab_, "") : source_id(source_word), f = target_id(target_word);
  if (e < 0 || f < 0) return 0.0;
  const int64_t k = slot(e, f);
  return k >= 0 ? t_[static_cast<size_t>(k)] : 0.0;
}

std::vector<AlignmentLink> IbmModel1::align(const std::vector<std::string>& source,
                                            const std::vector<std::string>& target,
                                            const std::vector<int>& targets) const {
  std::vector<AlignmentLink> links;
  for (const int j : targets) {
    HEADLAB_CHECK(j >= 0 && j < static_cast<int>(target.size()),
                  "IBM Model 1: target word " << j << " of " << target.size());
    int best = 0;
    double best_p = -1;
    for (int i = 0; i < static_cast<int>(source.size()); ++i) {
      const double p = source[static_cast<size_t>(i)].empty()
                           ? 0.0  // "" is NULL's name, never a source word
                           : probability(target[static_cast<size_t>(j)], source[static_cast<size_t>(i)]);
      if (p > best_p) best_p = p, best = i;
    }
    if (!source.empty()) links.push_back({best, j});
  }
  return links;
}

}  // namespace headlab
