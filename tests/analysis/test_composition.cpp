// Composition scores (analysis/composition.h): the head weights against the model's own forward
// (the attention scores and values they imply are the forward's, for MHA, GQA and MQA, so each
// query head reads the K/V head the forward gives it), the factored score against the C x C
// matrices formed naively, and the hand-built induction circuit, whose previous-token head
// K-composes with its induction head more than any other pair composes in any way. An
// encoder_decoder: which pairs compose through which input, every connected pair's score against
// the naive one, and a cross head's weights from its own LN_c and the encoder's final LayerNorm.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "headlab/analysis/composition.h"
#include "headlab/ops/attention.h"
#include "support/induction_circuit.h"
#include "support/tiny_model.h"

using namespace headlab;

namespace {

// A [r, n] x B [n, c], row-major.
std::vector<double> matmul(const std::vector<double>& A, const std::vector<double>& B, int64_t r, int64_t n,
                           int64_t c) {
  std::vector<double> out(static_cast<size_t>(r * c), 0.0);
  for (int64_t i = 0; i < r; ++i)
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < c; ++j) out[i * c + j] += A[i * n + k] * B[k * c + j];
  return out;
}
std::vector<double> transpose(const std::vector<double>& A, int64_t r, int64_t c) {
  std::vector<double> out(A.size());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) out[j * r + i] = A[i * c + j];
  return out;
}
double frobenius(const std::vector<double>& A) {
  double s = 0;
  for (double v : A) s += v * v;
  return std::sqrt(s);
}

}  // namespace

TEST_CASE("head weights give the forward's attention and values, each query head on its own K/V head",
          "[analysis][composition]") {
  const int64_t kv = GENERATE(4, 2, 1);
  ModelSpec spec = test::tiny_spec(ModelKind::decoder, 4, kv);
  spec.bias = false;  // biases are left out of the circuits: compare a model without them
  Model<double> model(spec);
  test::randomize(model, 3);
  for (int64_t l = 0; l < spec.n_layers; ++l) {  // LN1's bias would be a bias of q, k and v
    Tensor<double> b = model.params().value(model.param_index().blocks[static_cast<size_t>(l)].ln1.bias);
    std::fill(b.data(), b.data() + b.numel(), 0.0);
  }
  const test::TinyBatch batch(spec, 7);
  Arena arena;
  Tape<double> tape(arena);
  NoGradGuard<double> no_grad(tape);
  ForwardOptions forward;
  forward.keep_probs = true;
  model.forward(tape, batch.input(), forward);
  const int64_t B = batch.B, T = batch.T, C = spec.d_model, H = spec.n_heads, Dh = spec.d_head;
  for (int64_t l = 0; l < spec.n_layers; ++l) {
    const Tensor<double>& x = model.block_inputs()[static_cast<size_t>(l)].value();  // [B,T,C]
    const Tensor<double> probs = attention_probs(model.attention_outputs()[static_cast<size_t>(l)]);
    const Tensor<double>& out = model.attention_outputs()[static_cast<size_t>(l)].value();  // [B,T,H,Dh]
    const double* gates = model.gates().value(static_cast<int>(l)).data();
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> xhat(static_cast<size_t>(T * C));  // LayerNorm without its weight (folded)
      for (int64_t t = 0; t < T; ++t) {
        const double* row = x.data() + (b * T + t) * C;
        double mean = 0, var = 0;
        for (int64_t c = 0; c < C; ++c) mean += row[c] / C;
        for (int64_t c = 0; c < C; ++c) var += (row[c] - mean) * (row[c] - mean) / C;
        for (int64_t c = 0; c < C; ++c) xhat[t * C + c] = (row[c] - mean) / std::sqrt(var + spec.norm_eps);
      }
      for (int64_t h = 0; h < H; ++h) {
        const HeadWeights w = head_weights(model, l, h);
        const std::vector<double> q = matmul(xhat, w.q, T, C, Dh), k = matmul(xhat, w.k, T, C, Dh),
                                  v = matmul(xhat, w.v, T, C, Dh);
        for (int64_t i = 0; i < T; ++i) {
          std::vector<double> p(static_cast<size_t>(i + 1));
          double max = -1e300, sum = 0;
          for (int64_t j = 0; j <= i; ++j) {
            double s = 0;
            for (int64_t d = 0; d < Dh; ++d) s += q[i * Dh + d] * k[j * Dh + d];
            p[j] = s / std::sqrt(static_cast<double>(Dh));
            max = std::max(max, p[j]);
          }
          for (double& e : p) sum += (e = std::exp(e - max));
          for (int64_t j = 0; j <= i; ++j)
            CHECK(probs.data()[((b * H + h) * T + i) * T + j] == Approx(p[j] / sum).margin(1e-12));
          for (int64_t d = 0; d < Dh; ++d) {
            double o = 0;
            for (int64_t j = 0; j <= i; ++j) o += p[j] / sum * v[j * Dh + d];
            CHECK(out.data()[((b * T + i) * H + h) * Dh + d] == Approx(gates[h] * o).margin(1e-12));
          }
        }
      }
    }
  }
}

