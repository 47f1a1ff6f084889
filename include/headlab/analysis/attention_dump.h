// The attention dump: every head's attention on one example, as `headlab analyze --dump-example I`
// (or --prompt) writes it and `headlab report` reads it back; src/plot/plot_heads.py reads the CSV
// too, and docs/analysis.md describes it for users. Files in a folder, named by the stem
// attention_example_<name>, <name> being the example's index in the split or "prompt":
//   <stem>.csv         layer,head,query,k0..k{T-1}: one attention row per line (%.5g), T rows for
//                      each head a layer has, layer by layer (0 for masked keys): the
//                      self-attention (an encoder_decoder's decoder's);
//   <stem>_tokens.csv  position,token,text,real,target,label,gold_head,gold_antecedent,is_delimiter:
//                      text is Dataset::token_label; real = 0 for padding (from key_padding, else
//                      the pad token); label on the first line only; empty where the task has no
//                      such field;
//   <stem>.h5          FileKind::attention: attention float64 [L, H, T, T] (H = the widest layer's
//                      heads, NaN rows for heads a layer lacks), tokens, targets, labels, gold_head,
//                      gold_antecedent (int64), key_padding, is_delimiter (uint8) as the task has
//                      them; attributes contents, checkpoint, split ("prompt" for a prompt), example.
// An encoder_decoder's dump adds its other two kinds beside these, so that a reader of the files
// above reads its decoder's self-attention unchanged (S = the source's length, padding included):
//   <stem>_encoder.csv        the encoder's self-attention, as <stem>.csv with S queries and keys;
//   <stem>_cross.csv          the cross-attention, T target queries x S source keys (k0..k{S-1});
//   <stem>_source_tokens.csv  position,token,text,real of the source;
//   <stem>.h5                 also encoder_attention [Le, He, S, S], cross_attention [L, Hc, T, S]
//                             (float64), source_tokens (int64), source_padding (uint8).
// When the example is a verse of the Bible's translation data (Strong's tags), its gold word
// alignment on the tokens too (word_alignment.h: row t is the query that predicts target token t,
// as analyze --alignment scores heads; a link joins two words sharing a Strong's number):
//   <stem>_gold_alignment.csv target_position,source_position: one line per gold cell;
//   <stem>.h5                 also gold_alignment [T, S] (uint8, 1 = a gold cell).
// Other examples (plain parallel files, prompts, a verse cut to the caps) have neither.
// The reader takes the .h5 when there is one (exact) and the CSV otherwise (a hand-written dump).
//   const AttentionExample a = attention_example(model, data, split, 3, B);
//   write_attention_dump(dir, "3", a, data, -1, ckpt, "val", example_gold_alignment(data, split, 3, B, a.row));
//   for (const std::string& name : attention_dump_names(dir)) use(read_attention_dump(dir, name));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "headlab/analysis/heads.h"
#include "headlab/data/batch.h"

namespace headlab {

std::string attention_dump_stem(const std::string& name);  // "attention_example_" + name

// Writes the three files into `dir` (which must exist). `pad_token` marks padding in rows without
// key_padding (AnalysisOptions::pad_token; -1 = none); `checkpoint` and `split` are provenance;
// `gold_alignment` [T, S] (example_gold_alignment) adds its files, empty: none.
void write_attention_dump(const std::string& dir, const std::string& name, const AttentionExample& example,
                          const Dataset& dataset, int32_t pad_token, const std::string& checkpoint,
                          const std::string& split, const std::vector<uint8_t>& gold_alignment = {});

// The gold alignment of example `example` of a split on its row's tokens (`row`, the row
// attention_example took: row example % batch_size of batch example / batch_size), [T, S] as
// the row is; empty when there is none: not translation data, a pair without Strong's tags, or a
// verse whose tokens do not decode back to its words (cut to the caps).
std::vector<uint8_t> example_gold_alignment(const Dataset& dataset, Split split, int64_t example, int64_t batch_size,
                                            const Batch& row);

struct AttentionDump {
  std::string name;                        // "3", "prompt"
  AttentionExample attention;              // sizes, layer_heads, probs; row.tokens from the .h5 only
  std::vector<std::string> token_labels;   // seq_len entries: _tokens.csv's text, else the token ids
  std::vector<std::string> source_labels;  // S entries (encoder_decoder), the same from _source_tokens.csv
  std::vector<uint8_t> gold_alignment;     // [T, S], 1 = a gold cell; empty: the dump has none
};
// One dump of `dir` (row.tokens and row.source_tokens from the .h5 only); a file that is not one (wrong shape, a cell
// that is not a count, layer and head numbers its rows cannot back) is one line naming it.
AttentionDump read_attention_dump(const std::string& dir, const std::string& name);

// The names of the dumps in `dir` (a .h5 or .csv), numbered ones in order, then "prompt".
std::vector<std::string> attention_dump_names(const std::string& dir);

}  // namespace headlab
