// Package schema 1's files and headers (the spec's layout): metadata,
// embeddings, output, then one fragment per layer, each a GGUF of the
// source's KVs that its role keeps. write-package's schema 1 layout and
// convert-package --to 1 build their fragments with these. Internal to the
// publish library.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"

namespace skippy::detail {

// A schema 1 fragment: its path, role and tensors (source order).
struct Fragment {
  std::string rel_path;
  PartRole role;
  uint32_t layer = 0;
  std::vector<const SourceTensor*> tensors;
};

// The spec's fragments for these tensors: metadata, embeddings, output, then
// one per layer (each layer must have a tensor).
std::vector<Fragment> plan_fragments(const std::string& source_name, const std::vector<SourceTensor>& tensors,
                                     uint32_t layer_count);
// A fragment's GGUF: the KVs of `primary` that fragment_keeps_kv keeps, its
// role keys, its tensors (payload read from files[tensor.shard]).
// drop_default_alignment: leave out a general.alignment of 32 (GGUF's
// default, which a schema 2 carrier adds when its source had none).
GgufWriter fragment_writer(const GgufFile& primary, const std::vector<std::shared_ptr<const MappedFile>>& files,
                           const Fragment& f, bool drop_default_alignment = false);

}  // namespace skippy::detail
