#include "hub/xet_reconstruction.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "skippy/error.h"
#include "xet/chunk_codec.h"

namespace skippy::detail {

namespace {

using nlohmann::json;

// A chunk holds 1 to kMaxChunkBytes bytes; stored, a header and 1 to
// kMaxStoredChunkBytes bytes.
constexpr uint64_t kMinStoredChunk = xet::kChunkHeaderBytes + 1;
constexpr uint64_t kMaxStoredChunk = xet::kChunkHeaderBytes + xet::kMaxStoredChunkBytes;

[[noreturn]] void recon_bad(const std::string& what, const std::string& where, const std::string& problem) {
  throw Error(ErrorKind::kInvalidInput, what + ": unusable Xet reconstruction: " + where + " " + problem);
}

uint64_t recon_u64(const json& obj, const char* key, const std::string& what, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key)) recon_bad(what, where, std::string("has no \"") + key + "\"");
  const json& v = obj[key];
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    recon_bad(what, where + "." + key, "is not a non-negative integer");
  }
  return v.get<uint64_t>();
}

uint32_t recon_u32(const json& obj, const char* key, const std::string& what, const std::string& where) {
  const uint64_t v = recon_u64(obj, key, what, where);
  if (v > std::numeric_limits<uint32_t>::max()) recon_bad(what, where + "." + key, "is out of range");
  return static_cast<uint32_t>(v);
}

bool is_xet_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (const char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// {"start", "end"}: chunks [start, end), non-empty.
void recon_chunks(const json& obj, const std::string& what, const std::string& where, uint32_t& start, uint32_t& end) {
  start = recon_u32(obj, "start", what, where);
  end = recon_u32(obj, "end", what, where);
  if (end <= start) recon_bad(what, where, "is an empty chunk range [" + std::to_string(start) + ", " + std::to_string(end) + ")");
}

XetFetchRange recon_fetch(const json& url, const json& chunks, const json& bytes, const std::string& what,
                          const std::string& where) {
  XetFetchRange f;
  if (!url.is_string()) recon_bad(what, where, "has no url");
  f.url = url.get<std::string>();
  if (!(f.url.starts_with("https://") || f.url.starts_with("http://")) || f.url.size() > 64 * 1024 ||
      f.url.find_first_of(std::string("\r\n\0 ", 4)) != std::string::npos) {
    recon_bad(what, where, "has an unusable url");
  }
  recon_chunks(chunks, what, where + " chunks", f.chunk_start, f.chunk_end);
  f.byte_first = recon_u64(bytes, "start", what, where + " bytes");
  f.byte_last = recon_u64(bytes, "end", what, where + " bytes");
  const uint64_t n = f.chunk_end - f.chunk_start;
  if (f.byte_last < f.byte_first || f.byte_last - f.byte_first + 1 < n * kMinStoredChunk ||
      f.byte_last - f.byte_first + 1 > n * kMaxStoredChunk) {
    recon_bad(what, where, "gives bytes " + std::to_string(f.byte_first) + "-" + std::to_string(f.byte_last) + " for " +
                               std::to_string(n) + " chunks, which cannot hold them");
  }
  return f;
}

}  // namespace

