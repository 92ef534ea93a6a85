#include "xet/hash.h"

#include <cstring>

namespace skippy::xet {

// hub-docs docs/xet/hashing.md (DATA_KEY, INTERNAL_NODE_KEY, VERIFICATION_KEY);
// xet-core merklehash/data_hash.rs and metadata_shard/chunk_verification.rs.
const Blake3Key kDataKey = {102, 151, 245, 119, 91,  149, 80,  222, 49,  53, 203, 172, 165, 151, 24,  28,
                            157, 228, 33,  16,  155, 235, 43,  88,  180, 208, 176, 75, 147, 173, 242, 41};
const Blake3Key kInternalNodeKey = {1,   126, 197, 199, 165, 71,  41,  150, 253, 148, 102, 102, 180, 138, 2,  230,
                                    93,  221, 83,  111, 55,  199, 109, 210, 248, 99,  82,  230, 74,  83,  113, 63};
const Blake3Key kVerificationKey = {127, 24,  87,  214, 206, 86,  237, 102, 18,  127, 249, 19, 231, 165, 195, 243,
                                    164, 205, 38,  213, 181, 219, 73,  230, 65,  36,  152, 127, 40, 251, 148, 195};

namespace {

constexpr char kHashHexDigits[] = "0123456789abcdef";

int hash_hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

Hash hash_from_digest(const Blake3Digest& d) {
  Hash h;
  h.bytes = d;
  return h;
}

// One line of an internal node: "{hash hex} : {length}\n".
void append_node_line(std::string& out, const ChunkRef& node) {
  out += node.hash.to_hex();
  out += " : ";
  out += std::to_string(node.length);
  out += '\n';
}

// The parent of a group of nodes (xet-core merged_hash_of_sequence).
ChunkRef merge_node_group(std::span<const ChunkRef> group) {
  std::string text;
  text.reserve(group.size() * 90);
  uint64_t total = 0;
  for (const auto& n : group) {
    append_node_line(text, n);
    total += n.length;
  }
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  return {hash_from_digest(blake3_keyed(kInternalNodeKey, {p, text.size()})), total};
}

// A group closes after at most 9 nodes, or at its third or later node whose
// word 3 is divisible by 4 (xet-core aggregated_hashes.rs next_merge_cut:
// the mean branching factor is 4; a group has 2..9 nodes, but only the end of
// a level can leave fewer than 3).
constexpr size_t kMaxMerkleGroup = 9;
bool closes_merkle_group(size_t group_size, const Hash& last) { return group_size >= 3 && last.word(3) % 4 == 0; }

}  // namespace

uint64_t Hash::word(size_t i) const {
  uint64_t w = 0;
  for (size_t b = 0; b < 8; ++b) w |= uint64_t{bytes[8 * i + b]} << (8 * b);
  return w;
}

bool Hash::is_zero() const {
  for (uint8_t b : bytes) {
    if (b != 0) return false;
  }
  return true;
}

std::string Hash::to_hex() const {
  std::string out(64, '0');
  for (size_t w = 0; w < 4; ++w) {
    for (size_t b = 0; b < 8; ++b) {
      const uint8_t v = bytes[8 * w + 7 - b];
      out[16 * w + 2 * b] = kHashHexDigits[v >> 4];
      out[16 * w + 2 * b + 1] = kHashHexDigits[v & 15];
    }
  }
  return out;
}

std::optional<Hash> Hash::from_hex(std::string_view hex) {
  if (hex.size() != 64) return std::nullopt;
  Hash h;
  for (size_t w = 0; w < 4; ++w) {
    for (size_t b = 0; b < 8; ++b) {
      const int hi = hash_hex_digit_value(hex[16 * w + 2 * b]);
      const int lo = hash_hex_digit_value(hex[16 * w + 2 * b + 1]);
      if (hi < 0 || lo < 0) return std::nullopt;
      h.bytes[8 * w + 7 - b] = static_cast<uint8_t>(hi << 4 | lo);
    }
  }
  return h;
}

std::strong_ordering operator<=>(const Hash& a, const Hash& b) {
  for (size_t i = 0; i < 4; ++i) {
    if (const auto c = a.word(i) <=> b.word(i); c != 0) return c;
  }
  return std::strong_ordering::equal;
}

Hash chunk_hash(std::span<const uint8_t> data) { return hash_from_digest(blake3_keyed(kDataKey, data)); }

Hash xorb_hash(std::span<const ChunkRef> chunks) {
  MerkleHasher m;
  for (const auto& c : chunks) m.add(c);
  return m.root();
}

Hash file_hash(std::span<const ChunkRef> chunks) {
  MerkleHasher m;
  for (const auto& c : chunks) m.add(c);
  return m.file_hash();
}

Hash verification_hash(std::span<const Hash> chunk_hashes) {
  Blake3 h(kVerificationKey);
  for (const auto& c : chunk_hashes) h.update(c.bytes);
  return hash_from_digest(h.finalize());
}

Hash keyed_hash(const Hash& key, const Hash& message) {
  return hash_from_digest(blake3_keyed(key.bytes, message.bytes));
}

bool is_global_dedupe_eligible(const Hash& chunk_hash) { return chunk_hash.word(3) % 1024 == 0; }

Hash sha256_digest_as_hash(std::span<const uint8_t, 32> digest) {
  Hash h;
  for (size_t w = 0; w < 4; ++w) {
    for (size_t b = 0; b < 8; ++b) h.bytes[8 * w + b] = digest[8 * w + 7 - b];
  }
  return h;
}

void MerkleHasher::push(size_t level, const ChunkRef& node) {
  if (levels_.size() <= level) levels_.resize(level + 1);
  auto& lv = levels_[level];
  lv.pending.push_back(node);
  if (lv.pending.size() == kMaxMerkleGroup || closes_merkle_group(lv.pending.size(), node.hash)) {
    const ChunkRef parent = merge_node_group(lv.pending);
    lv.emitted += lv.pending.size();
    lv.pending.clear();
    push(level + 1, parent);
  }
}

void MerkleHasher::add(const Hash& chunk_hash, uint64_t length) {
  push(0, {chunk_hash, length});
  ++count_;
  total_ += length;
}

Hash MerkleHasher::root() const {
  if (count_ == 0) return Hash{};
  // Each level's open group is the end of that level: close it and carry
  // its parent up, until a level holds a single node in all.
  MerkleHasher rest = *this;
  for (size_t level = 0;; ++level) {
    auto& lv = rest.levels_[level];
    if (lv.emitted == 0 && lv.pending.size() == 1) return lv.pending.front().hash;
    if (!lv.pending.empty()) {
      const ChunkRef parent = merge_node_group(lv.pending);
      lv.emitted += lv.pending.size();
      lv.pending.clear();
      rest.push(level + 1, parent);
    }
  }
}

Hash MerkleHasher::file_hash() const {
  if (count_ == 0) return Hash{};
  return keyed_hash(Hash{}, root());
}

}  // namespace skippy::xet
