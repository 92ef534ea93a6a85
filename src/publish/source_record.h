// What write-package records in shared/metadata.gguf of the source file(s)
// beyond their KVs (skippy/package_layout.h, kSource*Key), so that the
// source can be rebuilt byte for byte from the package (materialize
// --as-source), and validate-package's check of that record. Internal to
// the publish library.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "skippy/gguf.h"
#include "skippy/model_source.h"

namespace skippy::detail {

// The record, or why there is none: each source file's header must be
// exactly what a GGUF v3 writer lays out from what the package keeps (the
// metadata fragment's KVs, less the fragment keys, for the first file; then
// the split.* keys with gguf-split's values, last in every shard; the
// file's tensors in its order, their data contiguous at its alignment), and
// end where its last tensor's padding ends.
struct SourceRecord {
  std::vector<std::string> tensors;     // every tensor, in the source's order
  std::vector<uint64_t> file_tensors;   // per source file
  std::vector<std::string> split_keys;  // in the order each shard holds them
  std::string unrecorded;               // non-empty: why not (the rest is then empty)
};

// `metadata_kvs`: the KVs the metadata fragment carries (its fragment keys
// are passed over). Reads only the shards' headers.
SourceRecord source_record(const ModelSource& model, const std::vector<GgufWriter::Kv>& metadata_kvs);

// Adds the record's keys (or kSourceUnrecordedKey) to the metadata fragment.
void add_source_record(GgufWriter& metadata, const SourceRecord& record);

// validate-package: how the record `metadata` carries differs from what
// write-package records for `model` ("<path>: KV '...' ..."); nothing for a
// fragment that carries none (written before the record existed).
std::vector<std::string> check_source_record(const ModelSource& model, const GgufFile& metadata, const std::string& path);

}  // namespace skippy::detail
