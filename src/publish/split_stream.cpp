#include "publish/split_stream.h"
#include "publish/split_lanes.h"
#include "publish/output_readback.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <set>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "skippy/error.h"
#include "util/sha256.h"
#include "util/parallel.h"

namespace skippy::detail {
namespace {

// fsyncs at the end run on this many threads: they wait on the device.
constexpr size_t kSyncThreads = 8;

struct Segment {
  size_t output;
  size_t piece;       // index in that output's pieces
  size_t in_chunk;    // offset inside the chunk buffer
  size_t len;
  uint64_t dst;       // offset in the output
  bool ends_piece;
};

struct Chunk {
  size_t shard = 0;
  uint64_t offset = 0;
  size_t len = 0;
  bool last_of_shard = false;
  uint8_t* buf = nullptr;        // one of the pipeline's buffers: the chunk's bytes
  bool live = false;             // defined and not yet finished by every job
  std::vector<Segment> segments;
  bool src_hashed = false, out_hashed = false, written = false;
  bool writing = false;
};

// Pieces of all outputs, ordered by source position.
struct PieceRef {
  size_t shard;
  uint64_t src;
  uint64_t bytes;
  size_t output;
  size_t piece;
};

class Pipeline {
 public:
  Pipeline(const std::vector<std::shared_ptr<const MappedFile>>& shards, const std::vector<StreamOutput>& outputs,
           const StreamOptions& opt, Lane lane)
      : shards_(shards), outputs_(outputs), opt_(opt), lane_(std::move(lane)) {
    for (const size_t o : lane_.outputs) {
      for (size_t p = 0; p < outputs[o].pieces.size(); ++p) {
        const auto& pc = outputs[o].pieces[p];
        if (pc.bytes != 0) refs_.push_back({pc.shard, pc.src_offset, pc.bytes, o, p});
      }
    }
    std::sort(refs_.begin(), refs_.end(), [](const PieceRef& a, const PieceRef& b) {
      return a.shard != b.shard ? a.shard < b.shard : a.src < b.src;
    });
    slots_ = std::max<size_t>(1, opt.buffers);
    shard_ = lane_.begin.first;
    pos_ = lane_.begin.second;
    while (shard_ < shards_.size() && shards_[shard_]->size() == 0) ++shard_;  // empty files yield no chunk
    shard_sha_.resize(shards.size());
    shard_hex_.resize(shards.size());
    files_.resize(outputs.size());
    streaming_ = static_cast<bool>(opt.on_output_complete);
    out_hash_.reserve(outputs.size());
    for (size_t o = 0; o < outputs.size(); ++o) out_hash_.emplace_back(streaming_ && opt.xet_chunks);
    if (!streaming_) {
      for (const size_t o : lane_.outputs) open_output(o);
      return;
    }
    hash_left_.assign(outputs.size(), 0);
    write_left_.assign(outputs.size(), 0);
    undefined_.assign(outputs.size(), 0);
    finished_.assign(outputs.size(), 0);
    out_hex_.resize(outputs.size());
    std::vector<std::pair<size_t, uint64_t>> last(outputs.size(), {0, 0});
    for (const auto& r : refs_) {
      hash_left_[r.output] += r.bytes;
      write_left_[r.output] += r.bytes;
      ++undefined_[r.output];
      last[r.output] = std::max(last[r.output], std::pair<size_t, uint64_t>{r.shard, r.src + r.bytes});
    }
    for (const size_t o : lane_.outputs) {
      if (undefined_[o] > 0) ends_.push_back(last[o]);
    }
    std::sort(ends_.begin(), ends_.end());
  }

