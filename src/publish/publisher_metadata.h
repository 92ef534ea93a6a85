// Publisher metadata files for a package schema 2 (write-package --schema 2
// --publisher-metadata, convert-package --to 2 --publisher-metadata): the
// reference writer's rules (mesh-llm package_v2.rs), planned before anything
// is written.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "skippy/gguf.h"
#include "skippy/manifest_v2.h"

namespace skippy::detail {

struct PlannedPublisherFile {
  V2PublisherMetadata metadata;  // role from the file name, the source's repo and revision
  V2Artifact artifact;           // metadata/<name>, id publisher-<name with '.' and '_' as '-'>
  std::string contents;          // the file's bytes (small: configs and templates)
};

struct PublisherPlan {
  std::vector<PlannedPublisherFile> files;
  // Derived from a model_config (torch_dtype / dtype: compute_dtype) and a
  // model_config or hf_quant_config (kv_cache_* paths: kv_cache_dtype);
  // present (maybe empty) as soon as one such file is given, as the
  // reference writes it.
  std::optional<V2PublisherDefaults> defaults;
};

// Refuses (Error kInvalidInput, naming the file) a file name that is not one
// of config.json, generation_config.json, tokenizer_config.json,
// chat_template.jinja, hf_quant_config.json, the same name twice, a source
// without a repository or a 40-hex revision, a config that is not a JSON
// object, a model_config whose geometry (num_hidden_layers, hidden_size,
// num_attention_heads, num_key_value_heads, max_position_embeddings)
// contradicts the GGUF's KVs, a KV-cache dtype it cannot name, and
// conflicting dtype declarations.
PublisherPlan plan_publisher_metadata(const std::vector<std::filesystem::path>& files,
                                      const std::optional<std::string>& repo,
                                      const std::optional<std::string>& revision, const GgufFile& source_kvs);

}  // namespace skippy::detail
