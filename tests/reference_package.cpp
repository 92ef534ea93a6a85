#include "reference_package.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "util/file.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/model_source.h"
#include "util/sha256.h"

namespace skippy::test {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

enum class Where { kLayer, kEmbeddings, kOutput, kExtra };

// The reference writer's classification (REFERENCE-PACKAGES.md).
Where classify(std::string_view name, uint32_t* layer) {
  auto number_after = [&](std::string_view s) -> std::optional<uint32_t> {
    uint32_t v = 0;
    size_t i = 0;
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) v = v * 10 + static_cast<uint32_t>(s[i] - '0');
    if (i == 0) return std::nullopt;
    return v;
  };
  if (name.starts_with("blk.")) {
    if (auto n = number_after(name.substr(4))) {
      *layer = *n;
      return Where::kLayer;
    }
  }
  if (name.starts_with("cache_")) {
    const auto at = name.rfind("_l");
    if (at != std::string_view::npos) {
      if (auto n = number_after(name.substr(at + 2))) {
        *layer = *n;
        return Where::kLayer;
      }
    }
  }
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Where::kEmbeddings;
  if (name == "output.weight" || name == "output.bias" || name == "output_norm.weight" || name == "output_norm.bias") {
    return Where::kOutput;
  }
  return Where::kExtra;
}

struct Frag {
  std::string rel;
  int32_t stage_index;
  int32_t layer_start, layer_end;
  bool include_embeddings, include_output;
  std::vector<const SourceTensor*> own;
};

std::string case_of(std::string hex, bool upper) {
  if (upper) std::transform(hex.begin(), hex.end(), hex.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return hex;
}

}  // namespace

uint64_t write_reference_package(const fs::path& source, const fs::path& out_dir, const ReferencePackageOptions& o) {
  const auto model = ModelSource::open(source);
  const auto& primary = model.primary();
  const uint32_t layers = model.layer_count();
  const int32_t lc = static_cast<int32_t>(layers);
  std::vector<Frag> frags = {{"shared/metadata.gguf", 0, 0, 0, false, false, {}},
                             {"shared/embeddings.gguf", 1, 0, 0, true, false, {}},
                             {"shared/output.gguf", 2, lc, lc, false, true, {}}};
  for (uint32_t l = 0; l < layers; ++l) {
    char name[64];
    std::snprintf(name, sizeof name, "layers/layer-%03u.gguf", l);
    const int32_t li = static_cast<int32_t>(l);
    frags.push_back({name, 1000 + li, li, li + 1, false, false, {}});
  }
  std::vector<const SourceTensor*> extras;
  bool nextn = false;
  std::vector<uint32_t> nextn_layers;
  for (const auto& t : model.tensors()) {
    uint32_t layer = 0;
    const std::string_view name = t.info->name;
    if (name.find(".nextn.") != std::string_view::npos) {
      nextn = true;
      uint32_t l = 0;
      if (classify(name, &l) == Where::kLayer && std::find(nextn_layers.begin(), nextn_layers.end(), l) == nextn_layers.end()) {
        nextn_layers.push_back(l);
      }
    }
    switch (classify(name, &layer)) {
      case Where::kLayer: frags.at(3 + layer).own.push_back(&t); break;
      case Where::kEmbeddings: frags[1].own.push_back(&t); break;
      case Where::kOutput: frags[2].own.push_back(&t); break;
      case Where::kExtra: extras.push_back(&t); break;
    }
  }

  fs::create_directories(out_dir / "shared");
  fs::create_directories(out_dir / "layers");
  uint64_t extra_copies = 0;
  ojson entries = ojson::array();
  for (const auto& f : frags) {
    GgufWriter w(32);
    for (const auto& kv : primary.kvs()) {
      if (kv.key.starts_with("split.") || kv.key == "general.alignment") continue;
      w.add_kv(std::string(kv.key), kv.value);
    }
    w.add_u32("general.alignment", 32);
    w.add_i32("skippy.slice.stage_index", f.stage_index);
    w.add_i32("skippy.slice.layer_start", f.layer_start);
    w.add_i32("skippy.slice.layer_end", f.layer_end);
    w.add_bool("skippy.slice.include_embeddings", f.include_embeddings);
    w.add_bool("skippy.slice.include_output", f.include_output);
    std::vector<const SourceTensor*> all = f.own;
    all.insert(all.end(), extras.begin(), extras.end());
    extra_copies += extras.size();
    for (const auto* t : all) w.add_tensor_from(model.shards()[t->shard], *t->info);
    AtomicFile out(out_dir / f.rel);
    const std::string sha = w.write(out);
    out.commit();
    entries.push_back({{"path", f.rel},
                       {"tensor_count", all.size()},
                       {"tensor_bytes", w.tensor_bytes()},
                       {"artifact_bytes", w.total_size()},
                       {"sha256", case_of(sha, o.uppercase_digests)}});
  }

  const auto primary_path = fs::absolute(primary.path());
  std::string file = primary.path().filename().string();
  std::string stem = primary.path().stem().string();
  if (const auto split = parse_split_name(primary.path())) stem = fs::path(split->prefix).filename().string();
  ojson files = ojson::array();
  for (const auto& s : model.shards()) files.push_back({{"path", s.path().filename().string()}, {"size_bytes", nullptr}, {"sha256", nullptr}});
  ojson m;
  m["schema_version"] = 1;
  m["model_id"] = o.model_id;
  m["source_model"] = {{"path", primary_path.string()},
                       {"sha256", case_of(sha256_file(primary.path()), o.uppercase_digests)},
                       {"repo", o.repo},
                       {"revision", o.revision},
                       {"primary_file", file},
                       {"canonical_ref", o.repo + "@" + o.revision + "/" + file},
                       {"distribution_id", stem},
                       {"files", files}};
  m["format"] = "layer-package";
  m["layer_count"] = layers;
  if (o.activation_width) {
    if (auto w = model.activation_width()) m["activation_width"] = *w;
  }
  if (nextn) {
    std::sort(nextn_layers.begin(), nextn_layers.end());
    ojson fields = {{"type", "native-mtp"}, {"prediction_depth", 1}, {"layer_indices", nextn_layers}};
    ojson strategy = fields;
    strategy["proposer"] = "mtp";
    strategy["window_policy"] = {{"default", "fixed"}, {"initial_window", 1}, {"min_window", 1}, {"max_window", 1}};
    m["generation"] = {{"speculative_decoding", {{"default", "mtp"}, {"proposers", {{"mtp", fields}}}, {"strategies", {{"mtp", strategy}}}}}};
  }
  m["shared"] = {{"metadata", entries[0]}, {"embeddings", entries[1]}, {"output", entries[2]}};
  ojson layer_entries = ojson::array();
  for (uint32_t l = 0; l < layers; ++l) {
    ojson e = {{"layer_index", l}};
    for (const auto& [k, v] : entries[3 + l].items()) e[k] = v;
    layer_entries.push_back(std::move(e));
  }
  m["layers"] = std::move(layer_entries);
  m["skippy_abi_version"] = "0.1.39";
  m["created_at_unix_secs"] = 1790000000;
  const std::string text = m.dump(2) + "\n";
  write_file_atomic(out_dir / "model-package.json", text);
  return extra_copies - extras.size();  // copies beyond the first of each
}

}  // namespace skippy::test
