#include "hub/xet_journal.h"

#include <charconv>
#include <optional>

#include "skippy/error.h"
#include "util/file.h"
#include "util/sha256.h"

namespace skippy::detail {

namespace {

constexpr const char* kJournalHeader = "skippy xet journal 1";
constexpr size_t kJournalMaxEntries = 4096;               // 256 GiB of new 64 MiB xorbs
constexpr uint64_t kJournalMaxBytes = uint64_t{1} << 20;  // 4096 lines of 64 + 1 + 8 + 1 bytes fit
constexpr uint64_t kJournalMaxXorb = uint64_t{128} << 20;  // a serialized xorb is at most 64 MiB plus headers

// One "<hash> <bytes>" line, or nullopt.
std::optional<std::pair<xet::Hash, uint64_t>> journal_line(std::string_view line) {
  if (line.size() < 66 || line[64] != ' ') return std::nullopt;
  for (const char c : line.substr(0, 64)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  }
  const auto hash = xet::Hash::from_hex(line.substr(0, 64));
  const std::string_view num = line.substr(65);
  uint64_t bytes = 0;
  const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), bytes);
  if (!hash || ec != std::errc() || end != num.data() + num.size() || bytes == 0 || bytes > kJournalMaxXorb ||
      (num.size() > 1 && num[0] == '0')) {
    return std::nullopt;
  }
  return std::pair{*hash, bytes};
}

}  // namespace

XetJournal::XetJournal(std::filesystem::path dir, const std::string& endpoint, const std::string& repo,
                       const std::string& branch)
    : key_(sha256_hex(endpoint + "\n" + repo + "\n" + branch)) {
  path_ = dir / (key_.substr(0, 32) + ".journal");
  load();
}

void XetJournal::load() {
  std::error_code ec;
  if (!std::filesystem::exists(path_, ec)) return;
  std::string text;
  try {
    text = read_small_file(path_, kJournalMaxBytes);
  } catch (const std::exception& e) {
    note_ = "the Xet resume journal " + path_.string() + " cannot be read (" + e.what() + "): ignored";
    return;
  }
  std::vector<std::pair<xet::Hash, uint64_t>> entries;
  std::set<xet::Hash> known;
  std::string_view rest = text;
  size_t line_no = 0;
  std::string bad;
  while (!rest.empty() && bad.empty()) {
    const size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) {
      bad = "line " + std::to_string(line_no + 1) + " does not end";
      break;
    }
    const std::string_view line = rest.substr(0, nl);
    rest.remove_prefix(nl + 1);
    ++line_no;
    if (line_no == 1) {
      if (line != kJournalHeader) bad = "not a journal of this version";
    } else if (line_no == 2) {
      if (line != key_) bad = "it belongs to another repository";
    } else if (const auto e = journal_line(line); !e || entries.size() >= kJournalMaxEntries || !known.insert(e->first).second) {
      bad = "line " + std::to_string(line_no) + " is not a xorb entry";
    } else {
      entries.push_back(*e);
    }
  }
  if (bad.empty() && line_no < 2) bad = "it has no header";
  if (!bad.empty()) {
    note_ = "the Xet resume journal " + path_.string() + " is damaged (" + bad + "): ignored";
    return;
  }
  entries_ = std::move(entries);
  known_ = std::move(known);
}

bool XetJournal::has(const xet::Hash& xorb) const {
  std::lock_guard g(mu_);
  return known_.count(xorb) != 0;
}

void XetJournal::add(const xet::Hash& xorb, uint64_t bytes) {
  std::lock_guard g(mu_);
  if (!known_.insert(xorb).second) return;
  entries_.emplace_back(xorb, bytes);
  if (entries_.size() > kJournalMaxEntries) {
    known_.erase(entries_.front().first);
    entries_.erase(entries_.begin());
  }
  write_locked();
}

void XetJournal::write_locked() {
  std::string text = std::string(kJournalHeader) + "\n" + key_ + "\n";
  for (const auto& [h, n] : entries_) text += h.to_hex() + " " + std::to_string(n) + "\n";
  try {
    std::error_code ec;
    std::filesystem::create_directories(path_.parent_path(), ec);
    write_file_atomic(path_, text);
  } catch (const std::exception& e) {
    if (note_.empty()) note_ = "the Xet resume journal " + path_.string() + " cannot be written (" + e.what() + ")";
  }
}

void XetJournal::clear() {
  std::lock_guard g(mu_);
  entries_.clear();
  known_.clear();
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

std::string XetJournal::note() const {
  std::lock_guard g(mu_);
  return note_;
}

}  // namespace skippy::detail
