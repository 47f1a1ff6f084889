// Alignment heads against the Strong's gold (see include/headlab/analysis/alignment_heads.h).
#include "headlab/analysis/alignment_heads.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "headlab/analysis/heads.h"
#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/io/csv.h"

namespace headlab {

namespace {

std::vector<IbmModel1::Sentence> word_pairs(std::span<const TranslationSentence> sentences) {
  std::vector<IbmModel1::Sentence> out;
  for (const TranslationSentence& s : sentences)
    out.push_back({split_words(s.pair.source), split_words(s.pair.target)});
  return out;
}

std::string number_or_empty(double v) {
  return std::isnan(v) ? std::string() : csv_number("%.6g", v);
}

}  // namespace

AlignmentReport score_alignment_heads(Model<float>& model, const TranslationDataset& data, Split split,
                                      const AlignmentOptions& options) {
  const ModelSpec& spec = model.spec();
  HEADLAB_CHECK(model_kind_info(spec.kind).source, "alignment: the model is a "
                                                       << model_kind_info(spec.kind).name
                                                       << "; alignment heads are cross-attention heads");
  const std::vector<TranslationSentence>& all = data.sentences(split);
  const size_t n =
      options.max_sentences > 0 ? std::min(all.size(), static_cast<size_t>(options.max_sentences)) : all.size();
  bool tagged = false;
  for (size_t i = 0; i < n && !tagged; ++i)
    tagged = !all[i].pair.source_tags.empty() && !all[i].pair.target_tags.empty();
  HEADLAB_CHECK(tagged, "alignment: the " << split_name(split) << " split's pairs carry no Strong's numbers (a gold "
                                          << "alignment needs data.path = \"bible\")");
  const Tokenizer& tokenizer = *data.tokenizer();
  const SpecialTokens specials = tokenizer.specials();
  const std::vector<TranslationSentence>& train = data.sentences(Split::train);
  const size_t n_train = options.ibm_training_sentences > 0
                             ? std::min(train.size(), static_cast<size_t>(options.ibm_training_sentences))
                             : train.size();
  const IbmModel1 ibm(word_pairs({train.data(), n_train}), options.ibm_iterations);

  AlignmentReport report;
  report.ibm_log_likelihoods = ibm.log_likelihoods();
  std::vector<AlignmentRow> heads;  // per (layer, head) and layer mean, in report order
  std::vector<std::vector<size_t>> row_of(static_cast<size_t>(spec.n_layers));  // [layer][head or H = mean]
  for (int64_t l = 0; l < spec.n_layers; ++l) {
    const int64_t H = spec.attention_shape({AttentionKind::cross, l}).heads;
    for (int64_t h = 0; h <= H; ++h) {
      AlignmentRow r;
      r.layer = l;
      r.head = h < H ? h : -1;
      r.method = h < H ? head_label({AttentionKind::cross, l}, h, false) : "cross.L" + std::to_string(l) + " mean";
      row_of[static_cast<size_t>(l)].push_back(heads.size());
      heads.push_back(r);
    }
  }
  AlignmentRow diagonal, ibm_row;
  diagonal.method = "diagonal";
  ibm_row.method = "ibm1";

  std::vector<double> mean;
  for (size_t i = 0; i < n; ++i) {
    const TranslationSentence& s = all[i];
    const std::vector<AlignmentLink> gold = gold_links(s.pair);
    const std::vector<int> targets = aligned_target_words(gold);
    if (targets.empty()) continue;  // nothing to align in this verse
    const VerseTokenWords words = verse_token_words(tokenizer, s);
    if (words.empty()) {
      ++report.skipped;  // cut to the caps (or words the tokenizer's normalisation merges)
      continue;
    }
    const std::vector<std::string> source_words = split_words(s.pair.source), target_words = split_words(s.pair.target);
    ++report.sentences;
    diagonal.counts.add(
        diagonal_alignment(static_cast<int>(source_words.size()), static_cast<int>(target_words.size()), targets),
        gold);
    ibm_row.counts.add(ibm.align(source_words, target_words, targets), gold);

    std::vector<int32_t> source = s.source_ids, tokens = {specials.bos};
    source.push_back(specials.eos);
    tokens.insert(tokens.end(), s.target_ids.begin(), s.target_ids.end());
    const AttentionExample a = attention_on_tokens(model, tokens, source);
    const AttentionMaps& cross = a.cross;
    const int64_t T = cross.n_queries, S = cross.n_keys;  // T = target ids + 1: row t predicts target token t
    for (int64_t l = 0; l < cross.n_layers; ++l) {
      const int64_t H = cross.layer_heads[static_cast<size_t>(l)];
      mean.assign(static_cast<size_t>(T * S), 0.0);
      for (int64_t h = 0; h < H; ++h) {
        const double* map = cross.probs.data() + (l * cross.n_heads + h) * T * S;
        for (int64_t k = 0; k < T * S; ++k) mean[static_cast<size_t>(k)] += map[k] / static_cast<double>(H);
        heads[row_of[static_cast<size_t>(l)][static_cast<size_t>(h)]].counts.add(
            attention_alignment(map, T, S, words.target, words.source, words.n_source_words, targets), gold);
      }
      heads[row_of[static_cast<size_t>(l)].back()].counts.add(
          attention_alignment(mean.data(), T, S, words.target, words.source, words.n_source_words, targets), gold);
    }
  }
  const double bar = std::min(diagonal.counts.aer(), ibm_row.counts.aer());
  for (AlignmentRow& r : heads) r.alignment_head = r.counts.aer() < bar;
  report.rows = std::move(heads);
  report.rows.push_back(diagonal);
  report.rows.push_back(ibm_row);
  return report;
}

void add_alignment_columns(const AlignmentReport& report, HeadScores& scores) {
  int64_t cross = 0, scored = 0;
  for (int64_t l = 0; l < scores.n_sites; ++l)
    if (scores.site(l).kind == AttentionKind::cross) cross += scores.heads_at(l);
  for (const AlignmentRow& r : report.rows) scored += r.head >= 0;
  HEADLAB_CHECK(scored == cross, "alignment: " << scored << " heads scored as aligners, " << cross
                                               << " cross heads in the head analysis: not the same model");
  for (const AlignmentRow& r : report.rows) {
    if (r.head < 0) continue;  // a layer's mean, a baseline
    const int64_t k = scores.index_of({AttentionKind::cross, r.layer}, r.head, "alignment");
    scores.alignment_aer[k] = r.counts.aer();
    scores.alignment_precision[k] = r.counts.precision();
    scores.alignment_recall[k] = r.counts.recall();
  }
}

void write_alignment_csv(const std::string& path, const AlignmentReport& report) {
  CsvWriter csv(
      {"method", "layer", "head", "predicted", "gold", "correct", "precision", "recall", "aer", "alignment_head"});
  for (const AlignmentRow& r : report.rows)
    csv.row({r.method, r.layer >= 0 ? std::to_string(r.layer) : "", r.head >= 0 ? std::to_string(r.head) : "",
             std::to_string(r.counts.predicted), std::to_string(r.counts.gold), std::to_string(r.counts.correct),
             number_or_empty(r.counts.precision()), number_or_empty(r.counts.recall()), number_or_empty(r.counts.aer()),
             r.layer >= 0 ? (r.alignment_head ? "1" : "0") : ""});
  write_file_atomically(path, csv.text());
}

}  // namespace headlab