  // Runs this lane's pass; then collect() gives its digests.
  void run() {
    std::thread finisher;
    if (streaming_) {
      // Outputs with no piece (a metadata fragment without tensors) are complete at once.
      for (const size_t o : lane_.outputs) {
        if (undefined_[o] == 0) {
          open_output(o);
          finalize(o);
        }
      }
      // Syncing, renaming and announcing happen here, off the pipeline's workers.
      finisher = std::thread([this] { finish_loop(); });
    }
    const unsigned n = worker_threads(opt_.threads);
    std::vector<std::thread> workers;
    for (unsigned i = 0; i + 1 < n; ++i) workers.emplace_back([this] { work(); });
    work();
    for (auto& t : workers) t.join();
    if (finisher.joinable()) {
      {
        std::lock_guard g(mu_);
        fin_done_ = true;
        cv_.notify_all();
      }
      finisher.join();
    }
    // Another lane may abort() this one at any moment, even now: read under the lock.
    std::exception_ptr failed;
    {
      std::lock_guard g(mu_);
      failed = error_;
    }
    if (failed) std::rethrow_exception(failed);
  }

  // Another lane failed: stop this one (run() then throws `why`).
  void abort(std::exception_ptr why) {
    {
      std::lock_guard g(mu_);
      if (!error_) error_ = std::move(why);
      cv_.notify_all();
    }
    failed();
  }

  // Source bytes this lane walked (reported through on_bytes).
  uint64_t walked() const { return walked_; }

  // After run(): shard digests (every shard: computed here or known) and
  // this lane's output digests, each output's size checked. The files of a
  // non-streaming pass stay under their temporary names (files()).
  void collect(StreamResult& r) {
    // A shard of zero bytes never produced a chunk; its hash is of nothing.
    r.shard_sha256.clear();
    for (size_t i = 0; i < shard_sha_.size(); ++i) {
      if (known(i)) {
        r.shard_sha256.push_back(*opt_.known_shard_sha256[i]);
      } else {
        r.shard_sha256.push_back(shard_hex_[i] ? *shard_hex_[i] : shard_sha_[i].hex_digest());
      }
    }
    for (const size_t o : lane_.outputs) {
      if (streaming_) {
        if (!finished_[o]) throw_invalid(outputs_[o].final_path.string() + ": the pass ended before this output was complete");
        r.output_sha256[o] = out_hex_[o];
        continue;
      }
      struct stat st {};
      if (::fstat(files_[o]->fd(), &st) != 0) throw_io(files_[o]->temp_path().string() + ": cannot stat");
      if (static_cast<uint64_t>(st.st_size) != outputs_[o].total_size) {
        throw_invalid(files_[o]->temp_path().string() + ": wrote " + std::to_string(st.st_size) + " bytes, expected " +
                      std::to_string(outputs_[o].total_size));
      }
      // A hash_after_write output is read back by stream_split, all at once.
      if (!outputs_[o].hash_after_write) r.output_sha256[o] = out_hash_[o].finish().sha256;
    }
  }

  std::vector<std::unique_ptr<AtomicFile>>& files() { return files_; }
  const std::vector<size_t>& outputs() const { return lane_.outputs; }

 private:
  enum class Job { kNone, kRead, kSrcHash, kOutHash, kWrite };

  // Creates output o's file: reserved to its final size, header written and hashed.
  void open_output(size_t o) {
    if (streaming_ && opt_.before_create) {
      uint64_t stuck = 0;
      {
        std::lock_guard g(mu_);
        for (size_t k = 0; k < outputs_.size(); ++k) {
          if (files_[k] && !finished_[k] && undefined_[k] > 0) stuck += outputs_[k].total_size;
        }
      }
      opt_.before_create(outputs_[o].total_size, stuck);
    }
    auto f = std::make_unique<AtomicFile>(outputs_[o].final_path, Durability::kDurable, opt_.io_env);
    f->preallocate(outputs_[o].total_size);
    uint64_t at = 0;
    outputs_[o].header.for_each([&](std::span<const uint8_t> s) {
      f->pwrite_all(at, s);
      out_hash_[o].update(s);
      at += s.size();
    });
    f->start_writeback(0, at);
    files_[o] = std::move(f);
  }

