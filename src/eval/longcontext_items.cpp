#include "eval/longcontext_items.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

namespace moetier::eval {

namespace {

// splitmix64: a tiny, fully specified generator (the same numbers on every platform).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (n small: the modulo bias is far below anything that matters here).
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  template <class C>
  const auto& pick(const C& c) {
    return c[below(c.size())];
  }

 private:
  uint64_t state_;
};

// FNV-1a over the item's identity, mixed into the seed: each item has its own stream.
uint64_t item_seed(uint64_t seed, std::string_view lang, int64_t length, int64_t depth) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto mix = [&](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
  };
  mix(fmt::format("{}|{}|{}|{}", seed, lang, length, depth));
  return h;
}

// ---- English filler: plain descriptive sentences with no digits and no capitalised codes,
// so nothing in the filler can be mistaken for the needle.
constexpr std::array kEnSubjects = {
    "the old ferryman", "a young teacher", "the baker on the corner", "a tired traveller", "the village council",
    "my neighbour", "the night watchman", "a group of students", "the gardener", "an elderly painter",
    "the station master", "a quiet librarian", "the fishermen", "a visiting doctor", "the carpenter's daughter",
    "the choir", "a pair of cyclists", "the shopkeeper", "the postman", "a family of farmers"};
constexpr std::array kEnVerbs = {
    "walked slowly along", "talked for hours about", "carefully repaired", "looked for a long time at",
    "wrote a short letter about", "painted a picture of", "quietly cleaned", "argued politely about",
    "remembered", "sang a song about", "drew a map of", "took a photograph of", "planted flowers near",
    "read an old story about", "visited", "described", "measured", "swept the path beside"};
constexpr std::array kEnObjects = {
    "the narrow bridge", "the market square", "the stone well", "the empty harbour", "the apple orchard",
    "the blue door of the chapel", "the road to the hills", "the small museum", "the frozen pond",
    "the lighthouse", "the wooden fence", "the railway station", "the public garden", "the river bank",
    "the bell tower", "the long corridor of the school", "the bakery window", "the field of sunflowers"};
constexpr std::array kEnTimes = {
    "early in the morning", "after the rain", "before supper", "during the long winter", "late at night",
    "on a windy afternoon", "at the end of the summer", "while the snow was falling", "in the first warm days",
    "as the sun went down", "on market day", "in the quiet hours"};
constexpr std::array kEnTails = {
    "and nobody seemed to mind.", "while the birds circled overhead.", "as if nothing else mattered.",
    "and then went home for tea.", "because it had always been done that way.", "and the town grew quiet again.",
    "while children played nearby.", "and the air smelled of bread.", "before anyone else was awake.",
    "and the work took longer than expected."};

std::string en_sentence(Rng& rng) {
  std::string s;
  switch (rng.below(3)) {
    case 0: s = fmt::format("{} {} {} {}", rng.pick(kEnSubjects), rng.pick(kEnVerbs), rng.pick(kEnObjects), rng.pick(kEnTails)); break;
    case 1: s = fmt::format("{}, {} {} {}.", rng.pick(kEnTimes), rng.pick(kEnSubjects), rng.pick(kEnVerbs), rng.pick(kEnObjects)); break;
    default: s = fmt::format("{} {} {} {}.", rng.pick(kEnSubjects), rng.pick(kEnVerbs), rng.pick(kEnObjects), rng.pick(kEnTimes)); break;
  }
  s[0] = static_cast<char>(s[0] >= 'a' && s[0] <= 'z' ? s[0] - 'a' + 'A' : s[0]);
  return s;
}

// ---- Chinese filler, built the same way.
constexpr std::array kZhTimes = {"清晨", "雨后", "傍晚", "深夜", "冬天的早上", "一个有风的下午", "夏天快结束的时候",
                                 "下雪的夜里", "赶集那天", "天刚亮的时候", "午饭以后", "节日前夕"};
constexpr std::array kZhSubjects = {"老船夫", "年轻的老师", "街角的面包师", "疲惫的旅人", "村委会的人", "我的邻居",
                                    "守夜人", "一群学生", "园丁", "一位老画家", "站长", "图书馆管理员",
                                    "渔民们", "来访的医生", "木匠的女儿", "合唱团", "两个骑车的人", "店主"};
constexpr std::array kZhPlaces = {"在小桥边", "在集市广场上", "在石井旁", "在空荡的码头", "在苹果园里", "在教堂门口",
                                  "在通往山里的路上", "在小博物馆里", "在结冰的池塘边", "在灯塔下", "在木栅栏旁",
                                  "在火车站", "在公园里", "在河岸上", "在钟楼下", "在学校的长廊里"};
constexpr std::array kZhActions = {"慢慢地散步", "聊了很久的天", "仔细地修补旧东西", "静静地看着远方", "写了一封短信",
                                   "画了一幅画", "打扫落叶", "小声地争论", "回忆起过去的事", "唱了一首老歌",
                                   "画了一张地图", "拍了几张照片", "种下一些花", "读了一个旧故事", "收拾了桌椅"};
