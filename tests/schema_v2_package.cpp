#include "schema_v2_package.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "util/file.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/model_source.h"
#include "util/sha256.h"

namespace skippy::test {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

template <class T>
std::vector<uint64_t> widen(const std::vector<T>& v) {
  return std::vector<uint64_t>(v.begin(), v.end());
}

struct PlannedPart {
  std::string id;
  std::string path;
  std::vector<const SourceTensor*> tensors;
};

ojson artifact_json(const std::string& id, const std::string& path, const fs::path& file) {
  return {{"id", id}, {"path", path}, {"byte_size", fs::file_size(file)}, {"sha256", sha256_file(file)}};
}

// The reference's field order, from its struct declarations: one list in
// which every struct's fields appear in their declared order (the structs
// share no pair of fields in opposite orders). Objects under "proposers",
// "strategies", "profiles" and "logit_bias" are maps (BTreeMap): their keys
// sort bytewise instead.
constexpr std::string_view kFieldOrder[] = {
    "schema_version", "package_id", "model_id", "source_model", "enabled", "format", "layer_count", "artifact_catalog",
    "entries", "sidecars", "publisher_metadata", "publisher_defaults", "compute_dtype", "kv_cache_dtype", "dtype",
    "generation", "request_defaults", "selection", "profiles", "speculative_decoding", "default",
    "reasoning_enabled", "reasoning_disabled", "initial_window",
    "min_window", "max_window", "pipeline_depth", "proposers", "strategies", "type", "proposer", "prediction_depth",
    "layer_indices", "ngram_min", "ngram_max", "max_proposal_tokens", "history_scope", "primary", "extender",
    "extension_policy", "max_tokens", "stop", "temperature", "top_p", "top_k", "min_p", "typical_p", "top_nsigma",
    "presence_penalty", "frequency_penalty", "seed", "logit_bias", "repeat_penalty", "repeat_last_n",
    "dynatemp_range", "dynatemp_exponent", "dry", "multiplier", "base", "allowed_length", "penalty_last_n",
    "sequence_breakers", "xtc", "probability", "threshold", "mirostat_mode", "mirostat_entropy",
    "mirostat_learning_rate", "samplers", "sampler_sequence", "ignore_eos", "reasoning", "budget",
    "provenance", "initial_tokens", "tail_backoff_proposals", "window_policy",
    "native_abi_version", "generator_version", "created_at_unix_secs", "id", "kind", "role", "artifact_id",
    "json_path", "name", "path", "byte_size", "sha256", "metadata_artifact_id", "repo", "source_repo", "revision",
    "source_revision", "source_path", "file", "section", "url", "primary_file", "canonical_ref",
    "distribution_id", "files"};

size_t field_rank(const std::string& key) {
  const auto it = std::find(std::begin(kFieldOrder), std::end(kFieldOrder), key);
  return static_cast<size_t>(it - std::begin(kFieldOrder));
}

ojson in_declared_order(const ojson& j, bool is_map) {
  if (j.is_array()) {
    ojson out = ojson::array();
    for (const auto& e : j) out.push_back(in_declared_order(e, false));
    return out;
  }
  if (!j.is_object()) return j;
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
    return is_map ? a < b : field_rank(a) < field_rank(b);
  });
  ojson out = ojson::object();
  for (const auto& k : keys) out[k] = in_declared_order(j.at(k), k == "proposers" || k == "strategies" || k == "profiles" || k == "logit_bias");
  return out;
}

}  // namespace

std::string schema_v2_package_id(const ojson& given) {
  ojson n = in_declared_order(given, false);
  n["package_id"] = "";
  n["created_at_unix_secs"] = 0;
  auto& files = n["source_model"]["files"];
  std::stable_sort(files.begin(), files.end(), [](const ojson& a, const ojson& b) {
    return a["path"].get<std::string>() < b["path"].get<std::string>();
  });
  auto& entries = n["artifact_catalog"]["entries"];
  std::stable_sort(entries.begin(), entries.end(), [](const ojson& a, const ojson& b) {
    return a["id"].get<std::string>() < b["id"].get<std::string>();
  });
  if (n.contains("publisher_metadata")) {
    // The reference's derived Ord: the role by its declaration rank first.
    const std::vector<std::string> roles = {"model_config", "generation_config", "tokenizer_config", "chat_template",
                                            "hf_quant_config"};
    auto key = [&](const ojson& p) {
      const auto rank = std::find(roles.begin(), roles.end(), p["role"].get<std::string>()) - roles.begin();
      return std::make_tuple(rank, p["artifact_id"].get<std::string>(), p["source_repo"].get<std::string>(),
                             p["source_revision"].get<std::string>(), p["source_path"].get<std::string>());
    };
    auto& pm = n["publisher_metadata"];
    std::stable_sort(pm.begin(), pm.end(), [&](const ojson& a, const ojson& b) { return key(a) < key(b); });
  }
  if (n.contains("sidecars")) {
    auto key = [](const ojson& s) {
      return std::make_tuple(s["kind"].get<std::string>(), s.contains("name") ? 1 : 0,
                             s.contains("name") ? s["name"].get<std::string>() : std::string(),
                             s["artifact_id"].get<std::string>());
    };
    auto& sc = n["sidecars"];
    std::stable_sort(sc.begin(), sc.end(), [&](const ojson& a, const ojson& b) { return key(a) < key(b); });
  }
  return "sha256:" + sha256_hex(n.dump());
}

