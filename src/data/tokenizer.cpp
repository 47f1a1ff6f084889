// The tokenizer factory and the byte tokenizer. See include/headlab/data/tokenizer.h; the
// sentencepiece kind is in src/data/sentencepiece_tokenizer.cpp.
#include "headlab/data/tokenizer.h"

#include "headlab/common/error.h"
#include "headlab/data/text.h"

namespace headlab {

// Defined in sentencepiece_tokenizer.cpp.
std::unique_ptr<Tokenizer> train_sentencepiece(const TokenizerOptions& options,
                                               const std::vector<std::string>& training_text);
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& serialized, const std::string& origin);

namespace {

constexpr int32_t kBytePad = 256, kByteBos = 257, kByteEos = 258;
constexpr const char *kBytesPlain = "bytes", *kBytesWithSpecials = "bytes+specials";

class ByteTokenizer final : public Tokenizer {
 public:
  explicit ByteTokenizer(bool specials) : specials_(specials) {}
  const char* kind() const override { return "bytes"; }
  int64_t vocab_size() const override { return specials_ ? 259 : 256; }
  SpecialTokens specials() const override {
    if (!specials_) return {};
    return {.pad = kBytePad, .unk = -1, .bos = kByteBos, .eos = kByteEos};
  }
  void encode(std::string_view text, std::vector<int32_t>& ids) const override {
    ids.resize(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  }
  std::string decode(const int32_t* ids, int64_t n) const override {
    std::string text;
    text.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      HEADLAB_CHECK(ids[i] >= 0 && ids[i] < vocab_size(),
                    "tokenizer bytes: id " << ids[i] << " is outside [0, " << vocab_size() << ")");
      if (ids[i] < 256) text.push_back(static_cast<char>(ids[i]));
    }
    return text;
  }
  std::string token_label(int32_t id) const override {
    if (specials_ && id == kBytePad) return "<pad>";
    if (specials_ && id == kByteBos) return "<s>";
    if (specials_ && id == kByteEos) return "</s>";
    return text_token_label(id);
  }
  std::string serialized() const override { return specials_ ? kBytesWithSpecials : kBytesPlain; }

 private:
  bool specials_;
};

}  // namespace

std::unique_ptr<Tokenizer> byte_tokenizer(bool specials) {
  return std::make_unique<ByteTokenizer>(specials);
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options,
                                          const std::vector<std::string>& training_text) {
  if (options.kind == "bytes") return byte_tokenizer(options.specials);
  if (options.kind == "sentencepiece") return train_sentencepiece(options, training_text);
  throw Error(concat("data.tokenizer: unknown tokenizer '", options.kind, "' (bytes|sentencepiece)"));
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& kind, const std::string& serialized,
                                          const std::string& origin) {
  if (kind == "bytes") {
    if (serialized == kBytesPlain) return byte_tokenizer(false);
    if (serialized == kBytesWithSpecials) return byte_tokenizer(true);
    throw Error(concat(origin, ": the byte tokenizer's model is '", serialized.substr(0, 40), "', expected '",
                       kBytesPlain, "' or '", kBytesWithSpecials, "'"));
  }
  if (kind == "sentencepiece") return load_sentencepiece(serialized, origin);
  throw Error(concat(origin, ": unknown tokenizer kind '", kind.substr(0, 40), "' (bytes|sentencepiece)"));
}

}  // namespace headlab
