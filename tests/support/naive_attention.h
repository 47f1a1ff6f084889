// Naive loop reference for ops/attention (tests only): every quantity of the forward spelled out
// with plain loops over strided views, and the backward by the chain rule written element by
// element, including the full softmax Jacobian. No GEMM, no blocking, no shared algebra with the
// kernel (it keeps Y = A V for the gate gradient, which the kernel never forms).
//   q [B,Tq,H,Dh], k,v [B,Tk,Hkv,Dh], gates [H] or empty, key_padding [B,Tk] or null, dout like out.
// Causal: query t sees keys s <= t + Tk - Tq (the queries are the last Tq positions).
//   auto ref = naive_attention(q, k, v, gates, causal, padding, dout);  // ref.out, ref.dq, ...
// Results are contiguous std::vectors in the layouts above (probs [B,H,Tq,Tk]).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "headlab/tensor/tensor.h"

namespace headlab::test {

template <typename T>
struct NaiveAttention {
  std::vector<T> out, probs;          // [B,Tq,H,Dh], [B,H,Tq,Tk]
  std::vector<T> dq, dk, dv, dgates;  // shapes of q, k, v, gates; filled when dout is given
};

template <typename T>
NaiveAttention<T> naive_attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v, const Tensor<T>& gates,
                                  bool causal, const uint8_t* key_padding, const Tensor<T>& dout = {}) {
  const int64_t B = q.size(0), Tq = q.size(1), Tk = k.size(1), H = q.size(2), Dh = q.size(3), Hkv = k.size(2);
  const int64_t group = H / Hkv, offset = Tk - Tq;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(Dh)));
  NaiveAttention<T> r;
  r.out.assign(B * Tq * H * Dh, T(0));
  r.probs.assign(B * H * Tq * Tk, T(0));
  const bool grads = !dout.empty();
  if (grads) {
    r.dq.assign(q.numel(), T(0));
    r.dk.assign(k.numel(), T(0));
    r.dv.assign(v.numel(), T(0));
    r.dgates.assign(H, T(0));
  }
  auto allowed = [&](int64_t b, int64_t t, int64_t s) {
    return (!causal || s <= t + offset) && (key_padding == nullptr || key_padding[b * Tk + s] != 0);
  };
  std::vector<T> A(Tq * Tk), Y(Tq * Dh), dY(Tq * Dh), dA(Tq * Tk), dS(Tq * Tk);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      const T x = gates.empty() ? T(1) : gates(h);
      // Scores and softmax over allowed keys; a row with none stays all zero.
      for (int64_t t = 0; t < Tq; ++t) {
        T max = 0;
        bool any = false;
        std::vector<T> score(Tk, T(0));
        for (int64_t s = 0; s < Tk; ++s) {
          if (!allowed(b, t, s)) continue;
          T dot = 0;
          for (int64_t i = 0; i < Dh; ++i) dot += q(b, t, h, i) * k(b, s, g, i);
          score[s] = dot * scale;
          max = any ? std::max(max, score[s]) : score[s];
          any = true;
        }
        T sum = 0;
        for (int64_t s = 0; s < Tk; ++s) sum += allowed(b, t, s) ? std::exp(score[s] - max) : T(0);
        for (int64_t s = 0; s < Tk; ++s) A[t * Tk + s] = allowed(b, t, s) ? std::exp(score[s] - max) / sum : T(0);
      }
      // Y = A V;  out = x Y.
      for (int64_t t = 0; t < Tq; ++t)
        for (int64_t i = 0; i < Dh; ++i) {
          T y = 0;
          for (int64_t s = 0; s < Tk; ++s) y += A[t * Tk + s] * v(b, s, g, i);
          Y[t * Dh + i] = y;
          r.out[((b * Tq + t) * H + h) * Dh + i] = x * y;
        }
      for (int64_t i = 0; i < Tq * Tk; ++i) r.probs[(b * H + h) * Tq * Tk + i] = A[i];
      if (!grads) continue;
      // out = x Y:  dx += sum dout * Y,  dY = x dout.
      for (int64_t t = 0; t < Tq; ++t)
        for (int64_t i = 0; i < Dh; ++i) {
          r.dgates[h] += dout(b, t, h, i) * Y[t * Dh + i];
          dY[t * Dh + i] = x * dout(b, t, h, i);
        }
      // Y = A V:  dA = dY V^T,  dV += A^T dY.
      for (int64_t t = 0; t < Tq; ++t)
        for (int64_t s = 0; s < Tk; ++s) {
          T acc = 0;
          for (int64_t i = 0; i < Dh; ++i) acc += dY[t * Dh + i] * v(b, s, g, i);
          dA[t * Tk + s] = acc;
        }
      for (int64_t s = 0; s < Tk; ++s)
        for (int64_t i = 0; i < Dh; ++i) {
          T acc = 0;
          for (int64_t t = 0; t < Tq; ++t) acc += A[t * Tk + s] * dY[t * Dh + i];
          r.dv[((b * Tk + s) * Hkv + g) * Dh + i] += acc;
        }
      // Softmax through its full Jacobian: dS[t,s] = sum_j dA[t,j] A[t,j] (delta_js - A[t,s]).
      for (int64_t t = 0; t < Tq; ++t)
        for (int64_t s = 0; s < Tk; ++s) {
          T acc = 0;
          for (int64_t j = 0; j < Tk; ++j)
            acc += dA[t * Tk + j] * A[t * Tk + j] * ((j == s ? T(1) : T(0)) - A[t * Tk + s]);
          dS[t * Tk + s] = acc;
        }
      // score = scale q . k:  dq[t] += scale sum_s dS[t,s] k[s],  dk[s] += scale sum_t dS[t,s] q[t].
      for (int64_t t = 0; t < Tq; ++t)
        for (int64_t s = 0; s < Tk; ++s)
          for (int64_t i = 0; i < Dh; ++i) {
            r.dq[((b * Tq + t) * H + h) * Dh + i] += scale * dS[t * Tk + s] * k(b, s, g, i);
            r.dk[((b * Tk + s) * Hkv + g) * Dh + i] += scale * dS[t * Tk + s] * q(b, t, h, i);
          }
    }
  }
  return r;
}

}  // namespace headlab::test
