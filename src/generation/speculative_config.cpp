// config.toml for speculative decoding (spec: "Operators may override the
// package recommendation in config.toml with speculative.strategy ...
// Precedence is CLI invocation, selected model entry, then global
// defaults"), read with toml++.
#include <toml++/toml.h>

#include "skippy/error.h"
#include "util/file.h"
#include "skippy/speculative.h"

namespace skippy {
namespace {

constexpr uint64_t kConfigMaxBytes = uint64_t{1} << 20;

std::string where(const toml::node& n) {
  const auto& b = n.source().begin;
  return "line " + std::to_string(b.line) + ", column " + std::to_string(b.column);
}

[[noreturn]] void fail(std::string_view origin, const std::string& field, const toml::node& n, const std::string& why) {
  throw_invalid(std::string(origin) + ": " + field + " (" + where(n) + "): " + why);
}

// The integer fields of SpeculativeSettings, by config key.
using IntField = std::optional<uint64_t> SpeculativeSettings::*;
const std::pair<std::string_view, IntField> kIntFields[] = {
    {"ngram_min", &SpeculativeSettings::ngram_min},
    {"ngram_max", &SpeculativeSettings::ngram_max},
    {"ngram_max_proposal_tokens", &SpeculativeSettings::ngram_max_proposal_tokens},
    {"extension_initial_tokens", &SpeculativeSettings::extension_initial_tokens},
    {"extension_max_tokens", &SpeculativeSettings::extension_max_tokens},
    {"extension_tail_backoff_proposals", &SpeculativeSettings::extension_tail_backoff_proposals},
    {"native_mtp_reject_cooldown_tokens", &SpeculativeSettings::native_mtp_reject_cooldown_tokens},
    {"verify_window_min_tokens", &SpeculativeSettings::verify_window_min_tokens},
    {"verify_window_max_tokens", &SpeculativeSettings::verify_window_max_tokens},
    {"verify_window_pipeline_depth", &SpeculativeSettings::verify_window_pipeline_depth},
};

SpeculativeSettings read_settings(const toml::node& node, const std::string& path, std::string_view origin,
                                  std::vector<std::string>& warnings) {
  const toml::table* t = node.as_table();
  if (!t) fail(origin, path, node, "expected a table");
  SpeculativeSettings s;
  for (auto&& [key, value] : *t) {
    const std::string k(key.str());
    const std::string field = path + "." + k;
    if (k == "strategy" || k == "ngram_proposer") {
      const auto* str = value.as_string();
      if (!str || str->get().empty() || str->get().size() > 128) {
        fail(origin, field, value, "expected a non-empty string of at most 128 bytes");
      }
      (k == "strategy" ? s.strategy : s.ngram_proposer) = str->get();
      continue;
    }
    bool known = false;
    for (const auto& [name, member] : kIntFields) {
      if (k != name) continue;
      known = true;
      const auto* i = value.as_integer();
      if (!i) fail(origin, field, value, "expected an integer");
      if (i->get() < 0) fail(origin, field, value, "must not be negative, got " + std::to_string(i->get()));
      s.*member = static_cast<uint64_t>(i->get());
    }
    if (!known) warnings.push_back(std::string(origin) + ": " + field + " (" + where(value) + "): unknown key, ignored");
  }
  return s;
}

}  // namespace

OperatorConfig parse_operator_config(std::string_view toml_text, std::string_view origin) {
  if (toml_text.size() > kConfigMaxBytes) {
    throw_invalid(std::string(origin) + ": " + std::to_string(toml_text.size()) + " bytes; the limit is " +
                  std::to_string(kConfigMaxBytes));
  }
  toml::table root;
  try {
    root = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    const auto& b = e.source().begin;
    throw_invalid(std::string(origin) + ": line " + std::to_string(b.line) + ", column " + std::to_string(b.column) +
                  ": not valid TOML: " + std::string(e.description()));
  }
  OperatorConfig cfg;
  if (const toml::node* d = root.get("defaults")) {
    const toml::table* dt = d->as_table();
    if (!dt) fail(origin, "defaults", *d, "expected a table");
    if (const toml::node* sp = dt->get("speculative")) {
      cfg.defaults = read_settings(*sp, "defaults.speculative", origin, cfg.warnings);
    }
  }
  if (const toml::node* m = root.get("models")) {
    const toml::array* models = m->as_array();
    if (!models) fail(origin, "models", *m, "expected an array of tables ([[models]])");
    for (size_t i = 0; i < models->size(); ++i) {
      const toml::node& entry = *models->get(i);
      const std::string path = "models[" + std::to_string(i) + "]";
      const toml::table* et = entry.as_table();
      if (!et) fail(origin, path, entry, "expected a table");
      const toml::node* id = et->get("model");
      if (!id || !id->as_string() || id->as_string()->get().empty()) {
        fail(origin, path + ".model", id ? *id : entry, "a non-empty model id string is required");
      }
      const std::string model = id->as_string()->get();
      SpeculativeSettings s;
      if (const toml::node* sp = et->get("speculative")) {
        s = read_settings(*sp, path + ".speculative", origin, cfg.warnings);
      }
      if (!cfg.models.emplace(model, s).second) {
        fail(origin, path + ".model", *id, "a second entry for model \"" + model + "\"");
      }
    }
  }
  return cfg;
}

OperatorConfig load_operator_config(const std::filesystem::path& path) {
  return parse_operator_config(read_small_file(path, kConfigMaxBytes), path.string());
}

LayeredSettings layer_settings(const SpeculativeSettings& cli, const SpeculativeSettings* model,
                               const SpeculativeSettings& defaults) {
  LayeredSettings out;
  const std::pair<const SpeculativeSettings*, const char*> layers[] = {
      {&cli, "cli"}, {model, "model"}, {&defaults, "defaults"}};
  auto take_str = [&](const char* name, std::optional<std::string> SpeculativeSettings::*member) {
    for (const auto& [layer, label] : layers) {
      if (layer && layer->*member) {
        out.value.*member = layer->*member;
        out.sources[name] = label;
        return;
      }
    }
  };
  take_str("strategy", &SpeculativeSettings::strategy);
  take_str("ngram_proposer", &SpeculativeSettings::ngram_proposer);
  for (const auto& [name, member] : kIntFields) {
    for (const auto& [layer, label] : layers) {
      if (layer && layer->*member) {
        out.value.*member = layer->*member;
        out.sources[std::string(name)] = label;
        break;
      }
    }
  }
  return out;
}

}  // namespace skippy