TEST_CASE("the factored composition score is the naive one on C x C matrices", "[analysis][composition]") {
  ModelSpec spec = test::tiny_spec(ModelKind::decoder, 2, 1);
  spec.n_layers = 3;
  spec.d_head = 3;  // not d_model / heads: the factors are not square
  Model<double> model(spec);
  test::randomize(model, 11);
  const int64_t C = spec.d_model, Dh = spec.d_head;
  const CompositionScores s = composition_scores(model);
  REQUIRE(s.labels.size() == 6u);
  for (size_t a = 0; a < 6; ++a)
    for (size_t r = 0; r < 6; ++r) {
      if (s.layer[a] >= s.layer[r]) {
        for (int k = 0; k < kCompositions; ++k) CHECK(std::isnan(s.score(static_cast<Composition>(k), a, r)));
        continue;
      }
      const HeadWeights ws = head_weights(model, s.layer[a], s.head[a]),
                        wr = head_weights(model, s.layer[r], s.head[r]);
      const std::vector<double> ov_s = matmul(ws.v, ws.o, C, Dh, C), ov_r = matmul(wr.v, wr.o, C, Dh, C),
                                qk_r = matmul(wr.q, transpose(wr.k, C, Dh), C, Dh, C);
      const double want_q = frobenius(matmul(ov_s, qk_r, C, C, C)) / (frobenius(ov_s) * frobenius(qk_r));
      const double want_k =
          frobenius(matmul(ov_s, transpose(qk_r, C, C), C, C, C)) / (frobenius(ov_s) * frobenius(qk_r));
      const double want_v = frobenius(matmul(ov_s, ov_r, C, C, C)) / (frobenius(ov_s) * frobenius(ov_r));
      CHECK(s.score(Composition::q, a, r) == Approx(want_q).epsilon(1e-12));
      CHECK(s.score(Composition::k, a, r) == Approx(want_k).epsilon(1e-12));
      CHECK(s.score(Composition::v, a, r) == Approx(want_v).epsilon(1e-12));
      CHECK(want_q != Approx(want_k).epsilon(1e-6));  // the kinds differ: a swapped one would show
    }
}

TEST_CASE("W_O is centred over the residual dimensions, as TransformerLens's center_writing_weights",
          "[analysis][composition]") {
  Model<double> model(test::tiny_spec(ModelKind::decoder, 2, 2));
  test::randomize(model, 5);
  const HeadWeights w = head_weights(model, 1, 1);
  for (int64_t d = 0; d < w.d_head; ++d) {
    double sum = 0;
    for (int64_t c = 0; c < w.d_model; ++c) sum += w.o[d * w.d_model + c];
    CHECK(sum == Approx(0).margin(1e-12));
  }
}

TEST_CASE("the hand-built induction circuit: K-composition of its previous-token and induction heads is the largest",
          "[analysis][composition]") {
  const Model<double> model = test::induction_circuit_model(6, 12);
  const CompositionScores s = composition_scores(model);
  REQUIRE(s.labels == std::vector<std::string>{"L0H0", "L0H1", "L1H0", "L1H1"});
  // By hand: W_OV of L0H0 maps A+_t to sqrt(var0) (B+_t - B-_t) (||.||^2 = 2 V var0); W_QK of L1H0
  // has q_scale at (A+_t, B+_t) and -2 q_scale at (A+_t, P+_0), the sink (||.||^2 = 5 V q_scale^2);
  // W_OV W_QK^T keeps sqrt(var0) q_scale at (A+_t, A+_t) (||.||^2 = V var0 q_scale^2): 1/sqrt(10 V).
  const double k = s.score(Composition::k, 0, 2);
  CHECK(k == Approx(1 / std::sqrt(10.0 * 6)).epsilon(1e-12));
  for (size_t a = 0; a < 4; ++a)
    for (size_t r = 0; r < 4; ++r)
      for (int kind = 0; kind < kCompositions; ++kind) {
        const double v = s.score(static_cast<Composition>(kind), a, r);
        if (!std::isnan(v) && !(a == 0 && r == 2 && kind == static_cast<int>(Composition::k))) CHECK(v < k);
      }
}

