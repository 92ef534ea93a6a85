// libFuzzer target for the package-level parsers that read untrusted text:
// model-package.json (from a peer or the Hub), hf:// references and
// org/repo:distribution coordinates (from configs and command lines), the
// Hub's file names (distribution matching), etags (cache file names), the
// range record a partial ranged download leaves beside its blob (read back
// from disk on resume), and the generation inputs an operator hands the
// runtime: config.toml (speculative decoding), a backend capability file,
// --override FIELD=VALUE, and package schema 2: its root (model-package.json)
// and its metadata carrier's catalog (a GGUF directory read against a fixed
// root), and the signature sidecar model-package.json.sig of a fixed
// manifest, the stage admission message nodes exchange (or the descriptor
// select prints), and the printing of arbitrary bytes as JSON output (every
// string from outside reaches --json this way). The first input byte picks the
// parser (0xF0 and up: the range record; 0xE0 to 0xE7: the schema 2 root;
// 0xE8 to 0xEF: the carrier; 0xD8 to 0xDF: the sidecar; 0xD4 to 0xD7: the
// admission; 0xD0 to 0xD3: JSON output; else byte % 8); the rest is its input. Each must
// either succeed and keep its promises or throw skippy::Error; anything
// else (another exception, a sanitizer report, a broken promise) is a crash.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/error.h"
#include "skippy/source.h"
#include "skippy/gguf.h"
#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"
#include "skippy/package_catalog.h"
#include "skippy/package_signature.h"
#include "util/sha256.h"
#include "skippy/policy.h"
#include "skippy/speculative.h"
#include "skippy/stage_admission.h"
#include "format/json_output.h"
#include "source/blob_writer.h"

namespace {

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "package_inputs_fuzz: broken promise: %s\n", what);
  std::abort();
}