  // Streaming: output o is written and hashed: check, sync, rename, announce.
  void finalize(size_t o) {
    auto& f = *files_[o];
    struct stat st {};
    if (::fstat(f.fd(), &st) != 0) throw_io(f.temp_path().string() + ": cannot stat");
    if (static_cast<uint64_t>(st.st_size) != outputs_[o].total_size) {
      throw_invalid(f.temp_path().string() + ": wrote " + std::to_string(st.st_size) + " bytes, expected " +
                    std::to_string(outputs_[o].total_size));
    }
    const OutputDigest d = outputs_[o].hash_after_write
                               ? digest_written_output(f.temp_path(), outputs_[o].total_size, opt_.xet_chunks)
                               : out_hash_[o].finish();
    f.commit(/*sync_directory=*/true);
    {
      std::lock_guard g(mu_);
      out_hex_[o] = d.sha256;
      finished_[o] = 1;
    }
    opt_.on_output_complete(o, d);
  }

  // Streaming: counts a chunk's hashed or written bytes against each output.
  void account(const Chunk& c, std::vector<uint64_t>& left) {
    for (const auto& seg : c.segments) {
      left[seg.output] -= seg.len;
      if (hash_left_[seg.output] == 0 && write_left_[seg.output] == 0 && !finished_[seg.output] &&
          std::find(ready_.begin(), ready_.end(), seg.output) == ready_.end()) {
        ready_.push_back(seg.output);
      }
    }
  }

  bool reading_done() const { return shard_ >= shards_.size() || Position{shard_, pos_} >= lane_.end; }

  void work() {
    std::unique_lock lk(mu_);
    for (;;) {
      if (error_) return;
      Job job = Job::kNone;
      Chunk* c = nullptr;
      // Ordered hash chains first (they bound throughput), then writes, then reads.
      if (!src_busy_ && src_next_ < chunks_.size() && chunks_[src_next_]->live) {
        job = Job::kSrcHash;
        c = chunks_[src_next_].get();
        src_busy_ = true;
      } else if (!out_busy_ && out_next_ < chunks_.size() && chunks_[out_next_]->live &&
                 (!opt_.observe_source || chunks_[out_next_]->src_hashed)) {  // observed before any fragment has it
        job = Job::kOutHash;
        c = chunks_[out_next_].get();
        out_busy_ = true;
      } else if (!read_busy_ && !reading_done() && slots_ > 0) {
        job = Job::kRead;
        read_busy_ = true;
      } else {
        for (size_t i = first_live_; i < chunks_.size(); ++i) {
          auto& ch = *chunks_[i];
          if (ch.live && !ch.written && !ch.writing) {
            job = Job::kWrite;
            c = &ch;
            ch.writing = true;
            break;
          }
        }
      }
      if (job == Job::kNone) {
        // While a read is under way the reader owns shard_/pos_ (read_next
        // updates them unlocked): wait for it rather than look.
        if (!read_busy_ && reading_done() && src_next_ == chunks_.size() && out_next_ == chunks_.size() && all_written()) {
          cv_.notify_all();
          return;
        }
        cv_.wait(lk);
        continue;
      }
      lk.unlock();
      try {
        run_job(job, c);
      } catch (...) {
        lk.lock();
        if (!error_) error_ = std::current_exception();
        cv_.notify_all();
        lk.unlock();
        failed();
        return;
      }
      lk.lock();
      complete(job, c);
      cv_.notify_all();
    }
  }

  // Streaming: finalizes outputs as they become ready (ready_), in order.
  void finish_loop() {
    std::unique_lock lk(mu_);
    for (;;) {
      cv_.wait(lk, [&] { return error_ || !ready_.empty() || fin_done_; });
      if (error_ || ready_.empty()) return;
      const size_t o = ready_.front();
      ready_.erase(ready_.begin());
      lk.unlock();
      try {
        finalize(o);
      } catch (...) {
        lk.lock();
        if (!error_) error_ = std::current_exception();
        cv_.notify_all();
        lk.unlock();
        failed();
        return;
      }
      lk.lock();
    }
  }