TEST_CASE("an encoder_decoder: which heads compose through which input", "[analysis][composition]") {
  using K = AttentionKind;
  // Sites of 2 encoder and 2 decoder layers: enc 0, 1; dec.L0 2, cross.L0 3, dec.L1 4, cross.L1 5.
  const auto between = [](K s, int64_t si, K r, int64_t ri) {
    const std::array<bool, kCompositions> c = compositions_between({s, 0}, si, {r, 0}, ri);
    return std::string(c[0] ? "q" : "") + (c[1] ? "k" : "") + (c[2] ? "v" : "");
  };
  CHECK(between(K::enc, 0, K::enc, 1) == "qkv");
  CHECK(between(K::enc, 1, K::enc, 0) == "");
  CHECK(between(K::enc, 1, K::cross, 3) == "kv");  // the memory, read by keys and values only
  CHECK(between(K::enc, 0, K::cross, 5) == "kv");
  CHECK(between(K::enc, 0, K::dec, 2) == "");     // the decoder's self-attention never reads the encoder
  CHECK(between(K::dec, 2, K::cross, 3) == "q");  // the same layer's self-attention, before the cross
  CHECK(between(K::cross, 3, K::dec, 4) == "qkv");
  CHECK(between(K::cross, 3, K::cross, 5) == "q");
  CHECK(between(K::dec, 4, K::cross, 3) == "");
  CHECK(between(K::dec, 2, K::enc, 1) == "");
  CHECK(between(K::dec, 0, K::dec, 1) == "qkv");  // a one-stack model's layers
}

TEST_CASE("an encoder_decoder's composition scores: every connected pair, factored as on C x C matrices",
          "[analysis][composition]") {
  const int64_t cross_kv = GENERATE(2, 1);
  ModelSpec spec = test::tiny_seq2seq_spec(2, 2, 2, cross_kv);
  spec.vocab_size = 12;
  Model<double> model(spec);
  test::randomize(model, 13);
  const ParamIndex& index = model.param_index();
  const CompositionScores s = composition_scores(model);
  // 2 encoder layers, 2 decoder layers x (self + cross), 2 heads each.
  REQUIRE(s.labels.size() == 12u);
  CHECK(s.labels[0] == "enc.L0H0");
  CHECK(s.labels[6] == "cross.L0H0");
  const int64_t C = spec.d_model;
  const std::vector<AttentionSite> sites = spec.attention_sites();
  int64_t pairs = 0;
  for (size_t a = 0; a < 12; ++a)
    for (size_t r = 0; r < 12; ++r) {
      const int64_t sa = static_cast<int64_t>(a / 2), sr = static_cast<int64_t>(r / 2);
      const std::array<bool, kCompositions> kinds = compositions_between(sites[sa], sa, sites[sr], sr);
      CHECK(s.connected[a * 12 + r] == (kinds[0] || kinds[1] || kinds[2]));
      pairs += s.connected[a * 12 + r];
      const HeadWeights ws = head_weights(model, sa, s.head[a]), wr = head_weights(model, sr, s.head[r]);
      const int64_t Ds = ws.d_head, Dr = wr.d_head;
      const std::vector<double> ov_s = matmul(ws.v, ws.o, C, Ds, C), ov_r = matmul(wr.v, wr.o, C, Dr, C),
                                qk_r = matmul(wr.q, transpose(wr.k, C, Dr), C, Dr, C);
      const double want[3] = {
          frobenius(matmul(ov_s, qk_r, C, C, C)) / (frobenius(ov_s) * frobenius(qk_r)),
          frobenius(matmul(ov_s, transpose(qk_r, C, C), C, C, C)) / (frobenius(ov_s) * frobenius(qk_r)),
          frobenius(matmul(ov_s, ov_r, C, C, C)) / (frobenius(ov_s) * frobenius(ov_r))};
      for (int k = 0; k < kCompositions; ++k) {
        const double got = s.score(static_cast<Composition>(k), a, r);
        if (kinds[static_cast<size_t>(k)])
          CHECK(got == Approx(want[k]).epsilon(1e-12));
        else
          CHECK(std::isnan(got));
      }
    }
  // Head pairs (4 per pair of sites): enc.L0 -> enc.L1; each encoder layer -> each cross layer (4
  // site pairs); dec.L0 -> cross.L0, dec.L1, cross.L1; cross.L0 -> dec.L1, cross.L1; dec.L1 -> cross.L1.
  CHECK(pairs == 4 * (1 + 4 + 3 + 2 + 1));

  // OV copying: the encoder's heads have no path of their own to the logits; the others do.
  const std::vector<double> copying = ov_copying_scores(model);
  REQUIRE(copying.size() == 12u);
  for (size_t k = 0; k < 12; ++k) CHECK(std::isnan(copying[k]) == (k < 4));

  // A cross head's W_Q reads LN_c(decoder stream), its W_K and W_V the encoder's output through
  // the encoder's final LayerNorm; with MQA every query head reads K/V head 0.
  const BlockParams& blk = index.blocks[1];
  const Tensor<double> q = model.params().value(blk.cross.q.weight), kv = model.params().value(blk.cross.kv.weight),
                       ln_c = model.params().value(blk.cross.ln.weight),
                       ln_enc = model.params().value(index.encoder_ln_f.weight);
  const HeadWeights w = head_weights(model, 5, 1);  // cross.L1H1
  const int64_t Dh = w.d_head, g = cross_kv == 1 ? 0 : 1;
  for (int64_t c = 0; c < C; ++c)
    for (int64_t d = 0; d < Dh; ++d) {
      CHECK(w.q[c * Dh + d] == ln_c.data()[c] * q.data()[(Dh + d) * C + c]);
      CHECK(w.k[c * Dh + d] == ln_enc.data()[c] * kv.data()[(g * Dh + d) * C + c]);
      CHECK(w.v[c * Dh + d] == ln_enc.data()[c] * kv.data()[((cross_kv + g) * Dh + d) * C + c]);
    }
}

