// Head ablation in BLEU (issue 28 item 2; Michel et al. 2019, Tables 1-2): a translation model
// translates the first sentences of a split unmasked, then once per head with that head's gate set
// to 0 (the other gates as the model has them), and optionally once per head with it the only head
// left on in its attention site (the site's other gates 0, its own as the model has it). Each
// setting is scored in corpus BLEU and chrF (translate_split), and its BLEU change tested by
// Koehn's paired bootstrap over sentences (data/bleu_bootstrap.h); the per-sentence statistics
// are kept so that another paired test can be run later. The model's gates are restored.
// Heads are numbered over the attention sites in spec.attention_sites() order: index = heads of
// the earlier sites + head (enc, then dec and cross per decoder layer).
// Speed: gating a decoder or cross head leaves the encoder's output and the cross K/V alone, so
// those decodings reuse the unmasked one's (decode/search.h, EncodedSources); a gate table the
// model has already been decoded with (a head already gated 0) reuses those translations.
//   BleuAblation r = bleu_ablation(model, data, Split::test, {.max_sentences = 200});
//   r.heads[k].masked.bleu_delta, r.heads[k].masked.bootstrap.p_value
//   write_bleu_ablation_csv("run/bleu_ablation.csv", r);  write_bleu_ablation_h5("run/bleu_ablation.h5", r);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "headlab/analysis/heads.h"
#include "headlab/data/bleu.h"
#include "headlab/data/bleu_bootstrap.h"
#include "headlab/data/translation.h"
#include "headlab/decode/search.h"
#include "headlab/decode/translate_split.h"
#include "headlab/nn/model.h"

namespace headlab {

struct BleuAblationOptions {
  SearchOptions search{.beam = 5};  // Michel et al. decode with beam 5; length penalty 1
  int64_t max_sentences = 0;        // the split's first N sentences; 0 = all
  bool layer_only = false;          // also each head alone in its site: one more decoding per head
  int64_t bootstrap_samples = 1000;
  uint64_t bootstrap_seed = 0;
  // false: every decoding runs the encoder (the reference the reuse is tested and timed against).
  bool reuse_encoder = true;
};

// One gate setting's translations, scored, and compared with the unmasked ones.
struct AblatedBleu {
  std::vector<std::string> hypotheses;  // per sentence
  std::vector<BleuStats> bleu_stats;    // per sentence: paired_bootstrap_bleu(unmasked, these) reruns the test
  std::vector<ChrfStats> chrf_stats;
  BleuScore bleu;
  ChrfScore chrf;
  double bleu_delta = 0, chrf_delta = 0;  // this - unmasked, in points
  PairedBootstrap bootstrap;              // of the BLEU change (delta, p_value, 95% low/high)
  bool decoded = true;                    // false: the translations of an identical gate table were reused
};

struct HeadBleu {
  AttentionSite site{AttentionKind::enc, 0};
  int64_t head = 0;
  double gate = 1;  // the model's gate of the head
  AblatedBleu masked;
  std::optional<AblatedBleu> layer_only;  // with BleuAblationOptions::layer_only
};

struct BleuAblation {
  Split split = Split::val;
  BleuAblationOptions options;
  SplitTranslation unmasked;    // hypotheses, references, per-sentence stats, corpus BLEU and chrF
  std::vector<HeadBleu> heads;  // in index order
  int64_t decodings = 0;        // translations of the split, the unmasked one included
};

// Throws headlab::Error (one line) for a model that is not an encoder_decoder, one whose vocabulary
// is not the data's, a beam below 1, bootstrap_samples below 1, or a split without sentences.
BleuAblation bleu_ablation(Model<float>& model, const TranslationDataset& data, Split split,
                           const BleuAblationOptions& options);

// heads.csv's BLEU columns (ablation_bleu_delta, ablation_chrf_delta, ablation_bleu_p and the
// layer_only_ three when computed) from `result`, which must number the same heads as `scores`
// (one analysis of one model); a one-line error otherwise.
void add_bleu_columns(const BleuAblation& result, HeadScores& scores);

// One row per head: label,attention,layer,head,gate,bleu,bleu_delta,chrf,chrf_delta,bleu_p,
// bleu_low,bleu_high,bleu_low99,bleu_high99 (and the same nine with layer_only_ when computed).
void write_bleu_ablation_csv(const std::string& path, const BleuAblation& result);

// The per-sentence statistics (docs/analysis.md, "BLEU ablation (translation)"): the unmasked
// translations' and each head's, for a paired test run later (read_bleu_ablation_stats).
void write_bleu_ablation_h5(const std::string& path, const BleuAblation& result);

// What write_bleu_ablation_h5 wrote: per sentence, unmasked, and per head (index order).
struct BleuAblationStats {
  std::vector<BleuStats> unmasked;
  std::vector<std::vector<BleuStats>> masked, layer_only;  // layer_only empty when not computed
};
BleuAblationStats read_bleu_ablation_stats(const std::string& path);

}  // namespace headlab
