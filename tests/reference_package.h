// A generator of packages in the reference implementation's dialect
// (mesh-llm's skippy-model-package), written from
// ../shared/docs/REFERENCE-PACKAGES.md and nothing of ours but the GGUF
// writer: 3-digit layer names, global "extras" repeated in every fragment,
// every source KV in every fragment, alignment 32, skippy.slice.* keys,
// ABI 0.1.39, null source file sizes and digests, no README. Tests use it to
// prove our consumer reads what the packages already on the Hub look like.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace skippy::test {

struct ReferencePackageOptions {
  std::string model_id = "org/Model-GGUF:Q8_0";
  std::string repo = "org/Model-GGUF";
  std::string revision = "0123456789abcdef0123456789abcdef01234567";
  bool activation_width = true;      // older packages lack it
  bool uppercase_digests = false;    // the runtime accepts either case
};

// Writes the package for `source` (a .gguf, any shard of a split model)
// into `out_dir` (created). Returns how many repeated copies of global
// extras it wrote beyond the first of each (what a full-range stage view
// merges away).
uint64_t write_reference_package(const std::filesystem::path& source, const std::filesystem::path& out_dir,
                                 const ReferencePackageOptions& options = {});

}  // namespace skippy::test
