#include "skippy/hub_stream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "hub/hub_stream.h"
#include "source/hub_provenance.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/source.h"
#include "skippy/hub_publish.h"
#include "util/file.h"
#include "util/sha256.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using Range = detail::ByteRanges::Range;

// The header is looked for in the first 1 MiB, then in as many bytes as
// those say it needs (at least half as many again), up to this (a
// tokenizer of a million tokens is well under it).
constexpr uint64_t kFirstHeaderBytes = uint64_t{1} << 20;
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 30;

// What a file of `bytes` takes on disk, in whole 4 KiB blocks.
uint64_t disk_blocks(uint64_t bytes) { return (bytes + 4095) / 4096 * 4096; }

// A whole (small) file to disk, ranges written in place. Its blocks are
// reserved at the first bytes, so only once the Hub's HEAD agreed with the
// size the caller checked (against its caps and the disk budget).
class FileTarget final : public detail::RangeTarget {
 public:
  FileTarget(std::string what, uint64_t size, const fs::path& path) : file(path), what_(std::move(what)), size_(size) {}
  const std::string& what() const override { return what_; }
  uint64_t size() const override { return size_; }
  std::vector<Range> missing() const override { return size_ ? std::vector<Range>{{0, size_}} : std::vector<Range>{}; }
  uint64_t received() const override { return got_; }
  void write_at(uint64_t offset, std::span<const uint8_t> data) override {
    if (offset + data.size() > size_) throw_integrity(what_ + ": more bytes arrived than the file has");
    std::call_once(preallocated_, [&] { file.preallocate(size_); });
    file.pwrite_all(offset, data);
    got_ += data.size();
  }
  void pump(std::chrono::milliseconds wait) override { std::this_thread::sleep_for(wait); }
  void notify() override {}
  AtomicFile file;

 private:
  std::string what_;
  uint64_t size_;
  std::atomic<uint64_t> got_{0};
  std::once_flag preallocated_;
};

}  // namespace

// Everything the source shares between the reader and the download threads
// (under mu: the per-shard streams, the error, the cancel flag).
struct StreamedHubSource::State {
  HubConfig hub;
  StreamSourceOptions opt;
  std::string repo, commit;
  SourceProvenance provenance;
  std::vector<RemoteFile> files;        // shards, in order
  std::vector<fs::path> placeholders;   // each shard's header on disk (its stream reads it from there)
  std::vector<uint64_t> header_lengths;  // each shard's header bytes (its stream fetches the rest)
  std::vector<std::string> first_chunks;  // each shard's first Xet chunk hash (a publish's dedupe hint)
  std::vector<std::string> projectors;
  std::vector<RemoteFile> projector_files;
  std::vector<RemoteFile> publisher_files;  // the repository's, at its top level (when asked for)
  fs::path local;
  uint64_t total = 0, placeholder_bytes = 0, window = 0;
  uint64_t reserved = 0;  // bytes taken from opt.disk_budget, given back by the destructor

  // Room on disk for `bytes` more, taken from the disk budget when there is
  // one, before a byte of them is fetched; refused (kUsage) when they do not fit.
  void reserve(uint64_t bytes, const std::string& what_for) {
    if (!opt.disk_budget || bytes == 0) return;
    if (!opt.disk_budget->try_acquire(bytes)) {
      throw Error(ErrorKind::kUsage, "--max-disk " + std::to_string(opt.disk_budget->limit()) + " bytes cannot hold " +
                                         what_for + " (" + std::to_string(bytes) + " bytes on disk, " +
                                         std::to_string(opt.disk_budget->used()) +
                                         " held already; refused before downloading it)");
    }
    reserved += bytes;
  }
  // What the disk budget has room for now (no budget: no limit).
  uint64_t room() const {
    if (!opt.disk_budget) return UINT64_MAX;
    const uint64_t used = opt.disk_budget->used();
    return opt.disk_budget->limit() > used ? opt.disk_budget->limit() - used : 0;
  }
  void give_back_reserved() {
    if (opt.disk_budget) opt.disk_budget->release(reserved);
    reserved = 0;
  }

  // A range's buffer. Buffers the reader is done with are kept for the next
  // ranges (no zero-filling, no fresh pages to fault in and hand back to the
  // kernel for every range: that cost as much as a copy of the stream).
  struct Block {
    std::unique_ptr<uint8_t[]> bytes;
    uint64_t capacity = 0;
  };
  std::vector<Block> free_blocks;  // (mu)

