// Direct logit attribution and the logit lens of a decoder, over batches of a data split: what
// each component writes straight into the logit of the correct next token, and what the residual
// stream predicts after each layer.
// Direct logit attribution (DLA; Elhage et al. 2021, TransformerLens's
// ActivationCache.decompose_resid / logit_attrs): the stream entering the final LayerNorm is a
// sum of components, x = embed + sum over layers (every head's a_h W_O^h, the attention's output
// bias, the MLP's output; an encoder_decoder's decoder layer adds its cross-attention's heads and
// bias after its self-attention's). With the LayerNorm's scale sigma frozen at the run's own value (the
// stream's standard deviation at that position, as TransformerLens documents it), the logit of
// token y, LN_f(x) . W_U[y], is linear in x:
//   logit(y) = sum over components c of ((c - mean(c)) / sigma) . (w_f o W_U[y])  +  b_f . W_U[y]
// so each component gets the term it adds, and the terms add up to the logit exactly (to the
// model's float rounding; LogitAttribution::max_sum_error says how close). A head's MLP-free
// "direct" effect is this term; its effect through later layers is not in it.
// The logit lens (nostalgebraist 2020): the final LayerNorm (with its own statistics at each
// layer, not the final stream's: TransformerLens issue #1076) and the unembedding applied to the
// stream after each block: the loss, accuracy and mean logit and probability of the correct
// token that an exit there would give.
//   LogitAttribution a = logit_attribution(model, dataset, Split::val, 8, 32);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headlab/data/batch.h"
#include "headlab/nn/model.h"

namespace headlab {

struct DlaComponent {
  std::string label;      // "embed", "L1H0", "L1 attn bias", "L1 mlp", "ln_f bias" (encoder_decoder:
                          // "dec.L1H0", "cross.L1H0", "dec.L1 attn bias", "cross.L1 attn bias")
  std::string kind;       // "embed", "head", "attn_bias", "mlp", "ln_f_bias"
  std::string attention;  // a head's or attention bias's kind: "dec" or "cross"; "" for the rest
  int64_t layer = -1, head = -1;
  double mean = 0;  // mean over scored targets of the component's term in the correct token's logit
};

struct LensLayer {
  int64_t layer = 0;  // the stream after this many blocks (0: the embeddings)
  double loss = 0, accuracy = 0, mean_logit = 0, mean_prob = 0;
};

struct LogitAttribution {
  std::vector<DlaComponent> components;  // embed; per layer: its heads, attn bias (an encoder_decoder:
                                         // self's, then cross's), mlp; ln_f bias
  double mean_logit = 0;                 // the model's own logit of the correct token, mean over targets
  double max_sum_error = 0;              // max over targets of |sum of the terms - the model's logit|
  int64_t targets = 0, batches = 0;
  std::vector<LensLayer> lens;  // n_layers + 1 rows
};

// Over `batches` batches of `split` (0: the split's default, as analyze), rows of `batch_size`.
// Models with an LM head: decoders, and encoder_decoders, whose decoder stream holds the
// self-attention's and the cross-attention's heads (the encoder's heads reach the logits only
// through the cross-attention, so they have no direct term). An encoder classifier is one
// headlab::Error line.
template <typename T>
LogitAttribution logit_attribution(Model<T>& model, const Dataset& dataset, Split split, int64_t batches,
                                   int64_t batch_size);

// dla.csv: label,kind,layer,head,mean_dla (%.6g),attention; logit_lens.csv: layer,loss,accuracy,mean_logit,
// mean_prob.
void write_dla_csv(const std::string& path, const LogitAttribution& a);
void write_logit_lens_csv(const std::string& path, const LogitAttribution& a);

}  // namespace headlab