SchemaV2Package write_schema_v2_package(const fs::path& source, const fs::path& out_dir, const SchemaV2Options& o) {
  const auto model = ModelSource::open(source);
  const GgufFile& src = model.primary();
  const uint32_t layers = model.layer_count();
  SchemaV2Package pkg;
  pkg.dir = out_dir;
  fs::create_directories(out_dir / "shared");
  fs::create_directories(out_dir / "layers");

  // The reference's layout: common (every tensor without a layer), one
  // artifact per layer. Ids unlike the paths: layer L is "q-<999-L>".
  std::vector<PlannedPart> parts;
  parts.push_back({"m-common", "shared/common.gguf", {}});
  for (uint32_t l = 0; l < layers; ++l) {
    char path[64];
    std::snprintf(path, sizeof path, "layers/layer-%05u.gguf", l);
    parts.push_back({"q-" + std::to_string(999 - l), path, {}});
  }
  for (const auto& t : model.tensors()) {
    if (t.placement.role == TensorRole::kLayer) {
      parts.at(1 + t.placement.layer).tensors.push_back(&t);
    } else {
      parts[0].tensors.push_back(&t);
    }
  }
  if (o.split_first_layer && layers > 0) {
    PlannedPart whole = parts[1];
    const size_t half = whole.tensors.size() / 2;
    PlannedPart a{whole.id + "-b", "layers/layer-00000-part00.gguf",
                  {whole.tensors.begin(), whole.tensors.begin() + static_cast<std::ptrdiff_t>(half)}};
    PlannedPart b{whole.id + "-a", "layers/layer-00000-part01.gguf",
                  {whole.tensors.begin() + static_cast<std::ptrdiff_t>(half), whole.tensors.end()}};
    parts.erase(parts.begin() + 1);
    parts.insert(parts.begin() + 1, {a, b});
  }

  // Payload parts: a GGUF each, with the architecture and alignment.
  std::map<std::string, ojson> artifacts;  // id -> entry
  for (const auto& p : parts) {
    GgufWriter w(o.payload_alignment);
    w.add_string("general.architecture", src.architecture());
    w.add_u32("general.alignment", o.payload_alignment);
    for (const auto* t : p.tensors) w.add_tensor_from(model.shards()[t->shard], *t->info);
    AtomicFile out(out_dir / p.path);
    w.write(out);
    out.commit();
    for (const auto& wt : w.tensors()) {
      pkg.tensors[wt.name] = {p.id, w.data_offset() + wt.offset, wt.bytes};
    }
    artifacts[p.id] = artifact_json(p.id, p.path, out_dir / p.path);
    pkg.artifact_path[p.id] = p.path;
  }
  // Part index: the rank of the id among payload artifacts.
  std::vector<std::string> ranked;
  for (const auto& p : parts) ranked.push_back(p.id);
  std::sort(ranked.begin(), ranked.end());

  // The carrier: source KVs but split.*, the whole directory, locators.
  SchemaV2Locators& loc = pkg.locators;
  for (const auto& t : model.tensors()) {
    const auto& where = pkg.tensors.at(std::string(t.info->name));
    loc.names.emplace_back(t.info->name);
    loc.part.push_back(static_cast<uint32_t>(std::find(ranked.begin(), ranked.end(), where.artifact_id) - ranked.begin()));
    loc.offset.push_back(where.offset);
    loc.size.push_back(where.size);
    loc.alignment.push_back(o.payload_alignment);
  }
  if (o.edit_locators) o.edit_locators(loc);
  {
    GgufWriter w(src.alignment());
    for (const auto& kv : src.kvs()) {
      if (kv.key.starts_with("split.")) continue;
      w.add_kv(std::string(kv.key), kv.value);
    }
    if (!w.has_kv("general.alignment")) w.add_u32("general.alignment", src.alignment());
    w.add_bool("skippy.package.metadata_only", o.carrier_metadata_only);
    w.add_u32("skippy.package.part_count", static_cast<uint32_t>(parts.size()));
    w.add_u32("skippy.package.locator_schema", o.carrier_locator_schema);
    w.add_array("skippy.package.tensor_part", GgufType::kUint32, widen(loc.part));
    w.add_array("skippy.package.tensor_offset", o.carrier_offsets_as_u32 ? GgufType::kUint32 : GgufType::kUint64, loc.offset);
    w.add_array("skippy.package.tensor_size", GgufType::kUint64, loc.size);
    w.add_array("skippy.package.tensor_alignment", GgufType::kUint32, widen(loc.alignment));
    for (const auto& t : model.tensors()) w.add_tensor_from(model.shards()[t.shard], *t.info);
    std::vector<uint8_t> bytes = w.header();  // the directory, padded to the data offset: no payload
    if (o.carrier_directory_offsets_zero) {
      GgufLimits directory;
      directory.directory_only = true;
      const auto parsed = GgufFile::parse(bytes, "carrier", directory);
      for (const auto& t : parsed.tensors()) {
        // name length (8), name, n_dims (4), dims (8 each), type (4), then the offset
        const uint64_t at = t.info_offset + 8 + t.name.size() + 4 + 8 * t.ne.size() + 4;
        std::memset(bytes.data() + at, 0, 8);
      }
    }
    bytes.resize(bytes.size() + o.carrier_trailing_bytes, 0);
    write_file_atomic(out_dir / "shared/metadata.gguf", std::string(bytes.begin(), bytes.end()));
    artifacts["zz-carrier"] = artifact_json("zz-carrier", "shared/metadata.gguf", out_dir / "shared/metadata.gguf");
    pkg.artifact_path["zz-carrier"] = "shared/metadata.gguf";
  }
  ojson sidecars = ojson::array();
  fs::create_directories(out_dir / "projectors");
  for (size_t i = 0; i < o.projectors.size(); ++i) {
    const std::string id = "mm-" + std::to_string(7 - i);
    const std::string path = "projectors/projector-0000" + std::to_string(i) + ".gguf";
    fs::copy_file(o.projectors[i], out_dir / path, fs::copy_options::overwrite_existing);
    artifacts[id] = artifact_json(id, path, out_dir / path);
    pkg.artifact_path[id] = path;
    sidecars.push_back({{"kind", "mmproj"}, {"artifact_id", id}, {"name", "vision-" + std::to_string(i)}});
  }

  // The catalog order: layers last to first, the carrier, then the rest.
  ojson entries = ojson::array();
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (it->id == "m-common") continue;
    entries.push_back(artifacts.at(it->id));
  }
  entries.push_back(artifacts.at("zz-carrier"));
  entries.push_back(artifacts.at("m-common"));
  for (const auto& s : sidecars) entries.push_back(artifacts.at(s["artifact_id"].get<std::string>()));

  const std::string file = source.filename().string();
  const std::string digest = sha256_file(source);
  ojson root;
  root["schema_version"] = 2;
  root["package_id"] = "";
  root["model_id"] = o.model_id;
  root["source_model"] = {{"sha256", digest},
                          {"metadata_artifact_id", "zz-carrier"},
                          {"repo", o.repo},
                          {"revision", o.revision},
                          {"primary_file", file},
                          {"canonical_ref", "hf://" + o.repo + "@" + o.revision + "/" + file},
                          {"distribution_id", source.stem().string()},
                          {"files", ojson::array()}};
  // Every shard of the source, listed last to first (the id sorts them).
  for (auto it = model.shards().rbegin(); it != model.shards().rend(); ++it) {
    const fs::path& shard = it->path();
    root["source_model"]["files"].push_back({{"path", shard.filename().string()},
                                             {"byte_size", fs::file_size(shard)},
                                             {"sha256", shard == source ? digest : sha256_file(shard)}});
  }
  root["format"] = "gguf";
  root["layer_count"] = layers;
  root["artifact_catalog"] = {{"entries", entries}};
  if (!sidecars.empty()) root["sidecars"] = sidecars;
  // The reference writer's one generation shape: a native-mtp strategy when
  // <arch>.nextn_predict_layers is 1 and blk.<layer_count-1>.nextn.* exist.
  const auto nextn = src.get_uint(std::string(src.architecture()) + ".nextn_predict_layers");
  bool nextn_tensors = false;
  for (const auto& t : model.tensors()) {
    nextn_tensors |= std::string_view(t.info->name).starts_with("blk." + std::to_string(layers - 1) + ".nextn.");
  }
  if (nextn == 1u && nextn_tensors) {
    root["generation"] = {
        {"speculative_decoding",
         {{"default", "mtp"},
          {"strategies",
           {{"mtp",
             {{"type", "native-mtp"},
              {"prediction_depth", 1},
              {"layer_indices", {layers - 1}},
              {"window_policy", {{"default", "fixed"}, {"initial_window", 1}, {"min_window", 1}, {"max_window", 1}}}}}}}}}};
  }
  root["native_abi_version"] = "0.1.41";
  root["generator_version"] = "0.76.1";
  root["created_at_unix_secs"] = 1790000000;
  root["package_id"] = schema_v2_package_id(root);
  if (o.edit_root) {
    o.edit_root(root);
    if (o.recompute_id_after_edit) root["package_id"] = schema_v2_package_id(root);
  }
  write_file_atomic(out_dir / "model-package.json", root.dump(2) + "\n");
  pkg.root = root;
  return pkg;
}

}  // namespace skippy::test
