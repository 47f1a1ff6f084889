// What a headlab HDF5 file holds: the root attribute headlab_kind, written by CheckpointWriter and
// read by CheckpointReader. This is the one list of kinds (docs/checkpoint-format.md, "File kinds");
// a loader refuses a file of another kind with one line, via CheckpointReader::require_kind.
//   CheckpointWriter w(FileKind::heads);  ...  CheckpointReader(path).require_kind(FileKind::checkpoint);
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace headlab {

enum class FileKind : uint8_t {
  checkpoint,     // a model's parameters and gates, its config and run state (train/checkpointing.h)
  heads,          // heads.h5: per-head scores (headlab analyze)
  attention,      // attention_example_<I>.h5: one example's attention maps (headlab analyze)
  bleu_ablation,  // bleu_ablation.h5: per-sentence BLEU/chrF statistics per masked head (analysis/bleu_ablation.h)
  circuits,       // detectors.h5, ...: circuit analyses (headlab circuits; analysis/head_detectors.h)
};

const char* file_kind_name(FileKind kind);  // the attribute's value: "checkpoint", "heads", ...
std::optional<FileKind> file_kind_from_name(const std::string& name);
std::string known_file_kind_names();  // "checkpoint, heads, attention, bleu_ablation, circuits", for error messages
// What a file of this kind is, for error messages: "a heads file (written by headlab analyze)".
std::string describe_file_kind(FileKind kind);
// The kind as a noun: "a checkpoint", "a heads file", "an attention dump".
const char* file_kind_noun(FileKind kind);

}  // namespace headlab