  // (mu) A buffer of at least n bytes, contents undefined.
  Block take_block(uint64_t n) {
    for (auto it = free_blocks.begin(); it != free_blocks.end(); ++it) {
      if (it->capacity >= n) {
        Block b = std::move(*it);
        free_blocks.erase(it);
        return b;
      }
    }
    return {std::unique_ptr<uint8_t[]>(new uint8_t[n]), n};
  }
  // (mu) Kept while no more than the window's worth are idle.
  void give_block(Block b) {
    uint64_t idle = b.capacity;
    for (const auto& f : free_blocks) idle += f.capacity;
    if (idle <= window) free_blocks.push_back(std::move(b));
  }

  // One shard's bytes as they arrive: ranges are admitted while they fit
  // in the window ahead of the reader, held in memory until read.
  class Shard final : public detail::RangeTarget {
   public:
    // `base`: the bytes of the shards before this one (the window is counted
    // over the whole stream, so the next shard's first ranges are asked for
    // while this one's last are still arriving). Its first `header` bytes
    // are read from `placeholder` (fetched once, for the header, and not
    // held in memory while the stream runs).
    Shard(State& st, std::string what, uint64_t size, uint64_t base, const fs::path& placeholder, uint64_t header)
        : st_(st), what_(std::move(what)), size_(size), prefix_(header), base_(base),
          header_(header > 0 ? MappedFile::open(placeholder) : nullptr) {}
    const std::string& what() const override { return what_; }
    uint64_t size() const override { return size_; }
    std::vector<Range> missing() const override {
      return prefix_ < size_ ? std::vector<Range>{{prefix_, size_}} : std::vector<Range>{};
    }
    uint64_t received() const override {
      std::lock_guard g(st_.mu);  // a connection whose range gave up asks while others still write
      return received_;
    }

    bool admit(uint64_t first, uint64_t end, const std::atomic<bool>& stop) override {
      std::unique_lock g(st_.mu);
      for (;;) {
        if (st_.cancelled || st_.error || stop) return false;
        if (first <= consumed_ || base_ + end <= st_.consumed_total + st_.window) break;
        st_.cv.wait_for(g, std::chrono::milliseconds(100));
      }
      bufs_.emplace(first, Buf{end, st_.take_block(end - first), 0});
      admitted_ += end - first;
      if (all_admitted()) st_.cv.notify_all();  // the next shard may start
      return true;
    }

    // Every range was asked for (or the fetch ended): the next shard's may start (st_.mu).
    bool all_admitted() const { return fetch_ended || prefix_ + admitted_ >= size_; }
    bool fetch_ended = false;  // (st_.mu)

    void write_at(uint64_t offset, std::span<const uint8_t> data) override {
      Buf* b = nullptr;
      uint64_t first = 0;
      {
        std::lock_guard g(st_.mu);
        auto it = bufs_.upper_bound(offset);
        if (it != bufs_.begin()) {
          --it;
          if (offset + data.size() <= it->second.end) {
            b = &it->second;
            first = it->first;
          }
        }
      }
      if (!b) throw_integrity(what_ + ": bytes arrived outside every range asked for");
      // One thread per byte offset; the buffer stays until the reader has
      // taken what `filled` covers, so the copy needs no lock.
      std::memcpy(b->data.bytes.get() + (offset - first), data.data(), data.size());
      {
        std::lock_guard g(st_.mu);
        b->filled = std::max<uint64_t>(b->filled, offset - first + data.size());
        received_ += data.size();
        // Wake the reader only when it waits (curl hands over 16 KiB at a time).
        if (st_.reader_waiting) st_.cv.notify_all();
      }
      if (st_.opt.on_bytes) st_.opt.on_bytes(data.size());
    }

    void pump(std::chrono::milliseconds wait) override {
      std::unique_lock g(st_.mu);
      pump_cv_.wait_for(g, wait, [&] { return woken_; });
      woken_ = false;
    }
    void notify() override {
      std::lock_guard g(st_.mu);
      woken_ = true;
      pump_cv_.notify_all();
    }