TEST_CASE("a head whose OV circuit projects onto the embedding copies (score 1); its negation suppresses (-1)",
          "[analysis][composition]") {
  ModelSpec spec = test::tiny_spec(ModelKind::decoder, 4, 4);  // d_model 8, d_head 2
  spec.tie_embeddings = true;
  Model<double> model(spec);
  test::randomize(model, 2);
  const ParamIndex& index = model.param_index();
  for (int norm : {index.blocks[0].ln1.weight, index.ln_f.weight}) {
    Tensor<double> w = model.params().value(norm);
    std::fill(w.data(), w.data() + w.numel(), 1.0);
  }
  Tensor<double> emb = model.params().value(index.tok_emb);  // rows of mean 0: centring changes nothing
  for (int64_t v = 0; v < spec.vocab_size; ++v) {
    double mean = 0;
    for (int64_t c = 0; c < 8; ++c) mean += emb.data()[v * 8 + c] / 8;
    for (int64_t c = 0; c < 8; ++c) emb.data()[v * 8 + c] -= mean;
  }
  // Head 0 of layer 0: W_V = U, W_O = sign U^T, U [8, 2] orthonormal with columns of mean 0, so
  // the circuit is sign E U U^T E^T: eigenvalues all >= 0 (sign 1) or all <= 0 (sign -1).
  const double r = 1 / std::sqrt(2.0);
  const double U[8][2] = {{r, 0}, {-r, 0}, {0, r}, {0, -r}, {0, 0}, {0, 0}, {0, 0}, {0, 0}};
  Tensor<double> qkv = model.params().value(index.blocks[0].qkv.weight),
                 proj = model.params().value(index.blocks[0].proj.weight);
  for (const double sign : {1.0, -1.0}) {
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t c = 0; c < 8; ++c) {
        qkv.data()[((2 * 4) * 2 + d) * 8 + c] = U[c][d];  // value rows of K/V head 0 (after 4 q and 4 k heads)
        proj.data()[c * (4 * 2) + d] = sign * U[c][d];
      }
    const std::vector<double> copying = ov_copying_scores(model);
    REQUIRE(copying.size() == 8u);
    CHECK(copying[0] == Approx(sign).epsilon(1e-12));
  }
  Model<double> encoder(test::tiny_spec(ModelKind::encoder, 2, 2));
  CHECK_THROWS_WITH(ov_copying_scores(encoder), Catch::Contains("no LM head"));
}
