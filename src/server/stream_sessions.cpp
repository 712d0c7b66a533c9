#include "server/stream_sessions.h"

namespace moetier::server {

StreamSession::StreamSession(std::string id, size_t max_bytes, int64_t started_at)
    : id_(std::move(id)), max_bytes_(max_bytes), started_at_(started_at) {}

void StreamSession::append(std::string_view bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    bytes_.append(bytes);
    if (bytes_.size() > max_bytes_) {
      const size_t drop = bytes_.size() - max_bytes_;
      bytes_.erase(0, drop);
      dropped_ += drop;
    }
  }
  cv_.notify_all();
}

void StreamSession::finish(int64_t now) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    completed_at_ = now;
  }
  cv_.notify_all();
}

void StreamSession::cancel() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
}

bool StreamSession::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

StreamSession::Read StreamSession::read(size_t offset, std::string& out, std::chrono::milliseconds wait) const {
  std::unique_lock<std::mutex> lock(mu_);
  auto ready = [&] { return offset < dropped_ + bytes_.size() || done_ || cancelled_; };
  if (!ready()) cv_.wait_for(lock, wait, ready);
  if (offset < dropped_) return Read::kLost;
  if (offset < dropped_ + bytes_.size()) {
    out.append(bytes_, offset - dropped_, std::string::npos);
    return Read::kData;
  }
  return done_ || cancelled_ ? Read::kFinished : Read::kTimeout;
}

StreamSession::Info StreamSession::info() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {.done = done_, .total_bytes = dropped_ + bytes_.size(), .started_at = started_at_, .completed_at = completed_at_};
}

std::shared_ptr<StreamSession> StreamSessions::start(const std::string& id, int64_t now) {
  auto session = std::make_shared<StreamSession>(id, options_.max_bytes_per_session, now);
  std::lock_guard<std::mutex> lock(mu_);
  expire(now);
  auto [it, inserted] = sessions_.try_emplace(id, session);
  if (!inserted) {
    it->second->cancel();  // one live reply per conversation: the newer one wins
    it->second = session;
  }
  return session;
}

std::shared_ptr<StreamSession> StreamSessions::find(const std::string& id, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  expire(now);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

void StreamSessions::stop(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  it->second->cancel();
  sessions_.erase(it);
}

std::vector<std::shared_ptr<StreamSession>> StreamSessions::lookup(const std::vector<std::string>& ids, int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  expire(now);
  std::vector<std::shared_ptr<StreamSession>> out;
  for (const std::string& id : ids) {
    if (id.empty()) continue;
    const std::string prefix = id + "::";
    for (const auto& [key, session] : sessions_) {
      if (key == id || key.compare(0, prefix.size(), prefix) == 0) out.push_back(session);
    }
  }
  return out;
}

void StreamSessions::expire(int64_t now) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const StreamSession::Info info = it->second->info();
    if (info.done && now - info.completed_at > options_.keep_finished_s) {
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace moetier::server