    // The reader (holding st_.mu through g): [offset, offset + into.size()).
    void read(std::unique_lock<std::mutex>& g, uint64_t offset, std::span<uint8_t> into) {
      if (offset != consumed_ || offset + into.size() > size_) {
        throw Error(ErrorKind::kInvalidInput, what_ + ": read out of order (at " + std::to_string(offset) + ", expected " +
                                                  std::to_string(consumed_) + ")");
      }
      size_t done = 0;
      while (done < into.size()) {
        st_.check(g);
        if (offset < prefix_) {
          // The header, from the placeholder. Only the reader moves
          // consumed_, so the lock is not needed for the read itself.
          const size_t n = static_cast<size_t>(std::min<uint64_t>(prefix_ - offset, into.size() - done));
          g.unlock();
          header_->pread_exact(offset, into.subspan(done, n));  // (a throw leaves g unlocked: the caller only unwinds)
          g.lock();
          done += n;
          offset += n;
          consumed_ = offset;
          st_.consumed_total += n;
          st_.cv.notify_all();  // room in the window for more ranges
          continue;
        }
        auto it = bufs_.upper_bound(offset);
        if (it == bufs_.begin() || std::prev(it)->second.end <= offset) {
          st_.wait_for_bytes(g);  // not asked for yet
          continue;
        }
        --it;
        const uint64_t first = it->first;
        Buf& b = it->second;
        const uint64_t avail = first + b.filled > offset ? first + b.filled - offset : 0;
        if (avail == 0) {
          st_.wait_for_bytes(g);
          continue;
        }
        const size_t n = static_cast<size_t>(std::min<uint64_t>(avail, into.size() - done));
        std::memcpy(into.data() + done, b.data.bytes.get() + (offset - first), n);
        done += n;
        offset += n;
        consumed_ = offset;
        st_.consumed_total += n;
        if (offset >= b.end) {
          st_.give_block(std::move(b.data));
          bufs_.erase(it);  // taken whole: room for the next range
          st_.cv.notify_all();
        }
      }
    }

   private:
    struct Buf {
      uint64_t end;
      Block data;
      uint64_t filled;  // bytes from the range's start that arrived
    };
    State& st_;
    std::string what_;
    uint64_t size_, prefix_, base_;
    std::shared_ptr<const MappedFile> header_;  // the placeholder, for the first prefix_ bytes
    uint64_t admitted_ = 0;         // bytes of the ranges admitted (st_.mu)
    std::map<uint64_t, Buf> bufs_;  // by first byte (st_.mu)
    uint64_t consumed_ = 0;         // the reader's position (st_.mu)
    uint64_t received_ = 0;
    bool woken_ = false;
    std::condition_variable pump_cv_;  // fetch_ranges' waiting thread (st_.mu)
  };

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::unique_ptr<Shard>> shards;  // created in order by the download thread (mu)
  std::exception_ptr error;                    // the download's failure (mu)
  bool cancelled = false;                      // (mu)
  bool reader_waiting = false;                 // the reader waits for bytes (mu)
  uint64_t consumed_total = 0;                 // bytes the reader took, over every shard (mu)

  // The reader (holding mu through g) waits for more bytes to arrive.
  void wait_for_bytes(std::unique_lock<std::mutex>& g) {
    reader_waiting = true;
    cv.wait_for(g, std::chrono::milliseconds(100));
    reader_waiting = false;
  }
  std::once_flag started;
  std::thread downloader;

  // Throws the download's failure (the reader holds mu).
  void check(std::unique_lock<std::mutex>&) const {
    if (error) std::rethrow_exception(error);
    if (cancelled) throw Error(ErrorKind::kTransport, "the streamed source was stopped");
  }

  unsigned connections() const { return std::max(1u, hub.connections); }

  // Shards in order, each fetched on its own thread over the shared
  // connections; the next one starts as soon as every range of the one
  // before has been asked for, so no connection idles while a shard's
  // last ranges arrive (the window, counted over the whole stream, bounds
  // the memory as before).
  void download() {
    // The pool outlives every fetcher (declared first, so destroyed last):
    // a throw below still joins them before the pool goes.
    std::optional<detail::ConnectionPool> pool;
    std::vector<std::thread> fetchers;
    try {
      pool.emplace(connections());
      uint64_t base = 0;
      for (size_t i = 0; i < files.size(); ++i) {
        Shard* s = nullptr;
        {
          std::unique_lock g(mu);
          if (cancelled || error) break;
          shards.push_back(
              std::make_unique<Shard>(*this, what(i), *files[i].size, base, placeholders[i], header_lengths[i]));
          s = shards.back().get();
          cv.notify_all();
        }
        base += *files[i].size;
        fetchers.emplace_back([this, i, s, &pool] {
          try {
            detail::fetch_hub_ranges(hub, repo, commit, files[i], *s, *pool, range_bytes(i));
          } catch (...) {
            std::lock_guard g(mu);
            if (!error) error = std::current_exception();
          }
          std::lock_guard g(mu);
          s->fetch_ended = true;
          cv.notify_all();
        });
        std::unique_lock g(mu);
        cv.wait(g, [&] { return s->all_admitted() || error || cancelled; });
      }
      for (auto& t : fetchers) t.join();
    } catch (...) {  // (the pool or a thread could not start)
      std::lock_guard g(mu);
      if (!error) error = std::current_exception();
      cancelled = true;
      cv.notify_all();
    }
    for (auto& t : fetchers) {
      if (t.joinable()) t.join();
    }
  }

