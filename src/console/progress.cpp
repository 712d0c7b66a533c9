#include "console/progress.h"

#include "core/format.h"
#include "platform/terminal.h"

#include <cstdio>

#include <fmt/format.h>

namespace moetier {

ProgressBar::ProgressBar(ProgressOptions options) : options_(std::move(options)) {
  is_tty_ = platform::is_terminal(platform::StandardStream::kStderr);
  start_ = std::chrono::steady_clock::now();
  last_draw_ = start_ - std::chrono::seconds(1);
}

ProgressBar::~ProgressBar() { finish(); }

double ProgressBar::elapsed_seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double ProgressBar::gb_per_second() const {
  const double s = elapsed_seconds();
  return s > 0 ? static_cast<double>(done_) / s / 1e9 : 0.0;
}

void ProgressBar::update(uint64_t done) {
  done_ = done;
  if (!options_.enabled || !is_tty_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(false);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (options_.enabled) draw(true);
}

void ProgressBar::draw(bool final_line) {
  const double frac = options_.total ? static_cast<double>(done_) / static_cast<double>(options_.total) : 1.0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(frac * kWidth + 0.5);
  std::string bar(static_cast<size_t>(std::min(filled, kWidth)), '#');
  bar.resize(kWidth, '.');
  std::string amount;
  if (options_.bytes) {
    amount = fmt::format("{} / {}, {:.2f} GB/s", format_bytes(done_), format_bytes(options_.total), gb_per_second());
  } else {
    amount = fmt::format("{} / {}", done_, options_.total);
  }
  // Remaining time at the rate so far (not on the final line, and not before any progress).
  std::string eta;
  if (!final_line && done_ > 0 && done_ < options_.total) {
    const double left = elapsed_seconds() * static_cast<double>(options_.total - done_) / static_cast<double>(done_);
    eta = left >= 3600 ? fmt::format(", ETA {}h{:02}m", static_cast<int>(left / 3600), static_cast<int>(left / 60) % 60)
          : left >= 60 ? fmt::format(", ETA {}m{:02}s", static_cast<int>(left / 60), static_cast<int>(left) % 60)
                       : fmt::format(", ETA {:.0f} s", left);
  }
  const char* lead = is_tty_ ? "\r\033[2K" : "";
  std::fprintf(stderr, "%s%s [%s] %3.0f%% %s, %.1f s%s%s", lead, options_.label.c_str(), bar.c_str(), frac * 100.0,
               amount.c_str(), elapsed_seconds(), eta.c_str(), final_line ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace moetier