  // The pass has failed (error_ is set): tell the caller, outside the lock,
  // so a reader blocked in before_create (waiting for room that only
  // announced outputs would free) is woken rather than left waiting.
  void failed() {
    if (opt_.on_failure) opt_.on_failure();
  }

  bool all_written() const {
    for (size_t i = first_live_; i < chunks_.size(); ++i) {
      if (!chunks_[i]->written) return false;
    }
    return true;
  }

  void run_job(Job job, Chunk* c) {
    switch (job) {
      case Job::kRead: read_next(); break;
      case Job::kSrcHash:
        // The source chain also hands the bytes to an observer, in file
        // order, beside the next read rather than inside it.
        if (opt_.observe_source) opt_.observe_source(c->shard, c->offset, {c->buf, c->len});
        if (known(c->shard)) break;  // verified before: not hashed again
        shard_sha_[c->shard].update({c->buf, c->len});
        if (c->last_of_shard && opt_.on_shard_hashed) {
          shard_hex_[c->shard] = shard_sha_[c->shard].hex_digest();
          opt_.on_shard_hashed(c->shard, *shard_hex_[c->shard]);
        }
        break;
      case Job::kOutHash: {
        static const std::vector<uint8_t> kZeros(4096, 0);
        for (const auto& s : c->segments) {
          if (outputs_[s.output].hash_after_write) continue;  // hashed once written (finalize / stream_split)
          out_hash_[s.output].update({c->buf + s.in_chunk, s.len});
          if (s.ends_piece) {
            for (uint64_t pad = outputs_[s.output].pieces[s.piece].pad_after; pad != 0;) {
              const size_t n = static_cast<size_t>(std::min<uint64_t>(pad, kZeros.size()));
              out_hash_[s.output].update({kZeros.data(), n});
              pad -= n;
            }
          }
        }
        break;
      }
      case Job::kWrite:
        for (const auto& s : c->segments) {
          files_[s.output]->pwrite_all(s.dst, {c->buf + s.in_chunk, s.len});
          // Writeback starts now, overlapping the rest of the stream, rather
          // than all at the fsync before the renames.
          files_[s.output]->start_writeback(s.dst, s.len);
        }
        break;
      case Job::kNone: break;
    }
  }

