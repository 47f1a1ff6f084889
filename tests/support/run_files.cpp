#include "support/run_files.h"

#include <cstring>
#include <fstream>

#include "headlab/io/checkpoint.h"

namespace headlab::test {

std::vector<std::string> metrics_without_timing(const std::filesystem::path& run) {
  std::ifstream in(run / "metrics.csv");
  std::vector<std::string> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    for (int i = 0; i < 2; ++i) line = line.substr(0, line.rfind(','));
    rows.push_back(line);
  }
  return rows;
}

std::map<std::string, std::vector<uint32_t>> checkpoint_tensors(const std::filesystem::path& checkpoint) {
  CheckpointReader reader(checkpoint.string());
  std::map<std::string, std::vector<uint32_t>> tensors;
  for (const std::string& name : reader.names()) {
    if (reader.dtype(name) != ArrayDType::float32) continue;
    const Shape shape = reader.shape(name);
    std::vector<float> values(shape.numel());
    reader.read_into(name, Tensor<float>(values.data(), shape));
    std::vector<uint32_t>& bits = tensors[name];
    bits.resize(values.size());
    std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  }
  return tensors;
}

}  // namespace headlab::test