XetReconstruction parse_xet_reconstruction(std::string_view body, int version, const std::string& what) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) recon_bad(what, "the answer", "is not a JSON object");
  XetReconstruction r;
  r.offset_into_first_range = recon_u64(j, "offset_into_first_range", what, "the answer");
  if (!j.contains("terms") || !j["terms"].is_array()) recon_bad(what, "the answer", "has no \"terms\" array");
  const json& terms = j["terms"];
  r.terms.reserve(terms.size());
  for (size_t i = 0; i < terms.size(); ++i) {
    const std::string where = "terms[" + std::to_string(i) + "]";
    const json& t = terms[i];
    XetTerm term;
    if (!t.is_object() || !t.contains("hash") || !t["hash"].is_string() || !is_xet_hex(t["hash"].get<std::string>())) {
      recon_bad(what, where, "has no xorb hash (64 lowercase hex)");
    }
    term.xorb = t["hash"].get<std::string>();
    if (!t.contains("range")) recon_bad(what, where, "has no \"range\"");
    recon_chunks(t["range"], what, where + ".range", term.chunk_start, term.chunk_end);
    term.unpacked = recon_u64(t, "unpacked_length", what, where);
    const uint64_t n = term.chunk_end - term.chunk_start;
    if (term.unpacked < n || term.unpacked > n * xet::kMaxChunkBytes) {
      recon_bad(what, where, "says " + std::to_string(term.unpacked) + " unpacked bytes for " + std::to_string(n) +
                                 " chunks, which cannot hold that");
    }
    r.terms.push_back(std::move(term));
  }
  const char* key = version == 2 ? "xorbs" : "fetch_info";
  if (!j.contains(key) || !j[key].is_object()) recon_bad(what, "the answer", std::string("has no \"") + key + "\" object");
  for (auto it = j[key].begin(); it != j[key].end(); ++it) {
    const std::string& xorb = it.key();
    const std::string where = std::string(key) + "[" + xorb.substr(0, 64) + "]";
    if (!is_xet_hex(xorb)) recon_bad(what, where, "is not a xorb hash (64 lowercase hex)");
    if (!it->is_array()) recon_bad(what, where, "is not an array");
    auto& list = r.fetch[xorb];
    for (size_t e = 0; e < it->size(); ++e) {
      const json& entry = (*it)[e];
      const std::string ew = where + "[" + std::to_string(e) + "]";
      if (!entry.is_object()) recon_bad(what, ew, "is not an object");
      if (version == 2) {
        if (!entry.contains("url") || !entry.contains("ranges") || !entry["ranges"].is_array()) {
          recon_bad(what, ew, "has no url and ranges");
        }
        const json& ranges = entry["ranges"];
        for (size_t k = 0; k < ranges.size(); ++k) {
          const std::string rw = ew + ".ranges[" + std::to_string(k) + "]";
          if (!ranges[k].is_object() || !ranges[k].contains("chunks") || !ranges[k].contains("bytes")) {
            recon_bad(what, rw, "has no chunks and bytes");
          }
          list.push_back(recon_fetch(entry["url"], ranges[k]["chunks"], ranges[k]["bytes"], what, rw));
        }
      } else {
        if (!entry.contains("url") || !entry.contains("range") || !entry.contains("url_range")) {
          recon_bad(what, ew, "has no range, url and url_range");
        }
        list.push_back(recon_fetch(entry["url"], entry["range"], entry["url_range"], what, ew));
      }
    }
  }
  return r;
}

std::vector<XetFetchStep> plan_xet_fetches(const XetReconstruction& r, uint64_t want, const std::string& what) {
  auto lie = [&](const std::string& problem) {
    throw Error(ErrorKind::kIntegrity, what + ": the Xet CAS's reconstruction " + problem);
  };
  if (r.terms.empty()) lie("has no terms");
  if (r.offset_into_first_range >= r.terms.front().unpacked) {
    lie("starts " + std::to_string(r.offset_into_first_range) + " bytes into a first term of " +
        std::to_string(r.terms.front().unpacked) + " bytes");
  }
  uint64_t total = 0;
  std::vector<XetFetchStep> steps;
  for (size_t i = 0; i < r.terms.size(); ++i) {
    const XetTerm& t = r.terms[i];
    if (t.unpacked > std::numeric_limits<uint64_t>::max() - total) lie("holds more bytes than a file can");
    total += t.unpacked;
    const auto it = r.fetch.find(t.xorb);
    const XetFetchRange* range = nullptr;
    if (it != r.fetch.end()) {
      for (const auto& f : it->second) {
        if (f.chunk_start <= t.chunk_start && t.chunk_end <= f.chunk_end) {
          range = &f;
          break;
        }
      }
    }
    if (!range) {
      lie("gives no fetch range for term " + std::to_string(i) + " (xorb " + t.xorb + " chunks [" +
          std::to_string(t.chunk_start) + ", " + std::to_string(t.chunk_end) + "))");
    }
    if (!steps.empty()) {
      XetFetchStep& last = steps.back();
      if (last.range == range && r.terms[last.last_term - 1].chunk_end <= t.chunk_start) {
        last.last_term = i + 1;
        continue;
      }
    }
    steps.push_back({range, i, i + 1});
  }
  if (total - r.offset_into_first_range < want) {
    lie("holds " + std::to_string(total - r.offset_into_first_range) + " bytes, fewer than the " +
        std::to_string(want) + " asked for");
  }
  return steps;
}

}  // namespace skippy::detail
