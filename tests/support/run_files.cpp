#include "support/run_files.h"

#include <cstring>

#include "headlab/io/checkpoint.h"
#include "headlab/io/csv.h"

namespace headlab::test {

std::vector<std::string> metrics_without_timing(const std::filesystem::path& run) {
  const CsvTable table = read_csv(run / "metrics.csv");
  const size_t tokens_per_s = table.column("tokens_per_s"), elapsed_s = table.column("elapsed_s");
  auto without_timing = [&](const std::vector<std::string>& fields) {
    std::vector<std::string> kept;
    for (size_t c = 0; c < fields.size(); ++c)
      if (c != tokens_per_s && c != elapsed_s) kept.push_back(fields[c]);
    return csv_line(kept);
  };
  std::vector<std::string> rows = {without_timing(table.header)};
  for (const std::vector<std::string>& row : table.rows) rows.push_back(without_timing(row));
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
