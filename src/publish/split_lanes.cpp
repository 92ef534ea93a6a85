#include "publish/split_lanes.h"
#include "util/parallel.h"

#include <algorithm>

namespace skippy::detail {

// Where the pass can be cut into independent lanes: every shard's digest is
// known (no shard hash chain needs the source in order) and no disk budget
// asks for one output at a time. Each lane gets a contiguous source range
// that holds all the pieces of its outputs and no other output's piece, cut
// as near an equal share of the bytes as the layout allows, so the output
// hash chains of different fragments run on different cores. One lane (the
// whole pass) when that is not possible.
std::vector<Lane> plan_lanes(const std::vector<std::shared_ptr<const MappedFile>>& shards,
                             const std::vector<StreamOutput>& outputs, const StreamOptions& opt) {
  Lane all;
  for (size_t o = 0; o < outputs.size(); ++o) all.outputs.push_back(o);
  const size_t want = std::min<size_t>(opt.lanes, worker_threads(opt.threads));
  bool known = opt.known_shard_sha256.size() >= shards.size();
  for (size_t i = 0; known && i < shards.size(); ++i) known = opt.known_shard_sha256[i].has_value();
  if (want < 2 || !known || opt.before_create || opt.read_source || opt.observe_source) return {all};

  struct Span {
    Position first, end;
    uint64_t bytes = 0;
    size_t output;
  };
  std::vector<Span> spans;
  std::vector<size_t> empty;  // outputs without a piece (all header)
  uint64_t total = 0;
  for (size_t o = 0; o < outputs.size(); ++o) {
    Span sp{{SIZE_MAX, 0}, {0, 0}, 0, o};
    for (const auto& pc : outputs[o].pieces) {
      if (pc.bytes == 0) continue;
      sp.first = std::min(sp.first, Position{pc.shard, pc.src_offset});
      sp.end = std::max(sp.end, Position{pc.shard, pc.src_offset + pc.bytes});
      sp.bytes += pc.bytes;
    }
    if (sp.bytes == 0) {
      empty.push_back(o);
      continue;
    }
    total += sp.bytes;
    spans.push_back(sp);
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.first < b.first; });
  // Where a cut may go: before span i when no earlier span reaches past its
  // start. Each cut k is the candidate nearest to k/want of the bytes.
  std::vector<std::pair<size_t, uint64_t>> candidates;  // (span index, bytes before it)
  {
    Position reach{0, 0};
    uint64_t before = 0;
    for (size_t i = 0; i < spans.size(); ++i) {
      if (i > 0 && spans[i].first >= reach) candidates.emplace_back(i, before);
      reach = std::max(reach, spans[i].end);
      before += spans[i].bytes;
    }
  }
  std::vector<size_t> cuts;
  for (size_t k = 1, c = 0; k < want && c < candidates.size(); ++k) {
    const uint64_t target = total * k / want;
    auto distance = [&](size_t j) {
      const uint64_t b = candidates[j].second;
      return b > target ? b - target : target - b;
    };
    while (c + 1 < candidates.size() && distance(c + 1) <= distance(c)) ++c;
    cuts.push_back(candidates[c].first);
    ++c;  // cuts strictly increase
  }
  std::vector<Lane> lanes(1);
  lanes[0].outputs = empty;
  lanes[0].begin = spans.empty() ? Position{0, 0} : spans.front().first;
  Position reach{0, 0};
  for (size_t i = 0, next = 0; i < spans.size(); ++i) {
    if (next < cuts.size() && cuts[next] == i) {
      lanes.back().end = reach;
      lanes.emplace_back();
      lanes.back().begin = spans[i].first;
      ++next;
    }
    lanes.back().outputs.push_back(spans[i].output);
    reach = std::max(reach, spans[i].end);
  }
  lanes.back().end = reach;
  if (lanes.size() < 2) return {all};
  return lanes;
}

uint64_t peak_open_bytes(const std::vector<StreamOutput>& outputs) {
  // Each output with pieces is open over [its first piece, the end of its
  // last): +size where it opens, -size where it closes (closings first at
  // one position: the reader cuts its reads at an output's end).
  struct Event {
    Position at;
    int kind;  // 0: close, 1: open
    uint64_t bytes;
  };
  std::vector<Event> events;
  uint64_t base = 0;
  for (const auto& o : outputs) {
    Position first{SIZE_MAX, 0}, end{0, 0};
    bool any = false;
    for (const auto& pc : o.pieces) {
      if (pc.bytes == 0) continue;
      any = true;
      first = std::min(first, Position{pc.shard, pc.src_offset});
      end = std::max(end, Position{pc.shard, pc.src_offset + pc.bytes});
    }
    if (!any) {
      base += o.total_size;  // created at the start; counted as held throughout
      continue;
    }
    events.push_back({first, 1, o.total_size});
    events.push_back({end, 0, o.total_size});
  }
  std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.at != b.at ? a.at < b.at : a.kind < b.kind;
  });
  uint64_t open = base, peak = base;
  for (const auto& e : events) {
    if (e.kind == 1) {
      open += e.bytes;
      peak = std::max(peak, open);
    } else {
      open -= e.bytes;
    }
  }
  return peak;
}

size_t stream_lanes(const std::vector<std::shared_ptr<const MappedFile>>& shards,
                    const std::vector<StreamOutput>& outputs, const StreamOptions& options) {
  return plan_lanes(shards, outputs, options).size();
}

}  // namespace skippy::detail
