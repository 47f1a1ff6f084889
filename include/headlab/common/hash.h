// Counter-based randomness, in one place. headlab keeps no RNG state: every random draw (data
// windows, dropout masks, parameter init streams) is a hash of seeds and counters, so a run is
// reproducible from its config and resumable from its step number alone.
//   uint64_t r = splitmix64(hash_combine(seed, step));
#pragma once

#include <cstdint>
#include <string_view>

namespace headlab {

// splitmix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A key for (seed, value) pairs: nearby seeds and values give unrelated keys.
inline uint64_t hash_combine(uint64_t seed, uint64_t value) {
  return splitmix64(splitmix64(seed) ^ value);
}

// The key of micro-batch `micro` of training step `step`: every draw made anew each step
// (dropout masks, L0 gates' noise) starts from it, so a resumed run draws the same.
inline uint64_t micro_batch_seed(uint64_t seed, int64_t step, int64_t micro) {
  return hash_combine(hash_combine(seed, static_cast<uint64_t>(step)), static_cast<uint64_t>(micro));
}

// FNV-1a (64-bit) of `text`: a stable key for names (parameter init streams). Not std::hash,
// whose values may change between standard libraries and would change results with them.
inline uint64_t hash_text(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : text) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ULL;
  return h;
}

}  // namespace headlab
