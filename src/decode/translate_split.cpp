#include "headlab/decode/translate_split.h"

#include <algorithm>

#include "headlab/common/error.h"
#include "headlab/data/text.h"

namespace headlab {

SpecialIds search_ids(const Tokenizer& tokenizer) {
  const SpecialTokens s = tokenizer.specials();
  return {.bos = s.bos, .eos = s.eos, .pad = s.pad};
}

std::string hypothesis_text(const Tokenizer& tokenizer, const std::vector<int32_t>& target) {
  std::string text = repair_utf8(tokenizer.decode(target));
  std::replace(text.begin(), text.end(), '\n', ' ');  // one line per hypothesis, in files and on stdout
  return text;
}

std::vector<std::string> translate_ids(Model<float>& model, const Tokenizer& tokenizer,
                                       const std::vector<std::vector<int32_t>>& source_ids,
                                       const SearchOptions& options, EncodedSources* encoded) {
  const SpecialIds ids = search_ids(tokenizer);
  // Sources without ids are left out of the search: a row of </s> alone is not a sentence.
  std::vector<std::vector<int32_t>> rows;
  std::vector<size_t> row_of;
  for (size_t i = 0; i < source_ids.size(); ++i) {
    if (source_ids[i].empty()) continue;
    rows.push_back(source_ids[i]);
    rows.back().push_back(ids.eos);
    row_of.push_back(i);
  }
  const std::vector<std::vector<int32_t>> targets = translate(model, rows, ids, options, encoded);
  std::vector<std::string> out(source_ids.size());
  for (size_t r = 0; r < rows.size(); ++r) out[row_of[r]] = hypothesis_text(tokenizer, targets[r]);
  return out;
}

std::vector<int32_t> source_ids_of(const ModelSpec& spec, const Tokenizer& tokenizer, const std::string& text,
                                   int64_t max_source_tokens) {
  HEADLAB_CHECK(max_source_tokens >= 2, "translate: a source row needs room for a token and </s>");
  const auto cap = static_cast<size_t>(std::min(max_source_tokens, spec.max_seq_len) - 1);
  std::vector<int32_t> ids;
  tokenizer.encode(text, ids);
  if (ids.size() > cap) ids.resize(cap);
  return ids;
}

std::vector<std::string> translate_lines(Model<float>& model, const Tokenizer& tokenizer,
                                         const std::vector<std::string>& lines, int64_t max_source_tokens,
                                         const SearchOptions& options) {
  std::vector<std::vector<int32_t>> source_ids;
  for (const std::string& line : lines)
    source_ids.push_back(source_ids_of(model.spec(), tokenizer, line, max_source_tokens));
  return translate_ids(model, tokenizer, source_ids, options);
}

SplitTranslation translate_split(Model<float>& model, const TranslationDataset& data, Split split,
                                 const SearchOptions& options, int64_t max_sentences, EncodedSources* encoded) {
  const std::vector<TranslationSentence>& sentences = data.sentences(split);
  const size_t n =
      max_sentences > 0 ? std::min(sentences.size(), static_cast<size_t>(max_sentences)) : sentences.size();
  std::vector<std::vector<int32_t>> source_ids;
  std::vector<std::string> references;
  for (size_t i = 0; i < n; ++i) {
    source_ids.push_back(sentences[i].source_ids);  // already cut to the dataset's caps
    references.push_back(sentences[i].pair.target);
  }
  return score_translations(translate_ids(model, *data.tokenizer(), source_ids, options, encoded),
                            std::move(references));
}

SplitTranslation score_translations(std::vector<std::string> hypotheses, std::vector<std::string> references) {
  HEADLAB_CHECK(hypotheses.size() == references.size(), "score_translations: " << hypotheses.size()
                                                                               << " hypotheses for "
                                                                               << references.size() << " references");
  SplitTranslation out;
  out.hypotheses = std::move(hypotheses);
  out.references = std::move(references);
  out.bleu_stats = bleu_sentence_stats(out.hypotheses, out.references);
  out.chrf_stats = chrf_sentence_stats(out.hypotheses, out.references);
  out.bleu = bleu_from_stats(sum_stats(out.bleu_stats));
  out.chrf = chrf_from_stats(sum_stats(out.chrf_stats));
  return out;
}

}  // namespace headlab
