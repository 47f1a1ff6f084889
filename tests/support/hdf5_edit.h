// Editing a checkpoint behind headlab's back, to make the files older builds wrote:
//   delete_root_attrs(path, {"headlab_commit"});  // as written before provenance was recorded
//   set_root_string_attr(path, "headlab_kind", "checkpoint");  // as heads.h5 was before file kinds
#pragma once

#include <string>
#include <vector>

namespace headlab::test {

// Removes the named attributes from the root group of the HDF5 file at `path` (each must exist).
void delete_root_attrs(const std::string& path, const std::vector<std::string>& keys);
// Replaces (or adds) a variable-length UTF-8 string attribute on the root group, as headlab writes them.
void set_root_string_attr(const std::string& path, const std::string& key, const std::string& value);

}  // namespace headlab::test
