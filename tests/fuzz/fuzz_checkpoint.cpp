// libFuzzer target: the checkpoint reader (src/io/checkpoint_reader.cpp) and the training-checkpoint
// loader on top of it (src/train/checkpointing.cpp), on HDF5 files: the input is written to a
// scratch file and opened by path, as `headlab eval/info/train --resume` open one. Seeds are
// real checkpoints of tiny models (tests/fuzz/corpus/fuzz_checkpoint); the mutations truncate,
// flip bits, and change shapes, types and attributes. A file that opens is read completely:
// every dataset with its own dtype, every root attribute as string, integer and float, and,
// when it holds a config, the model that config describes is built and loaded from it. No size
// limit is needed: checkpoint_config refuses a config whose model's tensors the file does not
// hold, name and shape, before anything is allocated (a mutated config once described a model
// of billions of parameters).
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "headlab/io/checkpoint.h"
#include "headlab/nn/model.h"
#include "headlab/train/checkpointing.h"
#include "headlab/train/setup.h"

namespace {

void read_everything(const headlab::CheckpointReader& r) {
  using headlab::ArrayDType;
  for (const std::string& name : r.names()) {
    (void)r.shape(name);
    switch (r.dtype(name)) {
      case ArrayDType::float32: {
        std::vector<float> values(static_cast<size_t>(r.shape(name).numel()));
        r.read_into(name, headlab::Tensor<float>(values.data(), r.shape(name)));
        break;
      }
      case ArrayDType::float64:
        (void)r.read_array<double>(name);
        break;
      case ArrayDType::int64:
        (void)r.read_array<int64_t>(name);
        break;
      case ArrayDType::uint64:
        (void)r.read_array<uint64_t>(name);
        break;
      case ArrayDType::uint8:
        (void)r.read_array<uint8_t>(name);
        break;
      case ArrayDType::unsupported:
        headlab::fuzz::expect_only_headlab_errors([&] { (void)r.read_array<double>(name); });
        break;
    }
  }
  for (const std::string& key : r.attr_names()) {
    headlab::fuzz::expect_only_headlab_errors([&] { (void)r.string_attr(key); });
    headlab::fuzz::expect_only_headlab_errors([&] { (void)r.int_attr(key); });
    headlab::fuzz::expect_only_headlab_errors([&] { (void)r.double_attr(key); });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headlab;
  const std::string path = (fuzz::scratch_dir() / "checkpoint.h5").string();
  fuzz::write_bytes(path, {reinterpret_cast<const char*>(data), size});
  fuzz::expect_only_headlab_errors([&] {
    const CheckpointReader r(path);
    read_everything(r);
  });
  fuzz::expect_only_headlab_errors([&] {
    const Config config = checkpoint_config(path);
    Model<float> model(model_spec(config));
    (void)load_training_checkpoint(path, model, nullptr);
  });
  return 0;
}
