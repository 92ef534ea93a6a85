// The source's file layout as a schema 1 package records it (skippy/package.h
// SourceLayout): the source's KVs are shared/metadata.gguf's, in order, less
// the fragment keys; the tensor order, the shard boundaries and the split
// keys are its skippy.package.source.* record (skippy/package_layout.h).
#include "format/schema1/reader.h"

#include <algorithm>
#include <set>

#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"

namespace skippy::schema1 {

SourceLayout source_layout_v1(const PackageManifest& m, const PackageCatalog& cat) {
  SourceLayout out;
  const auto fail = [&](std::string what) {
    out.files.clear();
    out.missing = std::move(what);
    return out;
  };
  const std::string meta(kMetadataPath);
  if (!cat.carrier_file) throw Error(ErrorKind::kUsage, "source_layout: " + meta + " was not read into the catalog");
  const GgufFile& g = *cat.carrier_file;
  if (const auto why = g.get_string(kSourceUnrecordedKey)) {
    return fail("the source's layout: write-package did not record it, because " + std::string(*why));
  }
  const auto* names_kv = g.find_kv(kSourceTensorsKey);
  if (!names_kv) {
    return fail("the source's tensor order and shard boundaries (" + meta + " has no " + std::string(kSourceTensorsKey) +
                ": the package was written by the reference writer, by an older skippy-model-package, or converted "
                "from package schema 2)");
  }
  const std::string bad = meta + ": " + std::string(kSourceRecordPrefix) + "*: ";
  const auto names = names_kv->value.as_string_array();
  const auto* counts_kv = g.find_kv(kSourceFileTensorsKey);
  const auto counts = counts_kv ? counts_kv->value.as_int_array() : std::nullopt;
  if (!names || !counts) throw_invalid(bad + "tensors must be a string array and file_tensors an integer array");
  std::vector<std::string> split_keys;
  if (const auto* kv = g.find_kv(kSourceSplitKeysKey)) {
    const auto keys = kv->value.as_string_array();
    if (!keys) throw_invalid(bad + "split_keys must be a string array");
    for (const auto k : *keys) {
      if (!gguf_split_kv(k, 0, 1, 1)) throw_invalid(bad + "split_keys names \"" + std::string(k) + "\", not a split key");
      if (std::find(split_keys.begin(), split_keys.end(), k) != split_keys.end() || g.find_kv(k)) {
        throw_invalid(bad + "split_keys names " + std::string(k) + " twice");
      }
      split_keys.emplace_back(k);
    }
  }
  if (counts->size() != m.source_model.files.size()) {
    throw_invalid(bad + "file_tensors has " + std::to_string(counts->size()) + " entries for the " +
                  std::to_string(m.source_model.files.size()) + " files of source_model.files");
  }
  if (names->size() != cat.tensors.size()) {
    throw_invalid(bad + "tensors lists " + std::to_string(names->size()) + " tensors, the package holds " +
                  std::to_string(cat.tensors.size()));
  }
  std::set<size_t> seen;
  size_t next = 0;
  for (size_t f = 0; f < counts->size(); ++f) {
    const int64_t n = (*counts)[f];
    if (n < 0 || static_cast<uint64_t>(n) > names->size() - next) {
      throw_invalid(bad + "file_tensors does not add up to the " + std::to_string(names->size()) + " tensors listed");
    }
    SourceLayout::File file;
    if (f == 0) {
      for (const auto& kv : g.kvs()) {
        if (!is_fragment_key(kv.key)) file.kvs.push_back(&kv);
      }
      file.alignment = g.alignment();
    }
    file.split_keys = split_keys;
    for (size_t i = 0; i < static_cast<size_t>(n); ++i, ++next) {
      const auto it = cat.tensor_index.find(std::string((*names)[next]));
      if (it == cat.tensor_index.end() || !seen.insert(it->second).second) {
        throw_invalid(bad + "tensors names '" + std::string((*names)[next]) + "', which is " +
                      (it == cat.tensor_index.end() ? "in no fragment" : "listed twice"));
      }
      file.tensors.push_back(it->second);
    }
    out.files.push_back(std::move(file));
  }
  if (next != names->size()) {
    throw_invalid(bad + "file_tensors does not add up to the " + std::to_string(names->size()) + " tensors listed");
  }
  return out;
}

}  // namespace skippy::schema1