  uint64_t range_bytes(size_t i) const {
    return opt.range_bytes ? opt.range_bytes
                           : detail::range_size_for(*files[i].size, connections(), std::max<uint64_t>(1, hub.min_range_bytes));
  }

  std::string what(size_t i) const { return "hf://" + repo + "@" + commit + ": " + files[i].path; }

  // Shard i's first bytes, grown until its GGUF header parses, then its
  // placeholder (the header, then a hole to the shard's size). The bytes
  // that arrive decide: a file they refuse (a bad magic or version, a count
  // that cannot fit in the shard, a malformed KV) is refused at once, and
  // the prefix grows to what the header is seen to need (at least half as
  // much again), within the 1 GiB cap and the room the disk budget has (the
  // header goes to disk), which is taken before the placeholder is written.
  // One shard's header is in memory at a time: the placeholder holds it
  // for the stream.
  void fetch_header(size_t i, detail::ConnectionPool& pool) {
    const uint64_t size = *files[i].size;
    const uint64_t room_now = room();
    // The most the prefix may grow to: the cap, the shard, and the whole
    // blocks the budget has room for.
    const uint64_t most = std::min({size, kMaxHeaderBytes, room_now / 4096 * 4096});
    auto too_big = [&](uint64_t needed) {
      if (needed > kMaxHeaderBytes) {
        return Error(ErrorKind::kInvalidInput, what(i) + ": its GGUF header needs at least " + std::to_string(needed) +
                                                   " bytes, over the " + std::to_string(kMaxHeaderBytes) +
                                                   "-byte cap for a header (refused without fetching it)");
      }
      return Error(ErrorKind::kUsage, "--max-disk " + std::to_string(opt.disk_budget->limit()) +
                                          " bytes cannot hold even the source's GGUF headers: " + what(i) +
                                          "'s needs at least " + std::to_string(needed) + " bytes, " +
                                          std::to_string(room_now) + " are left (refused before writing it)");
    };
    // Room for the most the prefix may grow to, reserved but not touched:
    // a page is resident only once its bytes arrive, and the prefix grows
    // in place (never copied into a larger buffer).
    const std::unique_ptr<uint8_t[]> prefix(new uint8_t[static_cast<size_t>(most)]);
    uint64_t have = 0, want = std::min(most, kFirstHeaderBytes), header_end = 0;
    for (;;) {
      if (want > have) {
        detail::PrefixTarget t(what(i), size, have, std::span<uint8_t>(prefix.get() + have, static_cast<size_t>(want - have)));
        detail::fetch_hub_ranges(hub, repo, commit, files[i], t, pool, want - have);
        if (!t.complete()) throw Error(ErrorKind::kTransport, what(i) + ": the header's bytes did not all arrive");
        if (opt.on_bytes) opt.on_bytes(want - have);
        have = want;
      }
      // Throws what these bytes already refuse, whatever follows them.
      const auto parsed =
          GgufFile::parse_prefix(std::span<const uint8_t>(prefix.get(), static_cast<size_t>(have)), size, files[i].path);
      if (parsed.file) {
        header_end = parsed.file->header_end();
        break;
      }
      if (parsed.needed > most) throw too_big(parsed.needed);
      // What the bytes say is needed, and at least half as much again (a
      // header of many small entries is parsed a few times, not once per
      // entry), within the most.
      want = std::min(most, std::max(parsed.needed, have + have / 2));
    }
    const uint64_t on_disk = disk_blocks(header_end);
    reserve(on_disk, what(i) + "'s GGUF header");
    const fs::path place = opt.header_dir / fs::path(files[i].path).filename();
    write_file_atomic(place, std::string_view(reinterpret_cast<const char*>(prefix.get()), static_cast<size_t>(header_end)),
                      Durability::kRenameOnly);
    std::error_code ec;
    fs::resize_file(place, size, ec);  // a hole: no blocks for the tensors' bytes
    if (ec) throw Error(ErrorKind::kIo, place.string() + ": cannot extend the placeholder: " + ec.message());
    placeholder_bytes += on_disk;
    if (i == 0) local = place;
    placeholders[i] = place;
    header_lengths[i] = header_end;
    // The first chunk is at most 128 KiB (the chunker's forced cut).
    const size_t head = static_cast<size_t>(std::min<uint64_t>(have, 128 * 1024));
    first_chunks[i] = xet_first_chunk_hash(std::span<const uint8_t>(prefix.get(), head));
  }
};