constexpr std::array kZhTails = {"谁也没有在意。", "鸟儿在头顶盘旋。", "仿佛别的事都不重要了。", "然后回家喝茶。",
                                 "因为一直都是这样做的。", "小镇又安静了下来。", "孩子们在附近玩耍。",
                                 "空气里有面包的香味。", "那时别人都还没醒。", "这件事比预想的花了更多时间。"};

std::string zh_sentence(Rng& rng) {
  if (rng.below(2) == 0) {
    return fmt::format("{}，{}{}{}。", rng.pick(kZhTimes), rng.pick(kZhSubjects), rng.pick(kZhPlaces), rng.pick(kZhActions));
  }
  return fmt::format("{}{}{}，{}", rng.pick(kZhSubjects), rng.pick(kZhPlaces), rng.pick(kZhActions), rng.pick(kZhTails));
}

// The needle: three letters, four digits, three letters (no I or O, which read as digits).
std::string make_needle(Rng& rng) {
  static constexpr std::string_view kLetters = "ABCDEFGHJKLMNPQRSTUVWXYZ";
  std::string s;
  for (int i = 0; i < 3; ++i) s += kLetters[rng.below(kLetters.size())];
  s += '-';
  for (int i = 0; i < 4; ++i) s += static_cast<char>('0' + rng.below(10));
  s += '-';
  for (int i = 0; i < 3; ++i) s += kLetters[rng.below(kLetters.size())];
  return s;
}

struct Wording {
  std::string intro, needle_sentence, question, joiner, paragraph;
};

constexpr std::array kEnPlaces = {"the north archive", "the river laboratory", "the east tower", "the old observatory",
                                  "the harbour office", "the mountain hut"};
constexpr std::array kZhPlacesNeedle = {"北区档案馆", "河边实验室", "东塔", "旧天文台", "港口办公室", "山间小屋"};

Wording wording(std::string_view lang, Rng& rng, const std::string& needle) {
  if (lang == "zh") {
    const std::string place = rng.pick(kZhPlacesNeedle);
    return {.intro = "请仔细阅读下面的文字，读完后回答一个问题。\n\n",
            .needle_sentence = fmt::format("请记住：{}的通行码是 {}。", place, needle),
            .question = fmt::format("\n\n问题：上文中提到的{}的通行码是什么？请只回答通行码。", place),
            .joiner = "",
            .paragraph = "\n\n"};
  }
  const std::string place = rng.pick(kEnPlaces);
  return {.intro = "Read the following text carefully. A question about it follows.\n\n",
          .needle_sentence = fmt::format("Remember this: the access code for {} is {}.", place, needle),
          .question = fmt::format("\n\nQuestion: what is the access code for {} mentioned in the text above? "
                                  "Reply with the code only.",
                                  place),
          .joiner = " ",
          .paragraph = "\n\n"};
}

// The filler and the needle: sentences[0..n) with the needle before sentence k, paragraphs
// after the sentences marked in `breaks`. Returns the text and, in *prefix, the text before
// the needle (to measure its depth).
std::string assemble(const Wording& w, const std::vector<std::string>& sentences, const std::vector<bool>& breaks,
                     size_t n, size_t k, std::string* prefix) {
  std::string text = w.intro;
  for (size_t i = 0; i <= n; ++i) {
    if (i == k) {
      if (prefix) *prefix = text;
      text += w.needle_sentence;
      text += w.joiner;
    }
    if (i == n) break;
    text += sentences[i];
    text += breaks[i] ? w.paragraph : w.joiner;
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n')) text.pop_back();
  text += w.question;
  return text;
}

}  // namespace

Result<std::vector<LongContextCell>> longcontext_cells(const LongContextSpec& spec) {
  for (int64_t d : spec.depths) {
    if (d < 0 || d > 100) return Status::bad_input(fmt::format("depth {} is not a percentage (0..100)", d));
  }
  for (int64_t l : spec.lengths) {
    if (l < 64) return Status::bad_input(fmt::format("length {} is too small (at least 64 tokens)", l));
  }
  std::vector<LongContextCell> cells;
  if (spec.lengths.empty() && spec.depths.empty()) {
    const std::array<int64_t, 5> lengths = {4096, 8192, 16384, 32768, 65536};
    for (size_t i = 0; i < lengths.size(); ++i) {
      const std::vector<int64_t> depths = i % 2 == 0 ? std::vector<int64_t>{10, 50, 90} : std::vector<int64_t>{25, 75};
      for (int64_t d : depths) cells.push_back({lengths[i], d});
    }
    return cells;
  }
  const std::vector<int64_t> lengths = spec.lengths.empty() ? std::vector<int64_t>{4096, 8192, 16384, 32768, 65536} : spec.lengths;
  const std::vector<int64_t> depths = spec.depths.empty() ? std::vector<int64_t>{10, 25, 50, 75, 90} : spec.depths;
  for (int64_t l : lengths) {
    for (int64_t d : depths) cells.push_back({l, d});
  }
  return cells;
}