#define CHECK(cond)             \
  do {                          \
    if (!(cond)) broken(#cond); \
  } while (0)

bool path_like(std::string_view s) {
  return s.find("..") != std::string_view::npos || s.starts_with('/') || s.find("//") != std::string_view::npos;
}

void manifest(std::string_view text) {
  const auto m = skippy::parse_manifest(text, "fuzz.json");  // a consumer's reading
  if (m.generation_problem) {
    // A broken generation block is set aside, never half-kept; the strict
    // reading refuses the same text.
    CHECK(!m.generation);
    bool refused = false;
    try {
      (void)skippy::parse_manifest(text, "fuzz.json", skippy::GenerationProblems::kRefuse);
    } catch (const skippy::Error&) {
      refused = true;
    }
    CHECK(refused);
    return;
  }
  // A manifest that parses serializes, and reads back as itself.
  const auto again = skippy::parse_manifest(skippy::serialize_manifest(m), "fuzz-again.json",
                                            skippy::GenerationProblems::kRefuse);
  CHECK(again == m);
  for (const auto& l : m.layers) CHECK(skippy::is_safe_relative_path(l.path));
}

void hf_ref(std::string_view text) {
  const auto r = skippy::parse_hf_ref(text);
  CHECK(!path_like(r.repo_id) && !path_like(r.revision));
  CHECK(r.revision.find('\\') == std::string::npos);
  const auto again = skippy::parse_hf_ref(r.text());
  CHECK(again.repo_id == r.repo_id && again.revision == r.revision);
  // Cache paths built from it stay under the cache root.
  skippy::HfRepoCache c("/cache", r.repo_id);
  CHECK(c.repo_dir().parent_path() == "/cache");
  (void)c.cached_commit(r.revision);
}

void coordinate(std::string_view text) {
  const auto c = skippy::parse_model_coordinate(text);
  CHECK(!path_like(c.repo_id) && !path_like(c.revision));
  CHECK(c.distribution.find('/') == std::string::npos);
}

void distribution(std::string_view text) {
  // First line: the tag; the rest: one repo path per line.
  const auto nl = text.find('\n');
  const auto tag = text.substr(0, nl);
  std::vector<std::string> paths;
  if (nl != std::string_view::npos) {
    std::string_view rest = text.substr(nl + 1);
    while (!rest.empty()) {
      const auto e = rest.find('\n');
      paths.emplace_back(rest.substr(0, e));
      if (e == std::string_view::npos) break;
      rest = rest.substr(e + 1);
    }
  }
  const auto coord = skippy::parse_model_coordinate("org/m:" + std::string(tag));
  const auto got = skippy::match_distribution(paths, coord);
  CHECK(!got.empty());
  for (const auto& g : got) {
    bool listed = false;
    for (const auto& p : paths) listed = listed || p == g;
    CHECK(listed);
  }
}

void etag(std::string_view text) {
  const auto e = skippy::normalize_etag(text);
  if (!skippy::is_blob_etag(e)) return;
  skippy::HfRepoCache c("/cache", "org/repo");
  CHECK(c.blob_path(e).parent_path() == c.repo_dir() / "blobs");
  CHECK(c.lock_path(e).parent_path().parent_path() == "/cache/.locks");
}

void operator_config(std::string_view text) {
  const auto cfg = skippy::parse_operator_config(text, "config.toml");
  // What parsed layers and resolves without throwing anything but a refusal.
  for (const auto& [id, entry] : cfg.models) {
    skippy::SpeculativeModel model;
    model.direct_gguf = true;
    model.layer_count = 4;
    model.nextn_layers = std::set<uint32_t>{};
    (void)skippy::resolve_speculative(model, skippy::layer_settings({}, &entry, cfg.defaults));
  }
}

void backend(std::string_view text) {
  const auto b = skippy::parse_backend_capabilities(text, "backend.json");
  CHECK(!b.name.empty());
}

void policy_override(std::string_view text) {
  skippy::PolicyOverrides o;
  skippy::add_policy_override(o, text);
  skippy::PolicyInputs in;
  in.overrides = o;
  in.backend = *skippy::builtin_backend("cpu");
  in.request.kind = skippy::RequestKind::kPrefill;
  in.request.n_tokens = 4096;
  in.request.n_kv = 131072;
  (void)skippy::resolve_policy(in, {});
}

void range_record(std::string_view text) {
  // The blob a record must name, and its size, come first: "<size>\n".
  const auto nl = text.find('\n');
  if (nl == std::string_view::npos || nl > 20) return;
  uint64_t size = 0;
  for (const char c : text.substr(0, nl)) {
    if (c < '0' || c > '9') return;
    size = size * 10 + static_cast<uint64_t>(c - '0');
  }
  const std::string etag(64, 'a');
  skippy::detail::ByteRanges done;
  if (skippy::detail::parse_range_record(text.substr(nl + 1), etag, size, done)) return;
  // Accepted: ordered, disjoint, inside the file; and it writes back as itself.
  uint64_t prev = 0;
  for (size_t i = 0; i < done.ranges().size(); ++i) {
    const auto& [a, b] = done.ranges()[i];
    CHECK(a < b && b <= size);
    CHECK(i == 0 || a > prev);
    prev = b;
  }
  CHECK(done.total() <= size);
  skippy::detail::ByteRanges again;
  CHECK(!skippy::detail::parse_range_record(skippy::detail::format_range_record(etag, size, done), etag, size, again));
  CHECK(again.ranges() == done.ranges());
}

void root_v2(std::string_view text) {
  const auto r = skippy::parse_package_root_v2(text, "fuzz.json");
  // Accepted: its id is what it claims, every path is safe, and it writes
  // back as itself.
  CHECK(skippy::compute_package_id_v2(r) == r.package_id);
  for (const auto& a : r.artifacts) CHECK(skippy::is_safe_relative_path(a.path));
  CHECK(skippy::parse_package_root_v2(skippy::package_root_v2_json(r), "fuzz-again.json") == r);
}

// A root for a carrier: the carrier and as many payload parts as its
// skippy.package.part_count says (at most 64; ids that rank unlike their
// paths, which carry no layer), each of 1 TiB, and 4096 layers.
skippy::PackageRootV2 root_for(const skippy::GgufFile& carrier) {
  skippy::PackageRootV2 r;
  r.model_id = "org/m:Q8_0";
  r.format = "gguf";
  r.layer_count = 4096;
  r.native_abi_version = "0.1.41";
  r.generator_version = "fuzz";
  r.source_model.sha256 = std::string(64, 'a');
  r.source_model.metadata_artifact_id = "meta";
  const std::string sha(64, 'b');
  r.artifacts.push_back({"meta", "shared/metadata.gguf", carrier.file_size(), sha});
  uint64_t parts = 1;
  if (const auto n = carrier.get_uint(skippy::kCarrierPartCountKey); n && *n >= 1 && *n <= 64) parts = *n;
  for (uint64_t k = 0; k < parts; ++k) {
    r.artifacts.push_back({"p" + std::to_string(99 - k), "parts/part-" + std::to_string(k) + ".gguf", uint64_t{1} << 40, sha});
  }
  r.package_id = skippy::compute_package_id_v2(r);
  return r;
}

void carrier_v2(std::string_view text) {
  skippy::GgufLimits limits;
  limits.directory_only = true;
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(text.data()), text.size());
  auto file = std::make_shared<const skippy::GgufFile>(skippy::GgufFile::parse(bytes, "carrier.gguf", limits));
  const auto cat = skippy::build_catalog_v2(root_for(*file), file, "carrier.gguf");
  // Accepted: every extent inside its payload part, aligned, and no overlap.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> extents(cat.artifacts.size());
  for (const auto& t : cat.tensors) {
    CHECK(t.artifact < cat.artifacts.size());
    const auto& a = cat.artifacts[t.artifact];
    CHECK(a.kind == skippy::CatalogArtifactKind::kPayload);
    CHECK(t.stored_bytes > 0 && t.offset <= a.bytes && t.stored_bytes <= a.bytes - t.offset);
    CHECK(t.alignment > 0 && (t.alignment & (t.alignment - 1)) == 0 && t.offset % t.alignment == 0);
    CHECK(cat.find_tensor(t.name) == &t);
    extents[t.artifact].push_back({t.offset, t.offset + t.stored_bytes});
  }
  for (auto& e : extents) {
    std::sort(e.begin(), e.end());
    for (size_t i = 1; i < e.size(); ++i) CHECK(e[i - 1].second <= e[i].first);
  }
}

