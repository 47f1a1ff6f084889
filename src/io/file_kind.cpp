#include "headlab/io/file_kind.h"

namespace headlab {

namespace {
struct KindInfo {
  FileKind kind;
  const char* name;
  const char* noun;
  const char* written_by;
};
// In FileKind's order. Files written before kinds were told apart say "checkpoint" whatever they
// hold (heads.h5 and attention dumps too), and read as they did.
constexpr KindInfo kKinds[] = {
    {FileKind::checkpoint, "checkpoint", "a checkpoint", "headlab train or prune"},
    {FileKind::heads, "heads", "a heads file", "headlab analyze"},
    {FileKind::attention, "attention", "an attention dump", "headlab analyze --dump-example or --prompt"},
    {FileKind::bleu_ablation, "bleu_ablation", "a BLEU ablation file", "headlab analyze's BLEU ablation"},
    {FileKind::circuits, "circuits", "a circuits file", "headlab circuits"},
};

const KindInfo& info(FileKind kind) {
  return kKinds[static_cast<int>(kind)];
}
}  // namespace

const char* file_kind_name(FileKind kind) {
  return info(kind).name;
}

const char* file_kind_noun(FileKind kind) {
  return info(kind).noun;
}

std::string describe_file_kind(FileKind kind) {
  return std::string(info(kind).noun) + " (written by " + info(kind).written_by + ")";
}

std::optional<FileKind> file_kind_from_name(const std::string& name) {
  for (const KindInfo& k : kKinds)
    if (name == k.name) return k.kind;
  return std::nullopt;
}

std::string known_file_kind_names() {
  std::string out;
  for (const KindInfo& k : kKinds) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

}  // namespace headlab
