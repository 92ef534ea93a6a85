// The reference runtime lines a package meets on a mesh, in one table: which
// of them admit a package, and why not.
//
// mesh-llm's runtime is not one program: its upstream repository, the fork
// its newest code lives in, and its last release disagree on what a package
// schema 2 root may hold and on what its native_abi_version means. Each row
// here is one line as its sources show it at one commit (the commits and
// files are in the row, so a row can be checked and moved):
//
//   - the ABI rule: kExact (the loader refuses a package whose
//     native_abi_version is not exactly its own skippy ABI) or kProvenance
//     (the declared ABI records who wrote the package; schema, carrier and
//     artifact checks decide, and the native library's ABI is checked when
//     the runtime loads);
//   - the optional root fields its format crate accepts (serde
//     deny_unknown_fields refuses any other);
//   - the split-certification roster its nodes consult before splitting an
//     architecture (SplitRoster), when it has one.
//
// Every line serves schema 2 only ("split serving requires package schema
// 2"). When a line moves, change its row (and the tests that pin it).
//
// Thread-safety: constants and pure functions; safe from any thread.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "skippy/package_catalog.h"

namespace skippy {

// The architectures a line's nodes split without an explicit override
// (their bundled split-certified.json), each pinned to the native recipe it
// was certified with: a node whose build differs from the recipe refuses
// every split.
struct SplitRoster {
  std::string_view source;  // "repo path@commit" of the roster file
  std::string_view llama_upstream_sha;
  std::string_view skippy_abi;
  std::string_view patch_queue_sha256;
  std::span<const std::string_view> architectures;  // sorted
  bool certifies(std::string_view architecture) const;
};

struct RuntimeLine {
  std::string_view id;     // what --runtime-abi takes: "upstream", "fork", "release-0.76.1"
  std::string_view label;  // for people: "upstream 822f7e91"
  std::string_view repo;   // "Mesh-LLM/mesh-llm"
  // The runtime's own skippy ABI, and where it was read ("confirmed" false:
  // inferred, not seen in the line's own ffi constants).
  std::string_view abi;
  std::string_view abi_source;
  bool abi_confirmed = true;
  // How the loader judges a schema 2 root's native_abi_version, and where.
  AbiRule abi_rule = AbiRule::kExact;
  std::string_view abi_rule_source;
  // The optional root fields its format crate accepts.
  bool accepts_publisher_fields = false;  // publisher_metadata, publisher_defaults
  bool accepts_request_defaults = false;  // generation.request_defaults
  std::string_view fields_source;
  const SplitRoster* roster = nullptr;  // null: none known
};

// The table, in a fixed order: upstream, fork, release.
std::span<const RuntimeLine> runtime_lines();
// The row whose id is `id`; null when none.
const RuntimeLine* find_runtime_line(std::string_view id);

// One line's word on one package.
struct RuntimeLineVerdict {
  const RuntimeLine* line = nullptr;
  // Why the line refuses the package ("refuses generation.request_defaults
  // (its format crate denies unknown fields: ...)"); empty: admitted.
  std::vector<std::string> refusals;
  // Whether the first refusal is the ABI's (exact rule, another version).
  bool abi_refused = false;
  // Whether its nodes split the package's architecture (its roster lists
  // it); nullopt: the line has no roster or the architecture is unknown.
  std::optional<bool> splits;
  bool admits() const { return refusals.empty(); }
};

// What `line` says of a package of identity `id` and architecture
// `architecture` ("" when unknown): the schema, the ABI by the line's rule,
// the root fields, the roster.
RuntimeLineVerdict judge_runtime_line(const RuntimeLine& line, const PackageIdentity& id, std::string_view architecture);
// Every line's verdict, in table order.
std::vector<RuntimeLineVerdict> judge_runtime_lines(const PackageIdentity& id, std::string_view architecture);

// [{"line","label","repo","abi","abi_confirmed","abi_rule","abi_rule_source",
//   "fields_source","admits","refusals":[..],"splits","roster_source"}]
nlohmann::json runtime_lines_json(const std::vector<RuntimeLineVerdict>& verdicts);
// One line for people: "fork d39f791d (ABI 0.1.64, provenance): admits; splits llama".
std::string runtime_line_text(const RuntimeLineVerdict& verdict, std::string_view architecture);

// The one warning a writer prints about the package it wrote, nullopt when
// none: the lines that refuse it for what it holds (its schema, its root
// fields), each with its reasons and ABI refusals beside them. An ABI
// refusal alone is no warning (restamp-package moves a package between
// ABIs); a writer says that in its docs.
std::optional<std::string> runtime_lines_warning(const PackageIdentity& id);
// The warning write-package and plan print when a line's nodes refuse to
// split `architecture` (its roster does not list it), nullopt when every
// line with a roster lists it.
std::optional<std::string> split_roster_warning(std::string_view architecture);

// "exact" or "provenance" (the schema 1 rule: "same-major-no-newer-minor").
std::string_view abi_rule_name(AbiRule rule);

}  // namespace skippy
