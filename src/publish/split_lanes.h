// How a source pass is laid out (internal to the package writer, beside
// split_stream.cpp, which runs it): the lanes a pass may be cut into, and
// the disk a streamed pass holds at its worst point (peak_open_bytes in
// split_stream.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "publish/split_stream.h"

namespace skippy::detail {

// A place in the source: (shard, byte offset), ordered.
using Position = std::pair<size_t, uint64_t>;

// The part of the pass one Pipeline does: its outputs, and the source
// range [begin, end) that holds all their pieces and no other output's.
struct Lane {
  std::vector<size_t> outputs;
  Position begin{0, 0};
  Position end{SIZE_MAX, 0};  // the end of the last shard
};

// The lanes of a pass: several when every shard's digest is known and no
// disk budget asks for one output at a time (independent source ranges
// holding whole outputs, cut near equal shares of the bytes), else one.
std::vector<Lane> plan_lanes(const std::vector<std::shared_ptr<const MappedFile>>& shards,
                             const std::vector<StreamOutput>& outputs, const StreamOptions& opt);

}  // namespace skippy::detail
