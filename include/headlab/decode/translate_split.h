// Translating text with an encoder_decoder checkpoint, and scoring a split of a
// TranslationDataset by BLEU and chrF: the one path from source text to scored hypotheses that
// `headlab translate`, `headlab eval` and the trainer's val BLEU all take.
// A source row is the tokenizer's ids, cut to the source cap, then </s> (what the model was
// trained to read, data/translation.h); translate() (decode/search.h) decodes it greedily or by
// beam search, and the tokenizer turns the target tokens back into text. The references are the
// split's target sentences as the corpus has them, never truncated.
//   SplitTranslation t = translate_split(model, data, Split::test, {.beam = 5});
//   t.bleu.score, t.chrf.score;  t.hypotheses[i] against t.references[i]
//   std::vector<std::string> out = translate_lines(model, tokenizer, {"In the beginning"}, 128, {});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headlab/data/bleu.h"
#include "headlab/data/tokenizer.h"
#include "headlab/data/translation.h"
#include "headlab/decode/search.h"
#include "headlab/nn/model.h"

namespace headlab {

// The tokenizer's <s>, </s> and <pad> as translate() takes them.
SpecialIds search_ids(const Tokenizer& tokenizer);

// A hypothesis' text from its target ids (without <s> and </s>): valid UTF-8 on one line (below).
std::string hypothesis_text(const Tokenizer& tokenizer, const std::vector<int32_t>& target);

// The hypothesis text of each source, given as tokenizer ids without </s>, at most
// max_source_tokens - 1 of them (the caller cuts). A source with no ids translates to "".
// Hypotheses are valid UTF-8: a byte model may stop inside a character, and what does not
// decode as UTF-8 becomes U+FFFD (repair_utf8), so that BLEU can score every hypothesis; and a
// newline (sentencepiece has a "\n" piece) becomes a space, so a hypothesis is one line.
// `encoded` as translate() takes it (decode/search.h): the encoder's work kept for the next call.
std::vector<std::string> translate_ids(Model<float>& model, const Tokenizer& tokenizer,
                                       const std::vector<std::vector<int32_t>>& source_ids,
                                       const SearchOptions& options, EncodedSources* encoded = nullptr);

// The ids a source text is translated from (without </s>): encoded by `tokenizer` and cut to
// max_source_tokens - 1 ids (and at most the model's max_seq_len - 1), as translate_lines cuts.
std::vector<int32_t> source_ids_of(const ModelSpec& spec, const Tokenizer& tokenizer, const std::string& text,
                                   int64_t max_source_tokens);

// translate_ids of free text, one sentence per entry: each encoded by `tokenizer` and cut to
// max_source_tokens - 1 ids (the dataset's cap, TranslationOptions::max_source_tokens, and at
// most the model's max_seq_len), as the dataset cuts a long val or test source.
std::vector<std::string> translate_lines(Model<float>& model, const Tokenizer& tokenizer,
                                         const std::vector<std::string>& lines, int64_t max_source_tokens,
                                         const SearchOptions& options);

struct SplitTranslation {
  std::vector<std::string> hypotheses, references;  // per sentence, in corpus order
  std::vector<BleuStats> bleu_stats;                // per sentence (sum_stats adds them up)
  std::vector<ChrfStats> chrf_stats;
  BleuScore bleu;  // corpus BLEU of the sentences (13a tokenization)
  ChrfScore chrf;
};

// Hypotheses scored against their references (same count), sentence by sentence and as a corpus.
SplitTranslation score_translations(std::vector<std::string> hypotheses, std::vector<std::string> references);

// The first `max_sentences` sentences of `split` in corpus order (0 or more than the split
// holds: all of them), translated and scored against their target text; `encoded` as translate_ids.
SplitTranslation translate_split(Model<float>& model, const TranslationDataset& data, Split split,
                                 const SearchOptions& options, int64_t max_sentences = 0,
                                 EncodedSources* encoded = nullptr);

}  // namespace headlab
