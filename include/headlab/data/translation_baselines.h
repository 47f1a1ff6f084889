// Two translators that learn nothing a model does, as floors for a translation model's BLEU:
//   copy source   the hypothesis is the source sentence itself (what BLEU gives for the words
//                 the two languages share: names, numbers, punctuation);
//   Strong's word by word  each tagged source word becomes the target phrase its Strong's lemma
//                 is most often tagged on in the training split, in source order; untagged
//                 source words (most English function words) are dropped.
// The Strong's dictionary, built from the training split's gold tags on both sides:
//   for every training verse and every lemma on its target side, each maximal run of
//   consecutive target words carrying that lemma is one phrase (ASCII punctuation stripped from
//   its two ends); a lemma's translation is its most frequent phrase, the smallest in byte
//   order on a tie. Everything is a pure function of the pairs.
//   StrongsDictionary dictionary(data.sentences(Split::train));
//   std::string hypothesis = dictionary.translate(data.sentences(Split::test)[0].pair);
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "headlab/data/bible_pairs.h"
#include "headlab/data/translation.h"

namespace headlab {

// The source text of every sentence, in order.
std::vector<std::string> copy_source_translations(std::span<const TranslationSentence> sentences);

class StrongsDictionary {
 public:
  // Throws headlab::Error when no pair carries tags (not the Bible: two plain files).
  explicit StrongsDictionary(std::span<const TranslationSentence> training);

  // The source's tagged words, each lemma replaced by its phrase (a lemma on consecutive source
  // words once), joined by spaces; the source's final punctuation mark, if any, appended.
  std::string translate(const BiblePair& pair) const;
  std::vector<std::string> translate(std::span<const TranslationSentence> sentences) const;

  // The phrase a lemma translates to; nullptr for a lemma no training target carries.
  const std::string* phrase(const std::string& lemma) const;
  int64_t size() const { return static_cast<int64_t>(phrases_.size()); }

 private:
  std::map<std::string, std::string> phrases_;  // lemma -> its most frequent phrase
};

}  // namespace headlab
