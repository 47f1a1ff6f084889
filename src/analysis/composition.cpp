#include "headlab/analysis/composition.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>

#include "headlab/common/error.h"
#include "headlab/common/files.h"
#include "headlab/io/csv.h"
#include "headlab/linalg/eigenvalues.h"

namespace headlab {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Row-major dense products, small (Dh x Dh results; C up to a few hundred).
// A^T B for A [n, a], B [n, b] -> [a, b].
std::vector<double> at_b(const std::vector<double>& A, const std::vector<double>& B, int64_t n, int64_t a, int64_t b) {
  std::vector<double> out(static_cast<size_t>(a * b), 0.0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < a; ++i) {
      const double x = A[static_cast<size_t>(r * a + i)];
      for (int64_t j = 0; j < b; ++j) out[static_cast<size_t>(i * b + j)] += x * B[static_cast<size_t>(r * b + j)];
    }
  return out;
}
// A B for A [a, n], B [n, b] -> [a, b].
std::vector<double> a_b(const std::vector<double>& A, const std::vector<double>& B, int64_t a, int64_t n, int64_t b) {
  std::vector<double> out(static_cast<size_t>(a * b), 0.0);
  for (int64_t i = 0; i < a; ++i)
    for (int64_t r = 0; r < n; ++r) {
      const double x = A[static_cast<size_t>(i * n + r)];
      for (int64_t j = 0; j < b; ++j) out[static_cast<size_t>(i * b + j)] += x * B[static_cast<size_t>(r * b + j)];
    }
  return out;
}
// A B^T for A [a, n], B [b, n] -> [a, b].
std::vector<double> a_bt(const std::vector<double>& A, const std::vector<double>& B, int64_t a, int64_t n, int64_t b) {
  std::vector<double> out(static_cast<size_t>(a * b), 0.0);
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j) {
      double s = 0;
      for (int64_t r = 0; r < n; ++r) s += A[static_cast<size_t>(i * n + r)] * B[static_cast<size_t>(j * n + r)];
      out[static_cast<size_t>(i * b + j)] = s;
    }
  return out;
}
double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
std::vector<double> transposed(const std::vector<double>& A, int64_t rows, int64_t cols) {
  std::vector<double> out(A.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) out[static_cast<size_t>(j * rows + i)] = A[static_cast<size_t>(i * cols + j)];
  return out;
}

// Rows row0 .. row0 + Dh of a projection weight [*, C], transposed to [C, Dh] with the LayerNorm
// weight that feeds them folded in: out[c, d] = ln[c] W[row0 + d, c].
template <typename T>
void folded_rows(const Tensor<T>& weight, const Tensor<T>& ln, int64_t row0, int64_t C, int64_t Dh,
                 std::vector<double>& out) {
  out.resize(static_cast<size_t>(C * Dh));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t d = 0; d < Dh; ++d)
      out[static_cast<size_t>(c * Dh + d)] =
          static_cast<double>(ln.data()[c]) * static_cast<double>(weight.data()[(row0 + d) * C + c]);
}

}  // namespace

const char* composition_name(Composition kind) {
  constexpr const char* kNames[kCompositions] = {"q", "k", "v"};
  return kNames[static_cast<int>(kind)];
}

template <typename T>
HeadWeights head_weights(const Model<T>& model, int64_t site, int64_t head) {
  const ModelSpec& spec = model.spec();
  const AttentionSite where = spec.attention_sites().at(static_cast<size_t>(site));
  const AttentionShape shape = spec.attention_shape(where);
  HEADLAB_CHECK(head >= 0 && head < shape.heads, "head_weights: site " << site << " has no head " << head);
  const ParamIndex& index = model.param_index();
  const Parameters<T>& p = model.params();
  const auto l = static_cast<size_t>(where.layer);
  const int64_t C = spec.d_model, Dh = shape.d_head, H = shape.heads, Hkv = shape.kv_heads;
  const int64_t g = head / (H / Hkv);  // the K/V head this query head reads
  HeadWeights w;
  w.d_model = C;
  w.d_head = Dh;
  LinearParams out_proj;
  if (where.kind == AttentionKind::cross) {
    // Queries from LN_c(decoder stream); keys and values from the encoder's output, LN_enc(x_enc):
    // kv.weight [2 Hkv Dh, C] holds the K heads, then the V heads.
    const CrossParams& cross = index.blocks.at(l).cross;
    const Tensor<T> kv = p.value(cross.kv.weight), enc_ln = p.value(index.encoder_ln_f.weight);
    folded_rows(p.value(cross.q.weight), p.value(cross.ln.weight), head * Dh, C, Dh, w.q);
    folded_rows(kv, enc_ln, g * Dh, C, Dh, w.k);
    folded_rows(kv, enc_ln, (Hkv + g) * Dh, C, Dh, w.v);
    out_proj = cross.proj;
  } else {
    // qkv.weight [(H + 2 Hkv) Dh, C]: the query heads, then the K heads, then the V heads, all
    // reading LN1 of the block's stream.
    const BlockParams& block = where.kind == AttentionKind::enc ? index.encoder_blocks.at(l) : index.blocks.at(l);
    const Tensor<T> qkv = p.value(block.qkv.weight), ln = p.value(block.ln1.weight);
    folded_rows(qkv, ln, head * Dh, C, Dh, w.q);
    folded_rows(qkv, ln, (H + g) * Dh, C, Dh, w.k);
    folded_rows(qkv, ln, (H + Hkv + g) * Dh, C, Dh, w.v);
    out_proj = block.proj;
  }
  const Tensor<T> proj = p.value(out_proj.weight);
  w.o.resize(static_cast<size_t>(Dh * C));
  for (int64_t d = 0; d < Dh; ++d) {  // W_O [Dh, C] from proj.weight [C, H Dh], each row centred
    double mean = 0;
    for (int64_t c = 0; c < C; ++c) mean += static_cast<double>(proj.data()[c * H * Dh + head * Dh + d]);
    mean /= static_cast<double>(C);
    for (int64_t c = 0; c < C; ++c)
      w.o[static_cast<size_t>(d * C + c)] = static_cast<double>(proj.data()[c * H * Dh + head * Dh + d]) - mean;
  }
  return w;
}

