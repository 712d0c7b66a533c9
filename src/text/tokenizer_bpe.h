// Byte-level BPE: the merge table and the merge loop for one pre-tokenized piece.
//
// Symbols are token ids, not strings: a merge "left right" of rank r is stored as
// (id(left), id(right)) -> (r, id(left + right)). The loop repeatedly applies the adjacent
// pair of lowest rank (the leftmost on a tie) until no adjacent pair is in the table, using a
// priority queue with lazy invalidation, O(n log n) in the piece length.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "text/tokenizer_vocab.h"

namespace moetier::text {

class BpeMerges {
 public:
  struct Merge {
    int32_t rank = -1;
    int32_t result = kNoToken;  // kNoToken when left + right is not itself a token
  };

  // Parses tokenizer.ggml.merges ("left right", rank = index). Every side must be a token of
  // `vocab`; errors are kBadInput naming the merge.
  static Result<BpeMerges> from_gguf(const gguf::GgufFile& file, const Vocab& vocab);

  // nullptr when (left, right) is not a merge.
  const Merge* find(int32_t left, int32_t right) const;
  size_t size() const { return n_entries_; }

 private:
  // Open addressing with linear probing; power-of-two capacity at most half full.
  struct Slot {
    uint64_t key = kEmptyKey;
    Merge merge;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  static size_t hash(uint64_t key) {
    key ^= key >> 33;  // murmur3 finaliser: spreads the two ids over all bits
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }
  // Inserts unless the pair is present already (the first, lowest-rank entry wins).
  void insert(int32_t left, int32_t right, Merge merge);

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t n_entries_ = 0;
};

// Per-call working memory of the merge loop, reused across pieces to avoid allocations.
struct BpeScratch {
  struct Symbol {
    int32_t id;     // kNoToken: bytes with no token (see bpe_encode_piece)
    uint32_t begin; // byte offset in the piece
    uint32_t size;  // bytes; 0 once merged into its left neighbour
    int32_t prev;   // symbol index, -1 at the start
    int32_t next;   // symbol index, -1 at the end
  };
  struct Candidate {
    int32_t rank;
    int32_t left;       // symbol index
    int32_t left_id;    // ids at push time, to discard candidates made stale by a merge
    int32_t right_id;
  };
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

// What the merge loop needs to know about the vocabulary.
struct BpeModel {
  const BpeMerges* merges = nullptr;
  std::array<int32_t, 256> byte_token{};  // token of each single byte (byte-level text), or kNoToken
  int32_t unk = kNoToken;                 // emitted for a byte that has no token, if set
};

// Appends the tokens of one pre-tokenized piece (raw bytes) to `out`. A final symbol that is
// not a token (only possible with merges whose result is missing from the vocabulary) falls
// back to its single-byte tokens; a byte without a token becomes `unk`, or nothing when the
// vocabulary has no unk (llama.cpp drops it too).
void bpe_encode_piece(std::string_view piece, const BpeModel& model, BpeScratch& scratch, std::vector<int32_t>& out);

}  // namespace moetier::text
