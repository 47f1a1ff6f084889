// Reading what a run folder holds, for tests that compare two runs bit for bit:
//   CHECK(metrics_without_timing(a) == metrics_without_timing(b));
//   CHECK(checkpoint_tensors(a / "checkpoints/step_00000012.h5") == checkpoint_tensors(...));
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace headlab::test {

// RUN/metrics.csv's header and rows as CSV lines without the timing columns (tokens_per_s,
// elapsed_s), which are the only ones that differ between equal trainings.
std::vector<std::string> metrics_without_timing(const std::filesystem::path& run);

// Every float32 dataset of a checkpoint (parameters, optimizer moments), as raw bits by name.
std::map<std::string, std::vector<uint32_t>> checkpoint_tensors(const std::filesystem::path& checkpoint);

}  // namespace headlab::test
