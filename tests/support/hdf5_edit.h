// Editing a checkpoint behind headlab's back, to make the files older builds wrote:
//   delete_root_attrs(path, {"headlab_commit"});  // as written before provenance was recorded
#pragma once

#include <string>
#include <vector>

namespace headlab::test {

// Removes the named attributes from the root group of the HDF5 file at `path` (each must exist).
void delete_root_attrs(const std::string& path, const std::vector<std::string>& keys);

}  // namespace headlab::test
