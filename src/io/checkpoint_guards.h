// Checks that keep a corrupt file from crashing the HDF5 library inside this process (internal
// to src/io; found by tests/fuzz/fuzz_checkpoint, docs/reliability.md). The other guard,
// CheckpointReader::probe_in_child, is defined in checkpoint_guards.cpp too.
//   const std::string problem = file_layout_problem(path, file_size);  // "" when nothing is wrong
#pragma once

#include <cstddef>
#include <string>

namespace headlab {

// What is wrong with the layout of the file at `path`, `size` bytes long, seen on its bytes before
// HDF5 opens it: cut short of the end its superblock records, or a global heap (where
// variable-length string attributes live) that claims more than it holds. "" when nothing is (or
// the file cannot be mapped: H5Fopen reports that).
std::string file_layout_problem(const std::string& path, size_t size);

}  // namespace headlab