  // Reads the next chunk of the current shard into a free buffer and maps
  // the piece segments it holds. Runs outside the lock; only the reader
  // touches shard_/pos_/ref_cursor_.
  //
  // Why buffers and not views of the shard's mapping: SHA-256 is most of
  // the pass's CPU, and hashing straight from a mapping costs about 1.5 x
  // the user time of hashing the same bytes from a buffer that pread
  // filled (measured on 1.5 GiB: 1.35 s vs 0.87 s user + 0.27 s system;
  // the hardware prefetcher stops at every 4 KiB page of the mapping).
  // A chunk that fits in the L2 cache is then hashed twice (shard and
  // fragment) and written with pwrite from cache: one copy in, one out,
  // no page faults, and a short read is simply an error.
  void read_next() {
    uint8_t* buf = nullptr;
    {
      std::lock_guard g(mu_);
      --slots_;
      if (free_.empty()) {
        pool_.push_back(std::make_unique_for_overwrite<uint8_t[]>(opt_.chunk_bytes));
        free_.push_back(pool_.back().get());
      }
      buf = free_.back();
      free_.pop_back();
    }
    auto c = std::make_unique<Chunk>();
    const auto& f = *shards_[shard_];
    c->shard = shard_;
    c->offset = pos_;
    c->len = static_cast<size_t>(std::min<uint64_t>(opt_.chunk_bytes, f.size() - pos_));
    if (lane_.end.first == shard_ && lane_.end.second - pos_ < c->len) c->len = static_cast<size_t>(lane_.end.second - pos_);
    if (streaming_ && opt_.before_create) {
      // One output at a time: a read never runs past the end of an output.
      while (end_cursor_ < ends_.size() && ends_[end_cursor_] <= std::pair<size_t, uint64_t>{shard_, pos_}) ++end_cursor_;
      if (end_cursor_ < ends_.size() && ends_[end_cursor_].first == shard_ && ends_[end_cursor_].second < pos_ + c->len) {
        c->len = static_cast<size_t>(ends_[end_cursor_].second - pos_);
      }
    }
    {
      const std::span<uint8_t> into{buf, c->len};
      // (Until the chunk is live the buffer is the reader's alone; should
      // the read throw, it goes back to the pool.)
      try {
        if (opt_.read_source) {
          opt_.read_source(shard_, pos_, into);
        } else {
          read_shard(f, pos_, into);
        }
      } catch (...) {
        std::lock_guard g(mu_);
        free_.push_back(buf);
        ++slots_;
        throw;
      }
    }
    const uint64_t end = pos_ + c->len;
    // Skip pieces that ended before this chunk (none should: pieces are
    // consumed in order), then collect overlaps.
    while (ref_cursor_ < refs_.size() && refs_[ref_cursor_].shard == shard_ &&
           refs_[ref_cursor_].src + refs_[ref_cursor_].bytes <= pos_) {
      ++ref_cursor_;
    }
    for (size_t r = ref_cursor_; r < refs_.size(); ++r) {
      const auto& ref = refs_[r];
      if (ref.shard != shard_ || ref.src >= end) break;
      const uint64_t a = std::max(ref.src, pos_);
      const uint64_t b = std::min(ref.src + ref.bytes, end);
      const auto& piece = outputs_[ref.output].pieces[ref.piece];
      if (streaming_) {
        if (!files_[ref.output]) open_output(ref.output);
        if (b == ref.src + ref.bytes) --undefined_[ref.output];
      }
      c->segments.push_back(Segment{ref.output, ref.piece, static_cast<size_t>(a - pos_), static_cast<size_t>(b - a),
                                    piece.dst_offset + (a - ref.src), b == ref.src + ref.bytes});
    }
    pos_ = end;
    if (pos_ >= f.size()) {
      c->last_of_shard = true;
      // Pieces must not run past their shard (the reader checked this).
      while (ref_cursor_ < refs_.size() && refs_[ref_cursor_].shard == shard_) ++ref_cursor_;
      ++shard_;
      pos_ = 0;
      while (shard_ < shards_.size() && shards_[shard_]->size() == 0) ++shard_;  // empty files
    }
    std::lock_guard g(mu_);
    c->buf = buf;
    c->live = true;
    chunks_.push_back(std::move(c));
  }

  void complete(Job job, Chunk* c) {
    switch (job) {
      case Job::kRead: read_busy_ = false; break;
      case Job::kSrcHash:
        c->src_hashed = true;
        src_busy_ = false;
        ++src_next_;
        break;
      case Job::kOutHash:
        if (streaming_) account(*c, hash_left_);
        c->out_hashed = true;
        out_busy_ = false;
        ++out_next_;
        break;
      case Job::kWrite:
        if (streaming_) account(*c, write_left_);
        c->written = true;
        c->writing = false;
        break;
      case Job::kNone: break;
    }
    if (c && c->src_hashed && c->out_hashed && c->written && c->live) {
      free_.push_back(c->buf);  // the buffer serves the next read
      ++slots_;
      c->live = false;
      c->buf = nullptr;
      c->segments.clear();
      c->segments.shrink_to_fit();
      walked_ += c->len;
      if (opt_.on_bytes) opt_.on_bytes(c->len);
    }
    while (first_live_ < chunks_.size() && !chunks_[first_live_]->live &&
           chunks_[first_live_]->written) {
      ++first_live_;
    }
  }