StreamedHubSource::StreamedHubSource(const std::string& coordinate, const HubConfig& hub, StreamSourceOptions options)
    : s_(std::make_unique<State>()) {
  auto& s = *s_;
  s.hub = hub;
  s.opt = std::move(options);
  if (s.opt.header_dir.empty()) throw Error(ErrorKind::kUsage, "a streamed source needs a directory for its headers");
  auto coord = parse_model_coordinate(coordinate);
  if (!s.opt.revision.empty()) coord.revision = s.opt.revision;
  s.repo = coord.repo_id;
  const RemoteListing listing = detail::list_hub_repo(hub, coord.repo_id, coord.revision);
  s.commit = listing.commit;
  std::vector<std::string> paths;
  for (const auto& f : listing.files) {
    paths.push_back(f.path);
    std::string name = fs::path(f.path).filename().string();
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (name.starts_with("mmproj") && name.ends_with(".gguf") && f.sha256 && is_sha256_hex(*f.sha256)) {
      s.projectors.push_back(f.path);
      s.projector_files.push_back({f.path, f.sha256, f.size, "the Hub's listing"});
    }
  }
  if (s.opt.publisher_files) {
    for (const auto name : detail::kHubPublisherFiles) {
      for (const auto& f : listing.files) {
        if (f.path != name) continue;
        // The cap applies to what the listing says, before a byte is asked for or reserved.
        if (f.size > detail::kPublisherFileMaxBytes) {
          throw_invalid("hf://" + s.repo + "@" + s.commit + ": " + f.path + ": the Hub lists " + std::to_string(f.size) +
                        " bytes, over the " + std::to_string(detail::kPublisherFileMaxBytes) +
                        "-byte cap for a publisher file (refused before downloading it)");
        }
        s.publisher_files.push_back({f.path, f.sha256, f.size, "the Hub's listing", detail::kPublisherFileMaxBytes});
      }
    }
  }
  const auto files = match_distribution(paths, coord);
  const std::string declared_by = "the Hub's listing";
  for (const auto& p : files) {
    const auto it = std::find_if(listing.files.begin(), listing.files.end(), [&](const auto& f) { return f.path == p; });
    if (!it->sha256 || !is_sha256_hex(*it->sha256)) {
      throw_invalid("hf://" + s.repo + "@" + s.commit + ": " + p + " has no LFS SHA-256 in the Hub's listing, so its "
                    "streamed bytes could not be checked (run without --stream)");
    }
    s.files.push_back({p, it->sha256, it->size, declared_by});
    s.total += it->size;
  }
  uint64_t widest = 1;
  for (size_t i = 0; i < s.files.size(); ++i) widest = std::max(widest, s.range_bytes(i));
  s.window = s.opt.window_bytes ? s.opt.window_bytes : uint64_t{2} * s.connections() * widest;

  // Placeholders: a fresh directory (an interrupted run's is replaced).
  std::error_code ec;
  fs::remove_all(s.opt.header_dir, ec);
  fs::create_directories(s.opt.header_dir, ec);
  if (ec) throw Error(ErrorKind::kIo, s.opt.header_dir.string() + ": cannot create: " + ec.message());
  s.placeholders.resize(s.files.size());
  s.header_lengths.resize(s.files.size());
  s.first_chunks.resize(s.files.size());
  try {
    // The files downloaded whole take the room their listed sizes need
    // first (fetch_projectors and fetch_publisher_files write them later),
    // then each header what it turns out to need.
    uint64_t listed = 0;
    for (const auto* group : {&s.projector_files, &s.publisher_files}) {
      for (const auto& f : *group) listed += disk_blocks(f.size.value_or(0));
    }
    s.reserve(listed, "the repository's projectors" + std::string(s.opt.publisher_files ? " and publisher files" : ""));
    detail::ConnectionPool pool(1);
    for (size_t i = 0; i < s.files.size(); ++i) s.fetch_header(i, pool);
  } catch (...) {
    // The destructor does not run for a constructor that throws.
    s.give_back_reserved();
    fs::remove_all(s.opt.header_dir, ec);
    throw;
  }

  std::vector<std::string> expected;
  for (const auto& f : s.files) expected.push_back(*f.sha256);
  s.provenance = detail::hub_source_provenance(coord, s.commit, files, std::move(expected));
}

