#include <iostream>

#include "cli.h"
#include "skippy/model_source.h"

namespace skippy::cli {
namespace {

nlohmann::json totals_json(const RoleTotals& t) {
  return {{"tensor_count", t.tensor_count}, {"tensor_bytes", t.tensor_bytes}};
}

nlohmann::json summary_json(const std::string& file, const ModelSummary& s) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < s.layers.size(); ++i) {
    layers.push_back({{"layer_index", i}, {"tensor_count", s.layers[i].tensor_count},
                      {"tensor_bytes", s.layers[i].tensor_bytes}});
  }
  nlohmann::json types = nlohmann::json::object();
  for (const auto& [name, t] : s.by_type) types[name] = totals_json(t);
  nlohmann::json j = {
      {"kind", "gguf"},
      {"file", file},
      {"architecture", s.architecture},
      {"layer_count", s.layer_count},
      {"activation_width", s.activation_width ? nlohmann::json(*s.activation_width) : nlohmann::json(nullptr)},
      {"tensor_count", s.tensor_count},
      {"tensor_bytes", s.tensor_bytes},
      {"file_bytes", s.file_bytes},
      {"gguf_version", s.gguf_version},
      {"alignment", s.alignment},
      {"roles",
       {{"embeddings", totals_json(s.embeddings)},
        {"output", totals_json(s.output)},
        {"globals", totals_json(s.globals)},
        {"layers", layers}}},
      {"quantization_types", types},
  };
  if (!s.shards.empty()) j["shards"] = s.shards;
  return j;
}

void print_human(const std::string& file, const ModelSummary& s) {
  auto& o = std::cout;
  o << file << "\n";
  o << "  architecture      " << (s.architecture.empty() ? "(none)" : s.architecture) << "\n";
  o << "  layers            " << s.layer_count << "\n";
  o << "  activation width  " << (s.activation_width ? std::to_string(*s.activation_width) : "(unknown)") << "\n";
  o << "  tensors           " << s.tensor_count << " (" << human_bytes(s.tensor_bytes) << ")\n";
  o << "  GGUF              v" << s.gguf_version << ", alignment " << s.alignment << ", "
    << human_bytes(s.file_bytes) << " on disk\n";
  if (!s.shards.empty()) {
    o << "  shards            " << s.shards.size() << "\n";
    for (const auto& sh : s.shards) o << "    " << sh << "\n";
  }
  auto row = [&](const std::string& name, const RoleTotals& t) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "    %-14s %6llu tensors  %12s\n", name.c_str(),
                  static_cast<unsigned long long>(t.tensor_count), human_bytes(t.tensor_bytes).c_str());
    o << buf;
  };
  o << "  by role\n";
  row("embeddings", s.embeddings);
  for (size_t i = 0; i < s.layers.size(); ++i) row("layer " + std::to_string(i), s.layers[i]);
  row("output", s.output);
  row("other globals", s.globals);
  o << "  by type\n";
  for (const auto& [name, t] : s.by_type) row(name, t);
}

}  // namespace

Command register_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "What a GGUF model (any shard of a split model) holds");
  cmd->footer(
      "Example:\n  skippy-model-package inspect model-00001-of-00003.gguf --json\n"
      "Given any shard of a split model, reports the whole model.");
  auto file = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("file", *file, "GGUF file (or any shard of a split model)")->required();
  cmd->add_flag("--json", *json, "Print one JSON document on stdout");
  return {cmd, [file, json]() {
    const auto model = ModelSource::open(*file);
    const auto summary = summarize(model);
    if (*json) {
      print_json(summary_json(*file, summary));
    } else {
      print_human(*file, summary);
    }
    return kExitOk;
  }};
}

}  // namespace skippy::cli
