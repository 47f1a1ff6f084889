// Tokenizers: text <-> token ids. Two kinds behind one interface, named by data.tokenizer:
//   bytes          id = byte (0..255); with specials, 256 = <pad>, 257 = <s>, 258 = </s>
//   sentencepiece  a unigram or BPE model (libsentencepiece) trained on the training split only,
//                  ids 0 = <pad>, 1 = <unk>, 2 = <s>, 3 = </s>, then the pieces ("\n" one of
//                  them: lines are encoded one by one). No normalization and no whitespace
//                  clean-up, so decode(encode(x)) == x for UTF-8 text whose characters all occur
//                  in the training text, spaces and runs of them included. What does not
//                  round-trip: a character the training text lacks becomes <unk> (a run of them
//                  one <unk>), which decodes as " \u2047 "; bytes that are not UTF-8. The trainer
//                  skips training lines over 4192 bytes.
// A tokenizer is rebuilt from two strings, kind() and serialized(), which every checkpoint and run
// folder stores, so a checkpoint alone can encode and decode (load_tokenizer).
//   std::unique_ptr<Tokenizer> tok = make_tokenizer({.kind = "sentencepiece", .vocab_size = 4000}, lines);
//   std::vector<int32_t> ids;  tok->encode("In the beginning", ids);  tok->decode(ids) == "In the beginning"
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace headlab {

// Ids of the special tokens; -1 where the tokenizer has none (bytes without specials).
struct SpecialTokens {
  int32_t pad = -1, unk = -1, bos = -1, eos = -1;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual const char* kind() const = 0;    // "bytes" | "sentencepiece" (data.tokenizer)
  virtual int64_t vocab_size() const = 0;  // ids are 0 .. vocab_size-1, specials included
  virtual SpecialTokens specials() const = 0;
  // Replaces `ids` with the tokens of `text`; no <s> or </s> is added.
  virtual void encode(std::string_view text, std::vector<int32_t>& ids) const = 0;
  // The text of `ids`; special tokens are dropped. Throws headlab::Error on an id out of range.
  virtual std::string decode(const int32_t* ids, int64_t n) const = 0;
  std::string decode(const std::vector<int32_t>& ids) const {
    return decode(ids.data(), static_cast<int64_t>(ids.size()));
  }
  // One token as people read it in tables and attention viewers ("\n", "\xff", "▁the", "</s>").
  virtual std::string token_label(int32_t id) const = 0;
  // What load_tokenizer(kind(), serialized()) rebuilds this tokenizer from, bit for bit.
  virtual std::string serialized() const = 0;
};

struct TokenizerOptions {
  std::string kind = "bytes";          // data.tokenizer: bytes | sentencepiece
  int64_t vocab_size = 0;              // sentencepiece: pieces including the 4 specials
  std::string model_type = "unigram";  // sentencepiece: unigram | bpe
  bool specials = false;               // bytes: add <pad> <s> </s> (256..258), as translation needs
};

// The tokenizer `options` names; sentencepiece is trained on `training_text` (one sentence per
// entry), deterministically: the same text and options give the same model, bit for bit.
// Throws headlab::Error with one line on bad options or text.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerOptions& options,
                                          const std::vector<std::string>& training_text = {});

// Rebuilds a tokenizer from a checkpoint's or run folder's (kind, serialized) pair. Throws one
// line naming `origin` on an unknown kind or a corrupt model.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& kind, const std::string& serialized,
                                          const std::string& origin);

// The byte tokenizer (what text LMs have always used): vocab 256, or 259 with specials.
std::unique_ptr<Tokenizer> byte_tokenizer(bool specials);

}  // namespace headlab
