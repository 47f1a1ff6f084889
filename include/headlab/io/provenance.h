// What built this binary, recorded wherever headlab writes a result so that the result can be
// traced back to the code: `headlab --version`, the comment lines heading a run's config.toml, and
// root attributes of every HDF5 file headlab writes (docs/checkpoint-format.md).
//   for (const ProvenanceField& f : provenance()) std::printf("%-12s %s\n", f.label, f.value.c_str());
// Files written before these fields existed lack them: readers show them when present and never
// require them.
#pragma once

#include <string>
#include <vector>

namespace headlab {

class CheckpointReader;

struct ProvenanceField {
  const char* key;    // "headlab_commit": the HDF5 attribute and the name in config.toml's header
  const char* label;  // "commit": as --version and info print it
  std::string value;  // "45dae92-dirty" (git describe at build time; "unknown" outside a git checkout)
};

// headlab_version, headlab_commit, headlab_build_type, blis_kernels (the BLIS kernel set in use,
// which depends on the machine as much as on the build), in this order.
const std::vector<ProvenanceField>& provenance();

// One field's value by key ("headlab_commit"); throws for an unknown key.
const std::string& provenance_value(const std::string& key);

// The fields above as TOML comment lines ("# headlab_commit = \"45dae92\""), heading config.toml.
std::string provenance_comment();

// The fields `file` records, in the order above; empty for a file written before they existed.
std::vector<ProvenanceField> recorded_provenance(const CheckpointReader& file);

}  // namespace headlab