// The manifest the sidecar seeds sign (fuzz/corpus-inputs/sidecar-*: made by
// `sign-package` over a directory holding exactly these bytes).
constexpr std::string_view kSignedManifest = "{\"fuzz\":\"signed manifest\"}\n";

// A directory of this process holding kSignedManifest, made once.
const std::filesystem::path& sidecar_dir() {
  static const std::filesystem::path dir = [] {
    std::string tmpl = (std::filesystem::temp_directory_path() / "skippy-fuzz-sidecar-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) broken("mkdtemp");
    std::ofstream(std::filesystem::path(tmpl) / "model-package.json", std::ios::binary) << kSignedManifest;
    return std::filesystem::path(tmpl);
  }();
  return dir;
}

void sidecar(std::string_view text) {
  const auto& dir = sidecar_dir();
  {
    std::ofstream out(dir / std::string(skippy::kSignatureFileName), std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  (void)skippy::signed_validation_sha256(dir);  // never throws for what the sidecar says
  const auto sig = skippy::read_package_signature(dir);
  // Accepted: it signs these very manifest bytes, by a 64-hex owner.
  CHECK(sig.has_value());
  CHECK(sig->manifest_sha256 == skippy::sha256_hex(kSignedManifest));
  CHECK(sig->owner_id.size() == 64);
  CHECK(!sig->validation_sha256);  // no validation.json here: a sidecar naming one is refused
}

// Arbitrary bytes as a key, a value and an array element of a report: it
// prints (no exception), the text parses back as JSON, and valid UTF-8
// comes back unchanged.
// The admission message nodes exchange and the descriptor select prints: the
// sniff never throws, and a message the reader accepts survives its own
// JSON form unchanged.
void admission(std::string_view text) {
  const bool message = skippy::is_stage_admission_message(text);
  if (!message) {
    (void)skippy::parse_stage_admission(text, "fuzz");
    return;
  }
  const auto m = skippy::parse_stage_admission_message(text, "fuzz");
  const auto back = skippy::parse_stage_admission_message(skippy::stage_admission_message_json(m), "fuzz");
  CHECK(back == m);
}

void json_output_of(std::string_view text) {
  const std::string s(text);
  nlohmann::json doc = {{"message", s}, {"items", {s, 1, s}}};
  doc[s] = s;
  for (const int indent : {-1, 2}) {
    const std::string out = skippy::json_output(doc, indent);
    const auto back = nlohmann::json::parse(out);  // throws (a crash here) if not JSON
    CHECK(back.is_object() && back.contains("message") && back["items"].size() == 3);
    bool utf8 = true;
    try {
      (void)nlohmann::json(s).dump();
    } catch (const nlohmann::json::exception&) {
      utf8 = false;
    }
    if (utf8) CHECK(back["message"].get<std::string>() == s && back.contains(s));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] >= 0xF0) {
      range_record(text);
      return 0;
    }
    if (data[0] >= 0xD4 && data[0] < 0xD8) {
      admission(text);
      return 0;
    }
    if (data[0] >= 0xD0 && data[0] < 0xD4) {
      json_output_of(text);
      return 0;
    }
    if (data[0] >= 0xD8 && data[0] < 0xE0) {
      sidecar(text);
      return 0;
    }
    if (data[0] >= 0xE0) {
      if (data[0] < 0xE8) {
        root_v2(text);
      } else {
        carrier_v2(text);
      }
      return 0;
    }
    switch (data[0] % 8) {
      case 0: manifest(text); break;
      case 1: hf_ref(text); break;
      case 2: coordinate(text); break;
      case 3: distribution(text); break;
      case 4: etag(text); break;
      case 5: operator_config(text); break;
      case 6: backend(text); break;
      default: policy_override(text); break;
    }
  } catch (const skippy::Error&) {
    // A clear refusal is the expected outcome for most inputs.
  }
  return 0;
}
