// TokenVocabulary: pieces and the preorder byte trie (built from the pieces in sorted order, so
// each node is appended when its first piece arrives and closed when the sorted order leaves it).
#include "grammar/token_vocabulary.h"

#include <algorithm>
#include <numeric>

namespace moetier::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> pieces, const std::vector<int32_t>& eog_ids) {
  build(std::move(pieces), eog_ids);
}

std::string_view TokenVocabulary::piece(int32_t id) const {
  if (id < 0 || id >= size()) return {};
  const auto i = static_cast<size_t>(id);
  return std::string_view(bytes_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
}

void TokenVocabulary::build(std::vector<std::string> pieces, const std::vector<int32_t>& eog_ids) {
  const size_t n = pieces.size();
  offsets_.assign(1, 0);
  for (const std::string& p : pieces) {
    bytes_ += p;
    offsets_.push_back(static_cast<uint32_t>(bytes_.size()));
  }
  eog_.assign(n, false);
  for (const int32_t id : eog_ids) {
    if (id >= 0 && static_cast<size_t>(id) < n && !eog_[static_cast<size_t>(id)]) {
      eog_[static_cast<size_t>(id)] = true;
      eog_ids_.push_back(id);
    }
  }
  std::sort(eog_ids_.begin(), eog_ids_.end());

  std::vector<int32_t> order;
  order.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    if (!eog_[id] && !pieces[id].empty()) order.push_back(static_cast<int32_t>(id));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return pieces[static_cast<size_t>(a)] < pieces[static_cast<size_t>(b)] || (pieces[static_cast<size_t>(a)] ==
           pieces[static_cast<size_t>(b)] && a < b);
  });

  std::vector<uint32_t> path;  // trie node at each depth of the current piece (depth d at [d - 1])
  std::string_view prev;
  for (const int32_t id : order) {
    const std::string_view p = pieces[static_cast<size_t>(id)];
    const size_t common = static_cast<size_t>(
        std::mismatch(prev.begin(), prev.end(), p.begin(), p.end()).first - prev.begin());
    while (path.size() > common) {
      trie_[path.back()].subtree_end = static_cast<uint32_t>(trie_.size());
      path.pop_back();
    }
    for (size_t d = common; d < p.size(); ++d) {
      path.push_back(static_cast<uint32_t>(trie_.size()));
      const auto here = static_cast<uint32_t>(trie_tokens_.size());
      trie_.push_back(TrieNode{.subtree_end = 0, .tokens_begin = here, .tokens_end = here,
                               .depth = static_cast<uint32_t>(d + 1), .byte = static_cast<uint8_t>(p[d])});
    }
    trie_tokens_.push_back(id);
    trie_[path.back()].tokens_end = static_cast<uint32_t>(trie_tokens_.size());
    max_depth_ = std::max(max_depth_, static_cast<uint32_t>(p.size()));
    prev = p;
  }
  while (!path.empty()) {
    trie_[path.back()].subtree_end = static_cast<uint32_t>(trie_.size());
    path.pop_back();
  }
}

}  // namespace moetier::grammar
