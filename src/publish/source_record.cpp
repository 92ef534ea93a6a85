// write-package's record of the source's layout (see source_record.h).
#include "publish/source_record.h"

#include <algorithm>
#include <filesystem>

#include "skippy/error.h"
#include "skippy/package_layout.h"
#include "util/file.h"

namespace skippy::detail {
namespace {

bool same_encoding(GgufType type, std::span<const uint8_t> encoded, const GgufValue& v) {
  return type == v.type() && std::equal(encoded.begin(), encoded.end(), v.encoded().begin(), v.encoded().end());
}

std::string value_shown(const GgufValue& v) {
  std::string s(gguf_type_name(v.type()));
  if (const auto u = v.as_uint()) return s + " " + std::to_string(*u);
  if (const auto i = v.as_int()) return s + " " + std::to_string(*i);
  return s;
}

// Why `shard` (file `no` of `count`) is not laid out as the record rebuilds
// it, or "" when it is.
std::string layout_problem(const GgufFile& shard, const std::string& name, const std::vector<const GgufWriter::Kv*>& kvs,
                           const std::vector<std::string>& split_keys, uint32_t no, uint32_t count, uint64_t total) {
  if (shard.version() != 3) {
    return name + " is GGUF version " + std::to_string(shard.version()) + ", and a rebuild writes version 3";
  }
  GgufWriter w(shard.alignment());
  std::vector<uint8_t> head;
  try {
    for (const auto* kv : kvs) w.add_kv_borrowed(kv->key, GgufValue(kv->type, kv->encoded));
    for (const auto& k : split_keys) {
      const auto v = gguf_split_kv(k, no, count, total);
      w.add_kv(k, v->type, v->encoded);
    }
    for (const auto& t : shard.tensors()) w.add_tensor(std::string(t.name), t.type, t.ne, nullptr, 0);
    head = w.header();
  } catch (const Error& e) {
    return name + "'s header cannot be written again: " + e.what();
  }
  for (size_t i = 0; i < shard.tensors().size(); ++i) {
    const auto& t = shard.tensors()[i];
    if (t.offset != w.tensors()[i].offset) {
      return name + ": tensor " + std::string(t.name) + "'s data is at offset " + std::to_string(t.offset) +
             " of the data section, where contiguous data at alignment " + std::to_string(shard.alignment()) +
             " puts it at " + std::to_string(w.tensors()[i].offset);
    }
  }
  if (w.data_offset() != shard.data_offset() || shard.header_end() > head.size()) {
    return name + "'s data section starts at byte " + std::to_string(shard.data_offset()) + ", where its header puts it at " +
           std::to_string(w.data_offset());
  }
  if (w.total_size() != shard.file_size()) {
    return name + " is " + std::to_string(shard.file_size()) + " bytes, and its last tensor's padded data ends at byte " +
           std::to_string(w.total_size());
  }
  std::vector<uint8_t> theirs(static_cast<size_t>(shard.header_end()));
  shard.file()->pread_exact(0, theirs);
  const auto diff = std::mismatch(theirs.begin(), theirs.end(), head.begin());
  if (diff.first != theirs.end()) {
    return name + "'s header differs at byte " + std::to_string(diff.first - theirs.begin()) +
           " from the one its KVs and tensors give";
  }
  return "";
}

}  // namespace

SourceRecord source_record(const ModelSource& model, const std::vector<GgufWriter::Kv>& metadata_kvs) {
  const auto& shards = model.shards();
  const auto unrecorded = [](std::string why) {
    SourceRecord u;
    u.unrecorded = std::move(why);
    return u;
  };
  const auto file_name = [&](size_t i) { return shards[i].path().filename().string(); };
  SourceRecord r;
  const GgufFile& primary = shards.front();
  std::vector<const GgufKv*> source_kvs;
  for (const auto& kv : primary.kvs()) {
    if (kv.key.starts_with("split.")) {
      r.split_keys.emplace_back(kv.key);
    } else if (!r.split_keys.empty()) {
      return unrecorded(file_name(0) + "'s KV " + std::string(kv.key) + " follows its split.* keys, which gguf-split puts last");
    } else {
      source_kvs.push_back(&kv);
    }
  }
  uint64_t total = 0;
  for (const auto& s : shards) total += s.tensors().size();
  const auto count = static_cast<uint32_t>(shards.size());
  for (uint32_t i = 0; i < count; ++i) {
    const GgufFile& s = shards[i];
    r.file_tensors.push_back(s.tensors().size());
    for (const auto& t : s.tensors()) r.tensors.emplace_back(t.name);
    size_t k = 0;
    for (const auto& kv : s.kvs()) {
      if (!kv.key.starts_with("split.")) {
        if (i == 0) continue;
        return unrecorded(file_name(i) + " carries the KV " + std::string(kv.key) +
                          ", and the package keeps only the first file's KVs");
      }
      if (k >= r.split_keys.size() || kv.key != r.split_keys[k]) {
        return unrecorded(file_name(i) + "'s split.* keys are not " + file_name(0) + "'s, in its order");
      }
      ++k;
      const auto want = gguf_split_kv(kv.key, i, count, total);
      if (!want) return unrecorded(file_name(i) + " carries " + std::string(kv.key) + ", which is not a key gguf-split writes");
      if (!same_encoding(want->type, want->encoded, kv.value)) {
        return unrecorded(file_name(i) + "'s " + std::string(kv.key) + " is " + value_shown(kv.value) +
                          ", not the value gguf-split gives it (" + std::string(gguf_type_name(want->type)) + ")");
      }
    }
    if (k != r.split_keys.size()) return unrecorded(file_name(i) + " lacks split.* keys " + file_name(0) + " has");
  }
  // The metadata fragment keeps the first file's other KVs, in order, as they are.
  std::vector<const GgufWriter::Kv*> kept;
  for (const auto& kv : metadata_kvs) {
    if (!is_fragment_key(kv.key)) kept.push_back(&kv);
  }
  for (size_t i = 0; i < std::max(kept.size(), source_kvs.size()); ++i) {
    if (i >= source_kvs.size()) {
      return unrecorded("shared/metadata.gguf carries the KV " + kept[i]->key + ", which is not " + file_name(0) + "'s");
    }
    const std::string key(source_kvs[i]->key);
    if (i >= kept.size() || kept[i]->key != key ||
        !same_encoding(kept[i]->type, kept[i]->encoded, source_kvs[i]->value)) {
      return unrecorded("the KV " + key + " of " + file_name(0) +
                        " is not kept in its place, as it is, in shared/metadata.gguf");
    }
  }
  for (uint32_t i = 0; i < count; ++i) {
    const std::vector<const GgufWriter::Kv*> none;
    auto why = layout_problem(shards[i], file_name(i), i == 0 ? kept : none, r.split_keys, i, count, total);
    if (!why.empty()) return unrecorded(std::move(why));
  }
  return r;
}

void add_source_record(GgufWriter& w, const SourceRecord& r) {
  if (!r.unrecorded.empty()) {
    w.add_string(std::string(kSourceUnrecordedKey), r.unrecorded);
    return;
  }
  w.add_string_array(std::string(kSourceTensorsKey), r.tensors);
  w.add_array(std::string(kSourceFileTensorsKey), GgufType::kUint32, r.file_tensors);
  if (!r.split_keys.empty()) w.add_string_array(std::string(kSourceSplitKeysKey), r.split_keys);
}

std::vector<std::string> check_source_record(const ModelSource& model, const GgufFile& g, const std::string& path) {
  const auto is_record = [](std::string_view key) { return key.starts_with(kSourceRecordPrefix); };
  if (std::none_of(g.kvs().begin(), g.kvs().end(), [&](const GgufKv& kv) { return is_record(kv.key); })) return {};
  GgufWriter kept(g.alignment());
  for (const auto& kv : g.kvs()) {
    if (!is_record(kv.key)) kept.add_kv_borrowed(std::string(kv.key), kv.value);
  }
  GgufWriter want;
  add_source_record(want, source_record(model, kept.kvs()));
  std::vector<std::string> problems;
  for (const auto& kv : want.kvs()) {
    const auto* mine = g.find_kv(kv.key);
    if (!mine || !same_encoding(kv.type, kv.encoded, mine->value)) {
      problems.push_back(path + ": KV '" + kv.key + "' " + (mine ? "does not record" : "is missing from the record of") +
                         " the source's layout as write-package records it");
    }
  }
  for (const auto& kv : g.kvs()) {
    if (is_record(kv.key) && !want.has_kv(kv.key)) {
      problems.push_back(path + ": KV '" + std::string(kv.key) + "' is not part of the record write-package makes for this source");
    }
  }
  return problems;
}

}  // namespace skippy::detail