Result<LongContextItem> make_longcontext_item(uint64_t seed, std::string_view lang, int64_t target_tokens,
                                              int64_t depth_percent, const TokenCounter& count) {
  if (lang != "en" && lang != "zh") return Status::bad_input(fmt::format("unknown language '{}' (en or zh)", lang));
  if (target_tokens < 64) return Status::bad_input(fmt::format("length {} is too small (at least 64 tokens)", target_tokens));
  Rng rng(item_seed(seed, lang, target_tokens, depth_percent));
  LongContextItem item;
  item.id = fmt::format("{}-{}-d{}", lang, target_tokens, depth_percent);
  item.lang = std::string(lang);
  item.target_tokens = target_tokens;
  item.depth_percent = depth_percent;
  item.needle = make_needle(rng);
  const Wording w = wording(lang, rng, item.needle);

  // Sentences with their own token counts (an estimate of the joined text's: merges across
  // sentence boundaries make the whole differ by a little, corrected below).
  std::vector<std::string> sentences;
  std::vector<bool> breaks;
  std::vector<int64_t> cumulative{0};
  const int64_t fixed = count(w.intro + w.needle_sentence + w.question);
  if (fixed + 16 > target_tokens) {
    return Status::bad_input(fmt::format("length {} is too small for the question ({} tokens)", target_tokens, fixed));
  }
  size_t until_break = 4 + rng.below(5);
  const auto grow_to = [&](int64_t tokens) {
    while (cumulative.back() < tokens) {
      sentences.push_back(lang == "zh" ? zh_sentence(rng) : en_sentence(rng));
      breaks.push_back(--until_break == 0);
      if (until_break == 0) until_break = 4 + rng.below(5);
      cumulative.push_back(cumulative.back() + count(sentences.back() + w.joiner));
    }
  };
  const int64_t want_filler = target_tokens - fixed;
  grow_to(want_filler);
  size_t n = static_cast<size_t>(std::lower_bound(cumulative.begin(), cumulative.end(), want_filler) - cumulative.begin());
  const auto needle_at = [&](size_t n_sentences) {
    return static_cast<size_t>(std::llround(static_cast<double>(n_sentences) * static_cast<double>(depth_percent) / 100.0));
  };
  // Adjust n until the whole prompt is at most the target and within tolerance of it; each
  // step moves by the sentences the error is worth (one at a time once close). The best
  // prompt not above the target is kept, so short targets, where one sentence is more than
  // the tolerance, end at the closest prompt below.
  const int64_t slack = std::max<int64_t>(1, static_cast<int64_t>(kLengthTolerance * static_cast<double>(target_tokens)));
  int64_t best_tokens = -1;
  size_t best_n = 0;
  std::vector<size_t> visited;
  for (int iter = 0; iter < 64; ++iter) {
    // A count seen before means the steps cycle (one sentence more is too long, one fewer
    // too short): the best so far is as close as whole sentences get.
    if (std::find(visited.begin(), visited.end(), n) != visited.end()) break;
    visited.push_back(n);
    const int64_t tokens = count(assemble(w, sentences, breaks, n, needle_at(n), nullptr));
    const int64_t error = tokens - target_tokens;
    if (error <= 0 && tokens > best_tokens) {
      best_tokens = tokens;
      best_n = n;
    }
    if (error <= 0 && -error <= slack) break;
    const double per_sentence = n > 0 ? static_cast<double>(cumulative[n]) / static_cast<double>(n) : 8.0;
    const auto step = static_cast<size_t>(std::max(1.0, std::abs(static_cast<double>(error)) / per_sentence));
    if (error > 0) {
      if (n == 0) break;
      n -= std::min(step, n);
    } else {
      const size_t next = n + (-error > 2 * slack ? step : 1);
      n = next;
      while (sentences.size() < n) grow_to(cumulative.back() + 1);
    }
  }
  if (best_tokens < 0) return Status::bad_input(fmt::format("length {} cannot be reached", target_tokens));
  n = best_n;
  std::string prefix;
  const std::string text = assemble(w, sentences, breaks, n, needle_at(n), &prefix);
  item.prompt = text;
  item.prompt_tokens = count(text);
  item.needle_depth = item.prompt_tokens > 0 ? static_cast<double>(count(prefix)) / static_cast<double>(item.prompt_tokens) : 0;
  return item;
}

Result<std::vector<LongContextItem>> make_longcontext_items(const LongContextSpec& spec, const TokenCounter& count,
                                                            const std::function<void(size_t, size_t)>& progress) {
  ASSIGN_OR_RETURN(std::vector<LongContextCell> cells, longcontext_cells(spec));
  const std::vector<std::string> langs = spec.langs.empty() ? std::vector<std::string>{"en", "zh"} : spec.langs;
  std::vector<LongContextItem> items;
  const size_t total = cells.size() * langs.size();
  for (const LongContextCell& cell : cells) {
    for (const std::string& lang : langs) {
      ASSIGN_OR_RETURN(LongContextItem item, make_longcontext_item(spec.seed, lang, cell.length, cell.depth, count));
      items.push_back(std::move(item));
      if (progress) progress(items.size(), total);
    }
  }
  return items;
}

}  // namespace moetier::eval
