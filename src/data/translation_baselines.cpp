// Copy-the-source and Strong's word-by-word translations (include/headlab/data/translation_baselines.h).
#include "headlab/data/translation_baselines.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "headlab/common/error.h"

namespace headlab {

namespace {

std::vector<std::string_view> words_of(std::string_view text) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    const size_t begin = i;
    while (i < text.size() && text[i] != ' ') ++i;
    if (i > begin) words.push_back(text.substr(begin, i - begin));
  }
  return words;
}

bool ascii_punct(char c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}

std::string_view strip_punct(std::string_view s) {
  while (!s.empty() && ascii_punct(s.front())) s.remove_prefix(1);
  while (!s.empty() && ascii_punct(s.back())) s.remove_suffix(1);
  return s;
}

// Each maximal run of consecutive words of `words` tagged with one lemma, as (lemma, phrase).
std::vector<std::pair<std::string, std::string>> tagged_phrases(const std::vector<std::string_view>& words,
                                                                const std::vector<std::pair<int, std::string>>& tags) {
  std::map<std::string, std::vector<int>> positions;  // lemma -> its word indices, ascending
  for (const auto& [word, lemma] : tags)
    if (word >= 0 && word < static_cast<int>(words.size())) positions[lemma].push_back(word);
  std::vector<std::pair<std::string, std::string>> phrases;
  for (auto& [lemma, at] : positions) {
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    for (size_t i = 0; i < at.size();) {
      size_t j = i + 1;
      while (j < at.size() && at[j] == at[j - 1] + 1) ++j;
      std::string phrase;
      for (size_t k = i; k < j; ++k) {
        if (k > i) phrase += ' ';
        phrase += words[static_cast<size_t>(at[k])];
      }
      const std::string_view stripped = strip_punct(phrase);
      if (!stripped.empty()) phrases.emplace_back(lemma, std::string(stripped));
      i = j;
    }
  }
  return phrases;
}

}  // namespace

std::vector<std::string> copy_source_translations(std::span<const TranslationSentence> sentences) {
  std::vector<std::string> out;
  out.reserve(sentences.size());
  for (const TranslationSentence& s : sentences) out.push_back(s.pair.source);
  return out;
}

StrongsDictionary::StrongsDictionary(std::span<const TranslationSentence> training) {
  std::map<std::string, std::map<std::string, int64_t>> counts;  // lemma -> phrase -> count
  for (const TranslationSentence& s : training)
    for (auto& [lemma, phrase] : tagged_phrases(words_of(s.pair.target), s.pair.target_tags)) ++counts[lemma][phrase];
  HEADLAB_CHECK(!counts.empty(),
                "the Strong's word-by-word baseline needs Strong's tags on the target side "
                "(data.path = \"bible\"); these training pairs have none");
  for (const auto& [lemma, by_phrase] : counts) {
    const std::pair<const std::string, int64_t>* best = nullptr;
    for (const auto& entry : by_phrase)  // byte order: the first of the most frequent wins ties
      if (best == nullptr || entry.second > best->second) best = &entry;
    phrases_.emplace(lemma, best->first);
  }
}

const std::string* StrongsDictionary::phrase(const std::string& lemma) const {
  const auto it = phrases_.find(lemma);
  return it == phrases_.end() ? nullptr : &it->second;
}

std::string StrongsDictionary::translate(const BiblePair& pair) const {
  const std::vector<std::string_view> words = words_of(pair.source);
  std::vector<std::vector<const std::string*>> lemmas(words.size());  // per source word, in tag order
  for (const auto& [word, lemma] : pair.source_tags)
    if (word >= 0 && word < static_cast<int>(words.size())) lemmas[static_cast<size_t>(word)].push_back(&lemma);
  std::string out;
  for (size_t w = 0; w < words.size(); ++w)
    for (const std::string* lemma : lemmas[w]) {
      bool on_previous_word = false;  // "shall prepare", two words of one lemma: one phrase
      if (w > 0)
        for (const std::string* before : lemmas[w - 1]) on_previous_word |= *before == *lemma;
      const std::string* translation = phrase(*lemma);
      if (on_previous_word || translation == nullptr) continue;
      if (!out.empty()) out += ' ';
      out += *translation;
    }
  if (!pair.source.empty() && ascii_punct(pair.source.back())) out += pair.source.back();
  return out;
}

std::vector<std::string> StrongsDictionary::translate(std::span<const TranslationSentence> sentences) const {
  std::vector<std::string> out;
  out.reserve(sentences.size());
  for (const TranslationSentence& s : sentences) out.push_back(translate(s.pair));
  return out;
}

}  // namespace headlab
