#include "headlab/analysis/logit_attribution.h"

#include <algorithm>
#include <cmath>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/data/model_input.h"
#include "headlab/io/csv.h"

namespace headlab {

namespace {

// Dot products in double of float (or double) rows.
template <typename T>
double dot(const T* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// The logit lens at one position: LayerNorm (own statistics, the model's weight and bias) then
// every token's logit; adds to the layer's sums.
template <typename T>
void lens_position(const T* x, int32_t target, const Tensor<T>& w, const Tensor<T>& b, const Tensor<T>& unembed,
                   double eps, std::vector<double>& normed, std::vector<double>& logits, LensLayer& sums) {
  const auto C = static_cast<int64_t>(normed.size()), V = static_cast<int64_t>(logits.size());
  double mean = 0, var = 0;
  for (int64_t c = 0; c < C; ++c) mean += static_cast<double>(x[c]) / static_cast<double>(C);
  for (int64_t c = 0; c < C; ++c) var += (x[c] - mean) * (x[c] - mean) / static_cast<double>(C);
  const double inv = 1 / std::sqrt(var + eps);
  for (int64_t c = 0; c < C; ++c)
    normed[static_cast<size_t>(c)] =
        (static_cast<double>(x[c]) - mean) * inv * static_cast<double>(w.data()[c]) + static_cast<double>(b.data()[c]);
  double max = -1e300;
  for (int64_t v = 0; v < V; ++v)
    max = std::max(max, logits[static_cast<size_t>(v)] = dot(unembed.data() + v * C, normed.data(), C));
  double z = 0;
  for (double l : logits) z += std::exp(l - max);
  const double correct = logits[static_cast<size_t>(target)];
  sums.loss += max + std::log(z) - correct;
  sums.accuracy += std::max_element(logits.begin(), logits.end()) - logits.begin() == target ? 1 : 0;
  sums.mean_logit += correct;
  sums.mean_prob += std::exp(correct - max) / z;
}

// The attention sites that write into decoder layer l's stream, in order, with their output
// projections: the self-attention, and an encoder_decoder's cross-attention after it.
struct StreamWriter {
  AttentionSite site;
  int64_t index;  // in attention_sites() (and Model::attention_outputs())
  LinearParams proj;
};
std::vector<StreamWriter> stream_writers(const ModelSpec& spec, const BlockParams& block, int64_t l) {
  std::vector<StreamWriter> w = {{{AttentionKind::dec, l}, spec.site_index({AttentionKind::dec, l}), block.proj}};
  if (model_kind_info(spec.kind).source)
    w.push_back({{AttentionKind::cross, l}, spec.site_index({AttentionKind::cross, l}), block.cross.proj});
  return w;
}

}  // namespace

template <typename T>
LogitAttribution logit_attribution(Model<T>& model, const Dataset& dataset, Split split, int64_t batches,
                                   int64_t batch_size) {
  const ModelSpec& spec = model.spec();
  const ModelKindInfo& kind = model_kind_info(spec.kind);
  HEADLAB_CHECK(kind.lm_head, "logit attribution: a " << kind.name
                                                      << " model; it reads an LM head (model.kind = decoder or "
                                                         "encoder_decoder)");
  batches = dataset.batches_to_score(split, batches, batch_size, "circuits");
  const int64_t L = spec.n_layers, C = spec.d_model, V = spec.vocab_size;
  const ParamIndex& index = model.param_index();
  const Parameters<T>& p = model.params();
  const Tensor<T> unembed = p.value(index.head.weight), ln_w = p.value(index.ln_f.weight),
                  ln_b = p.value(index.ln_f.bias);

  const bool one_stack = !kind.source;
  std::vector<std::vector<StreamWriter>> writers;  // per decoder layer
  for (int64_t l = 0; l < L; ++l) writers.push_back(stream_writers(spec, index.blocks[static_cast<size_t>(l)], l));
  LogitAttribution a;
  a.components.push_back({"embed", "embed", "", -1, -1, 0});
  for (int64_t l = 0; l < L; ++l) {
    for (const StreamWriter& w : writers[static_cast<size_t>(l)]) {
      const std::string attention = attention_kind_name(w.site.kind);
      for (int64_t h = 0; h < spec.heads_at_site(w.site); ++h)
        a.components.push_back({head_label(w.site, h, one_stack), "head", attention, l, h, 0});
      a.components.push_back(
          {concat(one_stack ? "" : attention + ".", "L", l, " attn bias"), "attn_bias", attention, l, -1, 0});
    }
    a.components.push_back({concat("L", l, " mlp"), "mlp", "", l, -1, 0});
  }
  a.components.push_back({"ln_f bias", "ln_f_bias", "", -1, -1, 0});
  a.lens.resize(static_cast<size_t>(L + 1));
  for (int64_t l = 0; l <= L; ++l) a.lens[static_cast<size_t>(l)].layer = l;

  Arena arena;
  Tape<T> tape(arena);
  NoGradGuard<T> no_grad(tape);
  Batch batch = dataset.make_batch(batch_size);
  std::vector<double> u(static_cast<size_t>(C)), terms(a.components.size()), normed(static_cast<size_t>(C)),
      logits(static_cast<size_t>(V)), projected;
  for (int64_t i = 0; i < batches; ++i) {
    dataset.fill_batch(split, i, batch);
    const ModelInput in = model_input(spec, batch);
    const ModelOutput<T> out = model.forward(tape, in, {});
    const int64_t T_ = in.seq_len;
    for (int64_t row = 0; row < in.batch_size * T_; ++row) {
      const int32_t y = in.targets[row];
      if (y < 0) continue;
      // u = (w_f o W_U[y] - its mean) / sigma: a component's term is c . u (centring moved onto u).
      const T* x_final = model.final_residual().value().data() + row * C;
      double mean = 0, var = 0;
      for (int64_t c = 0; c < C; ++c) mean += static_cast<double>(x_final[c]) / static_cast<double>(C);
      for (int64_t c = 0; c < C; ++c) var += (x_final[c] - mean) * (x_final[c] - mean) / static_cast<double>(C);
      const double sigma = std::sqrt(var + spec.norm_eps);
      double u_mean = 0;
      for (int64_t c = 0; c < C; ++c) {
        u[static_cast<size_t>(c)] =
            static_cast<double>(ln_w.data()[c]) * static_cast<double>(unembed.data()[y * C + c]);
        u_mean += u[static_cast<size_t>(c)] / static_cast<double>(C);
      }
      for (double& v : u) v = (v - u_mean) / sigma;

      size_t k = 0;
      terms[k++] = dot(model.block_inputs()[0].value().data() + row * C, u.data(), C);
      for (int64_t l = 0; l < L; ++l) {
        for (const StreamWriter& w : writers[static_cast<size_t>(l)]) {
          const Tensor<T> proj = p.value(w.proj.weight);                                             // [C, H Dh]
          const Tensor<T>& heads = model.attention_outputs()[static_cast<size_t>(w.index)].value();  // [B,T,H,Dh]
          const int64_t HDh = proj.shape()[1], Dh = heads.shape()[3], H = HDh / Dh;
          projected.assign(static_cast<size_t>(HDh), 0.0);  // W_O^T u, per head and head dimension
          for (int64_t c = 0; c < C; ++c)
            for (int64_t j = 0; j < HDh; ++j)
              projected[static_cast<size_t>(j)] +=
                  static_cast<double>(proj.data()[c * HDh + j]) * u[static_cast<size_t>(c)];
          for (int64_t h = 0; h < H; ++h)
            terms[k++] = dot(heads.data() + row * HDh + h * Dh, projected.data() + h * Dh, Dh);
          terms[k++] = w.proj.bias >= 0 ? dot(p.value(w.proj.bias).data(), u.data(), C) : 0.0;
        }
        const T* next =
            (l + 1 < L ? model.block_inputs()[static_cast<size_t>(l + 1)] : model.final_residual()).value().data();
        terms[k++] = dot(next + row * C, u.data(), C) -
                     dot(model.block_mids()[static_cast<size_t>(l)].value().data() + row * C, u.data(), C);
      }
      double bias_term = 0;
      for (int64_t c = 0; c < C; ++c)
        bias_term += static_cast<double>(ln_b.data()[c]) * static_cast<double>(unembed.data()[y * C + c]);
      terms[k++] = bias_term;

      const double logit = static_cast<double>(out.logits.value().data()[row * V + y]);
      double sum = 0;
      for (size_t j = 0; j < terms.size(); ++j) {
        a.components[j].mean += terms[j];
        sum += terms[j];
      }
      a.max_sum_error = std::max(a.max_sum_error, std::abs(sum - logit));
      a.mean_logit += logit;
      ++a.targets;

      for (int64_t l = 0; l <= L; ++l) {
        const T* x = (l < L ? model.block_inputs()[static_cast<size_t>(l)] : model.final_residual()).value().data();
        lens_position(x + row * C, y, ln_w, ln_b, unembed, spec.norm_eps, normed, logits,
                      a.lens[static_cast<size_t>(l)]);
      }
    }
    tape.reset();
  }
  HEADLAB_CHECK(a.targets > 0, "logit attribution: " << batches << " batches of the " << split_name(split)
                                                     << " split hold no scored target");
  const auto n = static_cast<double>(a.targets);
  for (DlaComponent& c : a.components) c.mean /= n;
  a.mean_logit /= n;
  for (LensLayer& l : a.lens) l.loss /= n, l.accuracy /= n, l.mean_logit /= n, l.mean_prob /= n;
  a.batches = batches;
  return a;
}

void write_dla_csv(const std::string& path, const LogitAttribution& a) {
  CsvWriter csv({"label", "kind", "layer", "head", "mean_dla", "attention"});
  for (const DlaComponent& c : a.components)
    csv.row({c.label, c.kind, c.layer < 0 ? "" : std::to_string(c.layer), c.head < 0 ? "" : std::to_string(c.head),
             csv_number("%.6g", c.mean), c.attention});
  write_file_atomically(path, csv.text());
}

void write_logit_lens_csv(const std::string& path, const LogitAttribution& a) {
  CsvWriter csv({"layer", "loss", "accuracy", "mean_logit", "mean_prob"});
  for (const LensLayer& l : a.lens)
    csv.row({std::to_string(l.layer), csv_number("%.6g", l.loss), csv_number("%.6g", l.accuracy),
             csv_number("%.6g", l.mean_logit), csv_number("%.6g", l.mean_prob)});
  write_file_atomically(path, csv.text());
}

template LogitAttribution logit_attribution<float>(Model<float>&, const Dataset&, Split, int64_t, int64_t);
template LogitAttribution logit_attribution<double>(Model<double>&, const Dataset&, Split, int64_t, int64_t);

}  // namespace headlab
