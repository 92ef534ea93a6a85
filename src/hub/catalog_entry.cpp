// mesh-llm's package catalog entry (skippy/hub_publish.h: merge_catalog_entry,
// propose_catalog_entry): the reader's rules are its model-resolver's
// catalog.rs (CatalogEntry, CatalogVariant, CuratedMeta, CatalogPackage; no
// deny_unknown_fields, so unknown keys are kept), the writer's are its
// split-model-job.sh step "Updating meshllm/catalog".
#include <nlohmann/json.hpp>

#include <regex>

#include "hub/http.h"
#include "hub/hub_status.h"
#include "hub/hub_write_api.h"
#include "hub/retry.h"
#include "skippy/error.h"
#include "skippy/source.h"
#include "skippy/hub_publish.h"

namespace skippy {
namespace catalog_entry_detail {

using ojson = nlohmann::ordered_json;

[[noreturn]] void refuse(const std::string& origin, const std::string& what) {
  throw Error(ErrorKind::kInvalidInput, origin + ": " + what + " (mesh-llm's catalog reader refuses it)");
}

void want_string(const ojson& o, const char* key, const std::string& at, const std::string& origin, bool required) {
  if (!o.contains(key)) {
    if (required) refuse(origin, at + "." + key + " is missing");
    return;
  }
  if (!o[key].is_string() && !(!required && o[key].is_null())) refuse(origin, at + "." + key + " is not a string");
}

// One variant as the reader deserializes it: source.repo and curated.name
// required; draft a string, null or a legacy bool; moe a string, an object or
// null; extra_files objects with string file and repo; mmproj a string or an
// asset object; packages objects with string type and repo, layer_count u32,
// total_bytes u64.
void check_variant(const ojson& v, const std::string& at, const std::string& origin) {
  if (!v.is_object()) refuse(origin, at + " is not an object");
  if (!v.contains("source") || !v["source"].is_object()) refuse(origin, at + ".source is missing or not an object");
  want_string(v["source"], "repo", at + ".source", origin, true);
  want_string(v["source"], "revision", at + ".source", origin, false);
  want_string(v["source"], "file", at + ".source", origin, false);
  if (!v.contains("curated") || !v["curated"].is_object()) refuse(origin, at + ".curated is missing or not an object");
  const ojson& c = v["curated"];
  want_string(c, "name", at + ".curated", origin, true);
  want_string(c, "size", at + ".curated", origin, false);
  want_string(c, "description", at + ".curated", origin, false);
  if (c.contains("draft") && !(c["draft"].is_string() || c["draft"].is_null() || c["draft"].is_boolean())) {
    refuse(origin, at + ".curated.draft is not a string, null or a boolean");
  }
  if (c.contains("moe") && !(c["moe"].is_string() || c["moe"].is_object() || c["moe"].is_null())) {
    refuse(origin, at + ".curated.moe is not a string, an object or null");
  }
  if (c.contains("extra_files")) {
    if (!c["extra_files"].is_array()) refuse(origin, at + ".curated.extra_files is not an array");
    for (const auto& e : c["extra_files"]) {
      if (!e.is_object()) refuse(origin, at + ".curated.extra_files: an entry is not an object");
      want_string(e, "file", at + ".curated.extra_files[]", origin, true);
      want_string(e, "repo", at + ".curated.extra_files[]", origin, true);
    }
  }
  if (c.contains("mmproj") && !c["mmproj"].is_null() && !c["mmproj"].is_string()) {
    if (!c["mmproj"].is_object()) refuse(origin, at + ".curated.mmproj is not a string or an object");
    want_string(c["mmproj"], "file", at + ".curated.mmproj", origin, true);
    want_string(c["mmproj"], "repo", at + ".curated.mmproj", origin, true);
  }
  if (!v.contains("packages")) return;
  if (!v["packages"].is_array()) refuse(origin, at + ".packages is not an array");
  for (const auto& p : v["packages"]) {
    if (!p.is_object()) refuse(origin, at + ".packages: an entry is not an object");
    want_string(p, "type", at + ".packages[]", origin, true);
    want_string(p, "repo", at + ".packages[]", origin, true);
    if (p.contains("layer_count") && !p["layer_count"].is_null() &&
        !(p["layer_count"].is_number_unsigned() && p["layer_count"].get<uint64_t>() <= UINT32_MAX)) {
      refuse(origin, at + ".packages[].layer_count is not a u32");
    }
    if (p.contains("total_bytes") && !p["total_bytes"].is_null() && !p["total_bytes"].is_number_unsigned()) {
      refuse(origin, at + ".packages[].total_bytes is not a u64");
    }
  }
}

void check_entry(const ojson& e, const std::string& origin) {
  if (!e.is_object()) refuse(origin, "the entry is not a JSON object");
  if (!e.contains("schema_version") || !e["schema_version"].is_number_unsigned() ||
      e["schema_version"].get<uint64_t>() > UINT32_MAX) {
    refuse(origin, "schema_version is missing or not a u32");
  }
  want_string(e, "source_repo", "entry", origin, false);
  if (!e.contains("variants")) refuse(origin, "variants is missing");
  const ojson& vs = e["variants"];
  if (vs.is_object()) {
    for (const auto& [k, v] : vs.items()) check_variant(v, "variants." + k, origin);
  } else if (vs.is_array()) {
    for (size_t i = 0; i < vs.size(); ++i) check_variant(vs[i], "variants[" + std::to_string(i) + "]", origin);
  } else {
    refuse(origin, "variants must be an object or an array");
  }
}

ojson package_line(const CatalogEntryRequest& r) {
  ojson p = {{"type", "layer-package"}, {"repo", r.package_repo}, {"layer_count", r.layer_count}};
  if (r.total_bytes) p["total_bytes"] = *r.total_bytes;
  // Extra keys the reader ignores, as the reference's writer adds
  // source_revision: what the entry was made from.
  if (!r.source_revision.empty()) p["source_revision"] = r.source_revision;
  if (!r.package_revision.empty()) p["package_revision"] = r.package_revision;
  return p;
}

// Drops the packages of the same repo (with or without a pin), appends the
// new one, and points the variant's source at this source.
void update_variant(ojson& v, const CatalogEntryRequest& r) {
  ojson kept = ojson::array();
  const auto bare = [](std::string s) { return s.substr(0, s.find('@')); };
  if (v.contains("packages")) {
    for (auto& p : v["packages"]) {
      if (bare(p["repo"].get<std::string>()) != bare(r.package_repo)) kept.push_back(p);
    }
  }
  kept.push_back(package_line(r));
  v["packages"] = std::move(kept);
  v["source"] = {{"repo", r.source_repo}, {"file", r.source_file}, {"revision", r.source_revision}};
}

ojson new_variant(const CatalogEntryRequest& r, const std::string& key) {
  ojson v;
  v["source"] = {{"repo", r.source_repo}, {"file", r.source_file}, {"revision", r.source_revision}};
  v["curated"] = {{"name", key},
                  {"size", std::to_string(r.layer_count) + " layers"},
                  {"description", "Layer package for " + (r.model_id.empty() ? r.source_repo : r.model_id)}};
  v["packages"] = ojson::array({package_line(r)});
  return v;
}

void check_request(const CatalogEntryRequest& r) {
  static const std::regex kRepo(R"(^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$)");
  auto usage = [](const std::string& m) { throw Error(ErrorKind::kUsage, "catalog entry: " + m); };
  if (!std::regex_match(r.source_repo, kRepo)) usage("the source repository " + r.source_repo + " is not org/name");
  const std::string bare = r.package_repo.substr(0, r.package_repo.find('@'));
  if (!std::regex_match(bare, kRepo)) usage("the package repository " + r.package_repo + " is not ns/name[@revision]");
  if (r.source_file.empty() || !r.source_file.ends_with(".gguf")) {
    usage("the source file " + (r.source_file.empty() ? std::string("(none)") : r.source_file) + " is not a .gguf path");
  }
  if (r.layer_count == 0) usage("the package has no layers");
}

}  // namespace catalog_entry_detail

std::string catalog_entry_path(std::string_view source_repo) {
  return "entries/" + std::string(source_repo) + ".json";
}

std::string catalog_variant_key(std::string_view source_file) {
  std::string name(source_file.substr(source_file.rfind('/') == std::string_view::npos ? 0 : source_file.rfind('/') + 1));
  if (name.ends_with(".gguf")) name.resize(name.size() - 5);
  static const std::regex kShard(R"(-\d{5}-of-\d{5}$)");
  return std::regex_replace(name, kShard, "");
}

std::string merge_catalog_entry(const std::optional<std::string>& existing, const CatalogEntryRequest& request,
                                const std::string& origin) {
  using namespace catalog_entry_detail;
  check_request(request);
  const std::string key = catalog_variant_key(request.source_file);
  ojson entry;
  if (existing) {
    entry = ojson::parse(*existing, nullptr, false);
    if (entry.is_discarded()) refuse(origin, "not JSON");
    check_entry(entry, origin);
  } else {
    entry = {{"schema_version", 1}, {"source_repo", request.source_repo}, {"variants", ojson::object()}};
  }
  ojson& vs = entry["variants"];
  if (vs.is_object()) {
    if (vs.contains(key)) update_variant(vs[key], request);
    else vs[key] = new_variant(request, key);
  } else {
    // The legacy list form: a variant is matched by its curated name (the
    // reference writer's rule) or by its source file.
    bool found = false;
    for (auto& v : vs) {
      const bool same_file = v["source"].contains("file") && v["source"]["file"] == request.source_file;
      if (v["curated"]["name"] == key || same_file) {
        update_variant(v, request);
        found = true;
        break;
      }
    }
    if (!found) vs.push_back(new_variant(request, key));
  }
  return entry.dump(2) + "\n";
}

CatalogProposal propose_catalog_entry(const HubConfig& hub, const std::string& dataset, const CatalogEntryRequest& request,
                                      bool pull_request) {
  const std::string path = catalog_entry_path(request.source_repo);
  const std::string what = "hf://datasets/" + dataset + ": " + path;
  if (!hub.token) throw Error(ErrorKind::kUnauthorized, what + ": proposing an entry needs a token; set HF_TOKEN");
  const std::vector<std::string> auth = {"Accept-Encoding: identity", "Authorization: Bearer " + *hub.token};
  const detail::RetryPolicy policy{hub.max_attempts, hub.backoff_ms};
  // The entry as the dataset's main holds it now (404: a new entry).
  detail::HttpRequest get;
  get.url = hub.endpoint + "/datasets/" + dataset + "/resolve/main/" + detail::url_encode(path, true);
  get.headers = auth;
  get.max_body = size_t{16} << 20;
  const auto r = detail::perform_with_retries(get, policy, what + ": reading the current entry");
  std::optional<std::string> existing;
  if (r.status == 200) {
    existing = r.body;
  } else if (r.status != 404) {
    detail::throw_hub_status(r, what + ": reading the current entry: HTTP " + std::to_string(r.status) + detail::reason_tail(r));
  }
  // The commit read is the commit's parent: an entry changed meanwhile is a
  // conflict (HTTP 412), never overwritten. A 404 without one: no dataset.
  const std::string parent = r.header("x-repo-commit").value_or("");
  if (!is_commit_hash(parent)) {
    detail::throw_hub_status(r, what + ": the dataset's main branch cannot be read (HTTP " + std::to_string(r.status) +
                                    detail::reason_tail(r) + "); is " + dataset + " a dataset you can read?");
  }
  CatalogProposal out;
  out.path = path;
  out.existed = existing.has_value();
  out.content = merge_catalog_entry(existing, request, what);
  const std::string summary = "Add layer package for " + (request.model_id.empty() ? request.source_repo : request.model_id) +
                              " (" + request.package_repo + ")";
  std::vector<detail::CommitFile> files = {{path, false, "", out.content.size(), &out.content}};
  detail::HttpRequest post;
  post.method = "POST";
  post.url = hub.endpoint + "/api/datasets/" + dataset + "/commit/main" + (pull_request ? "?create_pr=1" : "");
  post.headers = auth;
  post.headers.push_back("Content-Type: application/x-ndjson");
  post.body = detail::commit_ndjson(summary, "Written by skippy-model-package catalog-entry.", parent, files, {});
  const auto c = detail::perform_with_retries(post, policy, what + ": committing");
  if (c.status != 200) detail::throw_hub_status(c, what + ": committing: HTTP " + std::to_string(c.status) + detail::reason_tail(c));
  const auto j = detail::parse_json(c, what + ": the commit's answer");
  if (!j.is_object() || !j.contains("commitOid") || !j["commitOid"].is_string()) {
    throw Error(ErrorKind::kInvalidInput, what + ": the Hub's answer has no commitOid");
  }
  out.commit = j["commitOid"].get<std::string>();
  if (j.contains("pullRequestUrl") && j["pullRequestUrl"].is_string()) out.pull_request_url = j["pullRequestUrl"].get<std::string>();
  if (pull_request && out.pull_request_url.empty()) {
    throw Error(ErrorKind::kInvalidInput, what + ": asked for a pull request, the Hub's answer names none");
  }
  return out;
}

}  // namespace skippy
