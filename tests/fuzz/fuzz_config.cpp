// libFuzzer target: a run config (src/io/config.cpp, config_schema.cpp) and its --set overrides.
// Input: the TOML text, then any number of NUL-separated overrides ("model.n_heads=8"), as
// `headlab train FILE --set ...` passes them. A config that loads must also round-trip through
// to_toml (config.h promises parse_config_text(to_toml(c)) == c), print every key with
// config_value, and give a model spec whose parameter count is computed without overflow or a
// crash (what `headlab sweep` and `info` do next).
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "headlab/io/config.h"
#include "headlab/nn/model.h"
#include "headlab/train/setup.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace headlab;
  const std::vector<std::string_view> parts = fuzz::split({reinterpret_cast<const char*>(data), size}, {"\0", 1});
  const std::string toml(parts[0]);
  const std::vector<std::string> overrides(parts.begin() + 1, parts.end());
  fuzz::expect_only_headlab_errors([&] {
    const Config config = parse_config_text(toml, "fuzz.toml", overrides);
    const Config again = parse_config_text(to_toml(config), "to_toml");
    if (!(again == config)) {
      std::fprintf(stderr, "fuzz: to_toml does not round-trip:\n%s\n", to_toml(config).c_str());
      std::abort();
    }
    for (const std::string& key : config_keys()) (void)config_value(config, key);
    const ModelSpec spec = model_spec(config);
    validate(spec);
    for (const ParamSpec& p : parameter_specs(spec)) (void)p.shape.numel();
  });
  return 0;
}
