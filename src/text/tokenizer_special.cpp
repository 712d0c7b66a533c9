#include "text/tokenizer_special.h"

#include <algorithm>

namespace moetier::text {

SpecialTokenSplitter::SpecialTokenSplitter(const Vocab& vocab) {
  constexpr uint32_t kSpecial = token_attr::kControl | token_attr::kUserDefined | token_attr::kUnknown;
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const uint32_t attr = vocab.attrs[id];
    if ((attr & kSpecial) == 0 || vocab.text(id).empty()) continue;
    candidates_.push_back({.id = id,
                           .text = vocab.text(id),
                           .needs_parse_special = (attr & (token_attr::kControl | token_attr::kUnknown)) != 0});
  }
  std::stable_sort(candidates_.begin(), candidates_.end(),
                   [](const Candidate& a, const Candidate& b) { return a.text.size() > b.text.size(); });
}

void SpecialTokenSplitter::split(std::string_view text, bool parse_special, std::vector<TextFragment>& out) const {
  out.clear();
  if (text.empty()) return;
  out.push_back({.token = kNoToken, .begin = 0, .size = text.size()});
  std::vector<TextFragment> next;
  for (const Candidate& cand : candidates_) {
    if (cand.needs_parse_special && !parse_special) continue;
    // Cheap pre-check over the whole text before rebuilding the fragment list. A hit may
    // span an earlier cut; the per-fragment search below decides.
    if (text.find(cand.text) == std::string_view::npos) continue;
    next.clear();
    bool any = false;
    for (const TextFragment& frag : out) {
      if (frag.token != kNoToken) {
        next.push_back(frag);
        continue;
      }
      const std::string_view body = text.substr(frag.begin, frag.size);
      size_t pos = 0;
      for (size_t hit; (hit = body.find(cand.text, pos)) != std::string_view::npos; pos = hit + cand.text.size()) {
        if (hit > pos) next.push_back({.token = kNoToken, .begin = frag.begin + pos, .size = hit - pos});
        next.push_back({.token = cand.id});
        any = true;
      }
      if (pos < body.size()) next.push_back({.token = kNoToken, .begin = frag.begin + pos, .size = body.size() - pos});
    }
    if (any) out.swap(next);
  }
}

}  // namespace moetier::text