double composition_score(const HeadWeights& sender, const HeadWeights& receiver, Composition kind) {
  HEADLAB_CHECK(sender.d_model == receiver.d_model, "composition_score: heads of different models");
  const int64_t C = sender.d_model, Ds = sender.d_head, Dr = receiver.d_head;
  // The receiver's circuit as X Y^T with X, Y [C, Dr]: W_QK = W_Q W_K^T, its transpose W_K W_Q^T,
  // W_OV = W_V (W_O^T)^T.
  const std::vector<double> o_t = transposed(receiver.o, Dr, C);
  const std::vector<double>& X = kind == Composition::q ? receiver.q : kind == Composition::k ? receiver.k : receiver.v;
  const std::vector<double>& Y = kind == Composition::q ? receiver.k : kind == Composition::k ? receiver.q : o_t;
  // Sender W_OV = V O with V [C, Ds], O [Ds, C]; the product V (O X) Y^T, M = O X [Ds, Dr].
  const std::vector<double> gram_v = at_b(sender.v, sender.v, C, Ds, Ds), gram_x = at_b(X, X, C, Dr, Dr),
                            gram_y = at_b(Y, Y, C, Dr, Dr), gram_o = a_bt(sender.o, sender.o, Ds, C, Ds);
  const std::vector<double> M = a_b(sender.o, X, Ds, C, Dr);
  const double product = dot(a_b(gram_v, M, Ds, Ds, Dr), a_b(M, gram_y, Ds, Dr, Dr));  // tr(M^T Gv M Gy)
  const double sender_norm = dot(gram_v, gram_o), receiver_norm = dot(gram_x, gram_y);
  return std::sqrt(std::max(product, 0.0)) / std::sqrt(sender_norm * receiver_norm);
}

std::array<bool, kCompositions> compositions_between(AttentionSite sender, int64_t sender_site, AttentionSite receiver,
                                                     int64_t receiver_site) {
  const bool from_encoder = sender.kind == AttentionKind::enc;
  if (receiver.kind == AttentionKind::cross) {
    if (from_encoder) return {false, true, true};  // every encoder head has written the memory
    return {receiver_site > sender_site, false, false};
  }
  const bool same_stream = from_encoder == (receiver.kind == AttentionKind::enc);
  const bool later = receiver_site > sender_site;
  return {same_stream && later, same_stream && later, same_stream && later};
}

template <typename T>
CompositionScores composition_scores(const Model<T>& model) {
  const ModelSpec& spec = model.spec();
  const bool one_stack = !model_kind_info(spec.kind).source;
  CompositionScores s;
  std::vector<HeadWeights> weights;
  std::vector<AttentionSite> head_site;
  std::vector<int64_t> site_index;
  const std::vector<AttentionSite> sites = spec.attention_sites();
  for (size_t i = 0; i < sites.size(); ++i)
    for (int64_t h = 0; h < spec.heads_at_site(sites[i]); ++h) {
      s.labels.push_back(head_label(sites[i], h, one_stack));
      s.layer.push_back(sites[i].layer);
      s.head.push_back(h);
      weights.push_back(head_weights(model, static_cast<int64_t>(i), h));
      head_site.push_back(sites[i]);
      site_index.push_back(static_cast<int64_t>(i));
    }
  const size_t N = s.labels.size();
  for (auto& scores : s.scores) scores.assign(N * N, kNaN);
  s.connected.assign(N * N, 0);
  for (size_t a = 0; a < N; ++a)
    for (size_t b = 0; b < N; ++b) {
      const std::array<bool, kCompositions> kinds =
          compositions_between(head_site[a], site_index[a], head_site[b], site_index[b]);
      for (int k = 0; k < kCompositions; ++k)
        if (kinds[static_cast<size_t>(k)]) {
          s.connected[a * N + b] = 1;
          s.scores[static_cast<size_t>(k)][a * N + b] =
              composition_score(weights[a], weights[b], static_cast<Composition>(k));
        }
    }
  return s;
}