  bool known(size_t shard) const {
    return !opt_.read_source && shard < opt_.known_shard_sha256.size() && opt_.known_shard_sha256[shard].has_value();
  }

  // pread of exactly into.size() bytes; a short read means the shard shrank.
  static void read_shard(const MappedFile& f, uint64_t at, std::span<uint8_t> into) {
    size_t done = 0;
    while (done < into.size()) {
      const ssize_t n = ::pread(f.fd(), into.data() + done, into.size() - done, static_cast<off_t>(at + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        throw_io(f.path().string() + ": read failed at byte " + std::to_string(at + done));
      }
      if (n == 0) {
        throw_invalid(f.path().string() + ": the file shrank while it was being read (changed by another process?)");
      }
      done += static_cast<size_t>(n);
    }
  }

  const std::vector<std::shared_ptr<const MappedFile>>& shards_;
  const std::vector<StreamOutput>& outputs_;
  const StreamOptions& opt_;
  const Lane lane_;
  uint64_t walked_ = 0;  // under mu_
  std::vector<PieceRef> refs_;
  std::vector<std::unique_ptr<AtomicFile>> files_;
  std::vector<Sha256> shard_sha_;
  std::vector<OutputHasher> out_hash_;
  std::vector<std::optional<std::string>> shard_hex_;  // on_shard_hashed: digests taken already

  std::mutex mu_;
  std::condition_variable cv_;
  std::exception_ptr error_;
  size_t slots_ = 0;  // chunks that may still be in flight
  std::vector<std::unique_ptr<uint8_t[]>> pool_;  // the chunk buffers, made as first needed (under mu_)
  std::vector<uint8_t*> free_;                     // those not holding a live chunk (under mu_)
  std::deque<std::unique_ptr<Chunk>> chunks_;
  size_t first_live_ = 0;
  size_t src_next_ = 0, out_next_ = 0;
  bool src_busy_ = false, out_busy_ = false, read_busy_ = false;
  // Reader state (touched only by the thread holding read_busy_).
  size_t shard_ = 0;
  uint64_t pos_ = 0;
  size_t ref_cursor_ = 0;
  // Streaming (on_output_complete) state.
  bool streaming_ = false;
  std::vector<uint64_t> hash_left_, write_left_;  // piece bytes not yet hashed / written (under mu_)
  std::vector<size_t> undefined_;                 // pieces not yet fully in a chunk (reader only)
  std::vector<char> finished_;                    // renamed and announced (under mu_)
  std::vector<std::string> out_hex_;
  std::vector<size_t> ready_;                     // outputs to finalize (under mu_)
  bool fin_done_ = false;                         // the workers are done: finish what is ready, then stop
  std::vector<std::pair<size_t, uint64_t>> ends_; // (shard, end) of each output's last piece, sorted
  size_t end_cursor_ = 0;
};

// The outputs of a pass without on_output_complete that are hashed after
// they are written: read back now, on the pass's threads.
void hash_after_write(std::vector<std::unique_ptr<Pipeline>>& pipes, const std::vector<StreamOutput>& outputs,
                      unsigned threads, StreamResult& r) {
  std::vector<std::pair<std::filesystem::path, uint64_t>> files;
  std::vector<size_t> which;
  for (auto& p : pipes) {
    for (const size_t o : p->outputs()) {
      if (!outputs[o].hash_after_write) continue;
      files.emplace_back(p->files()[o]->temp_path(), outputs[o].total_size);
      which.push_back(o);
    }
  }
  const auto digests = hash_written_outputs(files, threads);
  for (size_t i = 0; i < which.size(); ++i) r.output_sha256[which[i]] = digests[i];
}

}  // namespace

StreamResult stream_split(const std::vector<std::shared_ptr<const MappedFile>>& shards,
                          const std::vector<StreamOutput>& outputs, const StreamOptions& options) {
  auto lanes = plan_lanes(shards, outputs, options);
  StreamOptions lane_opt = options;
  std::mutex callback_mu;  // lanes call back from their own threads: one at a time
  if (lanes.size() > 1) {
    // Each lane: as many workers as the whole pass (a hash chain and the
    // writes overlap inside a lane too), and its share of the buffers, so
    // the mapped window (resident memory) stays what one pass uses.
    lane_opt.buffers = std::max<size_t>(2, options.buffers / lanes.size());
    if (options.on_bytes) {
      lane_opt.on_bytes = [&](uint64_t n) {
        std::lock_guard g(callback_mu);
        options.on_bytes(n);
      };
    }
    if (options.on_output_complete) {
      lane_opt.on_output_complete = [&](size_t o, const OutputDigest& d) {
        std::lock_guard g(callback_mu);
        options.on_output_complete(o, d);
      };
    }
  }
  std::vector<std::unique_ptr<Pipeline>> pipes;
  for (auto& l : lanes) pipes.push_back(std::make_unique<Pipeline>(shards, outputs, lane_opt, std::move(l)));
  {
    std::vector<std::exception_ptr> errors(pipes.size());
    auto run_lane = [&](size_t i) {
      try {
        pipes[i]->run();
      } catch (...) {
        errors[i] = std::current_exception();
        for (size_t k = 0; k < pipes.size(); ++k) {
          if (k != i) pipes[k]->abort(errors[i]);
        }
      }
    };
    std::vector<std::thread> ts;
    for (size_t i = 1; i < pipes.size(); ++i) ts.emplace_back(run_lane, i);
    run_lane(0);
    for (auto& t : ts) t.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);  // the first lane's own failure, or the one it was aborted for
    }
  }
  StreamResult r;
  r.output_sha256.resize(outputs.size());
  uint64_t walked = 0;
  for (auto& p : pipes) {
    p->collect(r);
    walked += p->walked();
  }
  if (!options.on_output_complete) hash_after_write(pipes, outputs, options.threads, r);
  // Lanes skip the source bytes outside every piece (the GGUF header):
  // progress still ends at the whole source.
  if (lanes.size() > 1 && options.on_bytes) {
    uint64_t total = 0;
    for (const auto& f : shards) total += f->size();
    if (total > walked) options.on_bytes(total - walked);
  }
  if (options.before_commit) options.before_commit(r);
  if (options.on_output_complete) return r;  // each output is in place already

