// Publisher metadata files of a package schema 2 (publish/publisher_metadata.h).
#include "publish/publisher_metadata.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "skippy/error.h"
#include "util/file.h"
#include "util/sha256.h"

namespace skippy::detail {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr uint64_t kPublisherFileMaxBytes = uint64_t{16} << 20;

std::optional<std::string> role_of_file_name(std::string_view name) {
  if (name == "config.json") return "model_config";
  if (name == "generation_config.json") return "generation_config";
  if (name == "tokenizer_config.json") return "tokenizer_config";
  if (name == "chat_template.jinja") return "chat_template";
  if (name == "hf_quant_config.json") return "hf_quant_config";
  return std::nullopt;
}

// The reference's parse_publisher_dtype.
std::optional<std::string> publisher_dtype(std::string value) {
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.erase(0, 1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  for (auto& c : value) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value == "f16" || value == "fp16" || value == "float16") return "f16";
  if (value == "bf16" || value == "bfloat16") return "bf16";
  if (value == "f32" || value == "fp32" || value == "float32") return "f32";
  if (value == "fp8") return "fp8";
  if (value == "fp8_e4m3" || value == "fp8_e4m3fn") return "fp8_e4m3";
  if (value == "fp8_e5m2") return "fp8_e5m2";
  if (value == "q8_0" || value == "int8") return "q8_0";
  if (value == "q4_0" || value == "int4") return "q4_0";
  return std::nullopt;
}

void merge_dtype(std::optional<V2DtypeDeclaration>& slot, V2DtypeDeclaration d, const std::string& label) {
  if (slot) {
    if (slot->dtype != d.dtype) {
      throw_invalid("conflicting publisher " + label + " declarations: " + slot->dtype + " at " + slot->json_path +
                    " and " + d.dtype + " at " + d.json_path);
    }
    return;
  }
  slot = std::move(d);
}

void apply_defaults(PublisherPlan& plan, const PlannedPublisherFile& f, const fs::path& path, const GgufFile& kvs) {
  const auto& role = f.metadata.role;
  if (role != "model_config" && role != "hf_quant_config") return;
  // Nesting is bounded before it is built: a hostile file of 16 MiB of
  // `{"a":` would otherwise take hundreds of MB to hold.
  constexpr int kMaxDepth = 64;
  const auto bounded = [&](int depth, json::parse_event_t event, json&) -> bool {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= kMaxDepth) {
      throw_invalid(path.string() + ": publisher metadata nests JSON deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    return true;
  };
  const json doc = json::parse(f.contents, bounded, /*allow_exceptions=*/false);
  if (!doc.is_object()) throw_invalid(path.string() + ": publisher metadata must contain a JSON object");
  if (role == "model_config") {
    const std::string arch(kvs.architecture());
    for (const auto& [config_key, suffix] :
         {std::pair<const char*, const char*>{"num_hidden_layers", "block_count"},
          {"hidden_size", "embedding_length"},
          {"num_attention_heads", "attention.head_count"},
          {"num_key_value_heads", "attention.head_count_kv"},
          {"max_position_embeddings", "context_length"}}) {
      const auto it = doc.find(config_key);
      if (it == doc.end() || !it->is_number_unsigned()) continue;
      const auto gguf = kvs.get_uint(arch + "." + suffix);
      if (!gguf) continue;
      if (it->get<uint64_t>() != *gguf) {
        throw_invalid(path.string() + ": publisher config " + config_key + "=" + std::to_string(it->get<uint64_t>()) +
                      " conflicts with GGUF " + arch + "." + suffix + "=" + std::to_string(*gguf));
      }
    }
  }
  auto& defaults = plan.defaults ? *plan.defaults : plan.defaults.emplace();
  if (role == "model_config") {
    for (const char* p : {"/torch_dtype", "/dtype"}) {
      const json::json_pointer ptr(p);
      if (!doc.contains(ptr) || !doc.at(ptr).is_string()) continue;
      if (const auto dt = publisher_dtype(doc.at(ptr).get<std::string>())) {
        merge_dtype(defaults.compute_dtype, {*dt, f.artifact.id, p}, "compute dtype");
      }
      break;  // the first string found decides, as the reference's first_string_at
    }
  }
  for (const char* p : {"/kv_cache_quant_algo", "/kv_cache_dtype", "/kv_cache_scheme",
                        "/quantization_config/kv_cache_quant_algo", "/quantization_config/kv_cache_dtype",
                        "/quantization_config/kv_cache_scheme", "/compression_config/kv_cache_quant_algo",
                        "/compression_config/kv_cache_dtype", "/compression_config/kv_cache_scheme"}) {
    const json::json_pointer ptr(p);
    if (!doc.contains(ptr)) continue;
    const json& v = doc.at(ptr);
    std::optional<std::string> value;
    if (v.is_string()) value = v.get<std::string>();
    else if (v.is_object() && v.contains("dtype") && v["dtype"].is_string()) value = v["dtype"].get<std::string>();
    else if (v.is_object() && v.contains("type") && v["type"].is_string()) value = v["type"].get<std::string>();
    if (!value) continue;
    const auto dt = publisher_dtype(*value);
    if (!dt) throw_invalid(path.string() + ": unsupported publisher KV-cache dtype \"" + *value + "\" at " + p);
    merge_dtype(defaults.kv_cache_dtype, {*dt, f.artifact.id, p}, "KV-cache dtype");
    break;
  }
}

}  // namespace

PublisherPlan plan_publisher_metadata(const std::vector<fs::path>& files, const std::optional<std::string>& repo,
                                      const std::optional<std::string>& revision, const GgufFile& source_kvs) {
  PublisherPlan plan;
  std::set<std::string> ids;
  for (const auto& path : files) {
    const std::string name = path.filename().string();
    const auto role = role_of_file_name(name);
    if (!role) {
      throw_invalid(path.string() + ": unsupported publisher metadata file name \"" + name +
                    "\" (config.json, generation_config.json, tokenizer_config.json, chat_template.jinja or "
                    "hf_quant_config.json)");
    }
    if (!repo || repo->empty()) throw_invalid(path.string() + ": publisher metadata needs the source's repository");
    const bool hex40 = revision && revision->size() == 40 &&
                       std::all_of(revision->begin(), revision->end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
    if (!hex40) {
      throw_invalid(path.string() + ": publisher metadata needs the source's immutable revision (a 40-hex commit), not \"" +
                    revision.value_or("") + "\"");
    }
    PlannedPublisherFile f;
    f.contents = read_small_file(path, kPublisherFileMaxBytes);
    std::string id = "publisher-" + name;
    std::replace(id.begin(), id.end(), '.', '-');
    std::replace(id.begin(), id.end(), '_', '-');
    if (!ids.insert(id).second) throw_invalid(path.string() + ": publisher metadata file name \"" + name + "\" appears more than once");
    f.metadata = {*role, id, *repo, *revision, name};
    f.artifact = {id, "metadata/" + name, f.contents.size(), sha256_hex(f.contents)};
    plan.files.push_back(std::move(f));
    apply_defaults(plan, plan.files.back(), path, source_kvs);
  }
  return plan;
}

}  // namespace skippy::detail