template <typename T>
std::vector<double> ov_copying_scores(const Model<T>& model) {
  const ModelSpec& spec = model.spec();
  HEADLAB_CHECK(model_kind_info(spec.kind).lm_head,
                "OV copying scores: a " << model_kind_info(spec.kind).name
                                        << " model has no LM head to read the OV circuit's logits (decoder and "
                                           "encoder_decoder models)");
  const ParamIndex& index = model.param_index();
  const int64_t C = spec.d_model, V = spec.vocab_size;
  const Tensor<T> emb = model.params().value(index.tok_emb), head = model.params().value(index.head.weight),
                  ln_f = model.params().value(index.ln_f.weight);
  // W_U W_E [C, C] = sum over tokens of ln_f[c] head[v, c] * (emb[v, c'] - mean_c' emb[v, .]).
  std::vector<double> unembed_embed(static_cast<size_t>(C * C), 0.0);
  for (int64_t v = 0; v < V; ++v) {
    double mean = 0;
    for (int64_t c = 0; c < C; ++c) mean += static_cast<double>(emb.data()[v * C + c]) / static_cast<double>(C);
    for (int64_t c = 0; c < C; ++c) {
      const double u = static_cast<double>(ln_f.data()[c]) * static_cast<double>(head.data()[v * C + c]);
      for (int64_t c2 = 0; c2 < C; ++c2)
        unembed_embed[static_cast<size_t>(c * C + c2)] += u * (static_cast<double>(emb.data()[v * C + c2]) - mean);
    }
  }
  std::vector<double> out;
  const std::vector<AttentionSite> sites = spec.attention_sites();
  for (size_t l = 0; l < sites.size(); ++l)
    for (int64_t h = 0; h < spec.heads_at_site(sites[l]); ++h) {
      if (sites[l].kind == AttentionKind::enc) {  // writes the encoder's stream: no path of its own to W_U
        out.push_back(kNaN);
        continue;
      }
      const HeadWeights w = head_weights(model, static_cast<int64_t>(l), h);
      const int64_t Dh = w.d_head;
      const std::vector<double> m = a_b(a_b(w.o, unembed_embed, Dh, C, C), w.v, Dh, C, Dh);  // W_O W_U W_E W_V
      double sum = 0, abs_sum = 0;
      for (const std::complex<double>& e : eigenvalues(m, Dh)) sum += e.real(), abs_sum += std::abs(e);
      out.push_back(abs_sum > 0 ? sum / abs_sum : kNaN);
    }
  return out;
}

void write_copying_csv(const std::string& path, const std::vector<int64_t>& steps,
                       const std::vector<CompositionScores>& scores, const std::vector<std::vector<double>>& copying) {
  CsvWriter csv({"step", "label", "layer", "head", "copying_score"});
  for (size_t c = 0; c < steps.size(); ++c)
    for (size_t k = 0; k < scores[c].labels.size(); ++k) {
      const double v = copying[c][k];
      csv.row({std::to_string(steps[c]), scores[c].labels[k], std::to_string(scores[c].layer[k]),
               std::to_string(scores[c].head[k]), std::isnan(v) ? "" : csv_number("%.6g", v)});
    }
  write_file_atomically(path, csv.text());
}

void write_composition_csv(const std::string& path, const std::vector<int64_t>& steps,
                           const std::vector<CompositionScores>& scores) {
  CsvWriter csv({"step", "sender", "receiver", "sender_layer", "receiver_layer", "q", "k", "v"});
  for (size_t c = 0; c < steps.size(); ++c) {
    const CompositionScores& s = scores[c];
    for (size_t a = 0; a < s.labels.size(); ++a)
      for (size_t r = 0; r < s.labels.size(); ++r) {
        if (!s.connected[a * s.labels.size() + r]) continue;
        std::vector<std::string> fields = {std::to_string(steps[c]), s.labels[a], s.labels[r],
                                           std::to_string(s.layer[a]), std::to_string(s.layer[r])};
        for (int k = 0; k < kCompositions; ++k) {
          const double v = s.score(static_cast<Composition>(k), a, r);
          fields.push_back(std::isnan(v) ? "" : csv_number("%.6g", v));
        }
        csv.row(fields);
      }
  }
  write_file_atomically(path, csv.text());
}

template HeadWeights head_weights<float>(const Model<float>&, int64_t, int64_t);
template HeadWeights head_weights<double>(const Model<double>&, int64_t, int64_t);
template CompositionScores composition_scores<float>(const Model<float>&);
template CompositionScores composition_scores<double>(const Model<double>&);
template std::vector<double> ov_copying_scores<float>(const Model<float>&);
template std::vector<double> ov_copying_scores<double>(const Model<double>&);

}  // namespace headlab
