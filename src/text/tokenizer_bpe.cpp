#include "text/tokenizer_bpe.h"

#include <algorithm>
#include <bit>

#include <fmt/format.h>

namespace moetier::text {

namespace {

constexpr std::string_view kMergesKey = "tokenizer.ggml.merges";

// Renders a merge for an error message: printable, bounded length.
std::string shown(std::string_view s) {
  constexpr size_t kMax = 60;
  std::string out;
  for (const char c : s.substr(0, kMax)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7F) ? fmt::format("\\x{:02x}", u) : std::string(1, c);
  }
  if (s.size() > kMax) out += "...";
  return out;
}

}  // namespace

Result<BpeMerges> BpeMerges::from_gguf(const gguf::GgufFile& file, const Vocab& vocab) {
  const gguf::Value* value = file.find(kMergesKey);
  if (value == nullptr) return Status::bad_input(fmt::format("missing metadata key '{}'", kMergesKey));
  if (!value->is_array() || value->elem_type != gguf::ValueType::STRING) {
    return Status::bad_input(fmt::format("metadata key '{}' must be an array of strings", kMergesKey));
  }
  const std::vector<std::string>& merges = value->arr_s;
  if (merges.size() >= static_cast<size_t>(INT32_MAX)) {
    return Status::bad_input(fmt::format("metadata key '{}' has too many entries", kMergesKey));
  }

  BpeMerges table;
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, merges.size() * 2));
  table.slots_.assign(capacity, Slot{});
  table.mask_ = capacity - 1;

  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view merge = merges[rank];
    // The separator is the first space after the first byte (a side is never empty; in
    // byte-level text a real space is written 'Ġ', so sides contain no spaces).
    const size_t sep = merge.size() > 1 ? merge.find(' ', 1) : std::string_view::npos;
    if (sep == std::string_view::npos) {
      return Status::bad_input(
          fmt::format("{}[{}] = \"{}\" is not of the form \"left right\"", kMergesKey, rank, shown(merge)));
    }
    const std::string_view left = merge.substr(0, sep);
    const std::string_view right = merge.substr(sep + 1);
    const int32_t left_id = vocab.find(left);
    const int32_t right_id = vocab.find(right);
    if (left_id == kNoToken || right_id == kNoToken) {
      return Status::bad_input(fmt::format("{}[{}] = \"{}\" refers to \"{}\", which is not in tokenizer.ggml.tokens",
                                           kMergesKey, rank, shown(merge),
                                           shown(left_id == kNoToken ? left : right)));
    }
    joined.assign(left);
    joined.append(right);
    table.insert(left_id, right_id, Merge{.rank = static_cast<int32_t>(rank), .result = vocab.find(joined)});
  }
  return table;
}

void BpeMerges::insert(int32_t left, int32_t right, Merge merge) {
  const uint64_t key = pair_key(left, right);
  for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    Slot& slot = slots_[i];
    if (slot.key == key) return;
    if (slot.key == kEmptyKey) {
      slot.key = key;
      slot.merge = merge;
      ++n_entries_;
      return;
    }
  }
}

const BpeMerges::Merge* BpeMerges::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t key = pair_key(left, right);
  for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    const Slot& slot = slots_[i];
    if (slot.key == key) return &slot.merge;
    if (slot.key == kEmptyKey) return nullptr;
  }
}

namespace {

// Min-heap order: lower rank first, then the leftmost pair.
struct LaterCandidate {
  bool operator()(const BpeScratch::Candidate& a, const BpeScratch::Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  }
};

void push_candidate(const BpeModel& model, BpeScratch& s, int32_t left) {
  if (left < 0) return;
  const int32_t right = s.symbols[left].next;
  if (right < 0) return;
  const int32_t left_id = s.symbols[left].id;
  const int32_t right_id = s.symbols[right].id;
  if (left_id == kNoToken || right_id == kNoToken) return;
  const BpeMerges::Merge* m = model.merges->find(left_id, right_id);
  if (m == nullptr) return;
  s.heap.push_back({.rank = m->rank, .left = left, .left_id = left_id, .right_id = right_id});
  std::push_heap(s.heap.begin(), s.heap.end(), LaterCandidate{});
}

void emit_bytes(std::string_view bytes, const BpeModel& model, std::vector<int32_t>& out) {
  for (const char c : bytes) {
    const int32_t id = model.byte_token[static_cast<uint8_t>(c)];
    if (id != kNoToken) {
      out.push_back(id);
    } else if (model.unk != kNoToken) {
      out.push_back(model.unk);
    }
  }
}

}  // namespace

void bpe_encode_piece(std::string_view piece, const BpeModel& model, BpeScratch& s, std::vector<int32_t>& out) {
  const auto n = static_cast<int32_t>(piece.size());
  if (n == 0) return;
  s.symbols.clear();
  s.heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    s.symbols.push_back({.id = model.byte_token[static_cast<uint8_t>(piece[i])],
                         .begin = static_cast<uint32_t>(i),
                         .size = 1,
                         .prev = i - 1,
                         .next = i + 1 < n ? i + 1 : -1});
  }
  for (int32_t i = 0; i + 1 < n; ++i) push_candidate(model, s, i);

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), LaterCandidate{});
    const BpeScratch::Candidate c = s.heap.back();
    s.heap.pop_back();
    BpeScratch::Symbol& left = s.symbols[c.left];
    // Stale if either side has changed since the push: merging changes a symbol's id (its
    // text grows), and a symbol absorbed into its neighbour has size 0.
    if (left.size == 0 || left.id != c.left_id || left.next < 0) continue;
    BpeScratch::Symbol& right = s.symbols[left.next];
    if (right.size == 0 || right.id != c.right_id) continue;

    const BpeMerges::Merge* m = model.merges->find(c.left_id, c.right_id);
    left.id = m->result;
    left.size += right.size;
    right.size = 0;
    left.next = right.next;
    if (right.next >= 0) s.symbols[right.next].prev = c.left;
    push_candidate(model, s, left.prev);
    push_candidate(model, s, c.left);
  }

  for (int32_t i = 0; i >= 0; i = s.symbols[i].next) {
    const BpeScratch::Symbol& sym = s.symbols[i];
    if (sym.id != kNoToken) {
      out.push_back(sym.id);
    } else {
      emit_bytes(piece.substr(sym.begin, sym.size), model, out);
    }
  }
}

}  // namespace moetier::text