StreamedHubSource::~StreamedHubSource() {
  {
    std::lock_guard g(s_->mu);
    s_->cancelled = true;
    s_->cv.notify_all();
  }
  if (s_->downloader.joinable()) s_->downloader.join();
  std::error_code ec;
  fs::remove_all(s_->opt.header_dir, ec);
  s_->give_back_reserved();
}

const fs::path& StreamedHubSource::local() const { return s_->local; }
const SourceProvenance& StreamedHubSource::provenance() const { return s_->provenance; }
uint64_t StreamedHubSource::total_bytes() const { return s_->total; }
uint64_t StreamedHubSource::placeholder_disk_bytes() const { return s_->placeholder_bytes; }
const std::vector<std::string>& StreamedHubSource::xet_dedupe_hints() const { return s_->first_chunks; }
const std::vector<std::string>& StreamedHubSource::projector_paths() const { return s_->projectors; }

uint64_t StreamedHubSource::projector_bytes() const {
  uint64_t n = 0;
  for (const auto& f : s_->projector_files) n += f.size.value_or(0);
  return n;
}

uint64_t StreamedHubSource::publisher_bytes() const {
  uint64_t n = 0;
  for (const auto& f : s_->publisher_files) n += f.size.value_or(0);
  return n;
}

namespace {

// Small files of the repository whole into `dir` over the stream's
// transport, each of the listed size (fetch checks it) and, when the Hub
// declares one, of its SHA-256, checked before the writer reads it.
std::vector<fs::path> fetch_whole(const HubConfig& hub, const std::string& repo, const std::string& commit,
                                  const std::vector<RemoteFile>& files, const fs::path& dir, unsigned connections) {
  std::vector<fs::path> out;
  if (files.empty()) return out;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::kIo, dir.string() + ": cannot create: " + ec.message());
  detail::ConnectionPool pool(connections);
  for (const auto& f : files) {
    const std::string what = "hf://" + repo + "@" + commit + ": " + f.path;
    const uint64_t size = f.size.value_or(0);
    const fs::path place = dir / fs::path(f.path).filename();
    {
      FileTarget t(what, size, place);
      detail::fetch_hub_ranges(hub, repo, commit, f, t, pool,
                               detail::range_size_for(size, connections, std::max<uint64_t>(1, hub.min_range_bytes)));
      t.file.commit(/*sync_directory=*/false);
    }
    if (f.sha256) {
      const std::string sha = sha256_file(place);
      if (!sha256_equal(sha, *f.sha256)) {
        throw_integrity(what + ": the bytes received have SHA-256 " + sha + ", not the " + *f.sha256 + " the Hub declares");
      }
    }
    out.push_back(place);
  }
  return out;
}

}  // namespace

std::vector<fs::path> StreamedHubSource::fetch_projectors() {
  auto& s = *s_;
  return fetch_whole(s.hub, s.repo, s.commit, s.projector_files, s.opt.header_dir / "projectors", s.connections());
}

std::vector<fs::path> StreamedHubSource::fetch_publisher_files() {
  auto& s = *s_;
  return fetch_whole(s.hub, s.repo, s.commit, s.publisher_files, s.opt.header_dir / "publisher", s.connections());
}

void StreamedHubSource::read(size_t shard, uint64_t offset, std::span<uint8_t> into) {
  auto& s = *s_;
  std::call_once(s.started, [&] { s.downloader = std::thread([&s] { s.download(); }); });
  std::unique_lock g(s.mu);
  for (;;) {
    s.check(g);
    if (shard < s.shards.size()) break;
    s.cv.wait_for(g, std::chrono::milliseconds(100));
  }
  s.shards[shard]->read(g, offset, into);
}

}  // namespace skippy