  // Every output is complete: make them durable (fsyncs in parallel: they
  // wait on the disk, not a core), give them their names, then make the
  // names durable with one fsync per directory.
  std::vector<AtomicFile*> files;
  for (auto& p : pipes) {
    for (const size_t o : p->outputs()) files.push_back(p->files()[o].get());
  }
  {
    std::atomic<size_t> next{0};
    std::exception_ptr err;
    std::mutex err_mu;
    auto syncer = [&] {
      for (size_t i; (i = next.fetch_add(1)) < files.size();) {
        try {
          files[i]->sync();
        } catch (...) {
          std::lock_guard g(err_mu);
          if (!err) err = std::current_exception();
        }
      }
    };
    std::vector<std::thread> ts;
    for (size_t t = 0; t < std::min<size_t>(kSyncThreads, files.size()); ++t) ts.emplace_back(syncer);
    for (auto& t : ts) t.join();
    if (err) std::rethrow_exception(err);
  }
  std::set<std::filesystem::path> dirs;
  for (auto* f : files) {
    f->commit(/*sync_directory=*/false);
    dirs.insert(f->final_path().parent_path());
  }
  for (const auto& d : dirs) fsync_directory(d.empty() ? "." : d, options.io_env);
  return r;
}

}  // namespace skippy::detail
