// Resumable streams, as llama-server has them: a streamed chat or completion request that
// carries an `X-Conversation-Id: ID` header keeps its SSE bytes under ID while the reply
// runs and for a while after. A client that lost its connection reads them again from any
// byte offset (GET /v1/stream?conv_id=ID&from=N: the bytes so far, then the live ones until
// the reply ends); DELETE /v1/stream?conv_id=ID is the user's Stop (cancels the reply, forgets
// the bytes); POST /v1/streams/lookup tells a client which of the ids it names exist. Such a
// reply no longer ends when its connection does: only the Stop, the end of the reply or the
// server's shutdown end it. The id travels in the query string, not the path, because it may
// hold a model name with '/' (org/repo). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace moetier::server {

class StreamSession {
 public:
  StreamSession(std::string id, size_t max_bytes, int64_t started_at);

  const std::string& id() const { return id_; }
  // The producer: appends bytes (the oldest are dropped beyond max_bytes) and finishes.
  void append(std::string_view bytes);
  void finish(int64_t now);
  // The Stop: the producer sees cancelled() and ends the reply.
  void cancel();
  bool cancelled() const;

  enum class Read { kData, kFinished, kLost, kTimeout };
  // Bytes from `offset` on (a logical offset: counted from the reply's first byte) appended
  // to `out`, waiting up to `wait` when there are none yet. kFinished: no more will come.
  // kLost: `offset` is before the bytes still kept.
  Read read(size_t offset, std::string& out, std::chrono::milliseconds wait) const;

  struct Info {
    bool done = false;
    size_t total_bytes = 0;
    int64_t started_at = 0, completed_at = 0;  // Unix seconds; completed_at 0 while running
  };
  Info info() const;

 private:
  const std::string id_;
  const size_t max_bytes_;
  const int64_t started_at_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::string bytes_;
  size_t dropped_ = 0;  // bytes dropped from the front
  bool done_ = false, cancelled_ = false;
  int64_t completed_at_ = 0;
};

class StreamSessions {
 public:
  struct Options {
    size_t max_bytes_per_session = 16u << 20;
    int64_t keep_finished_s = 300;  // a finished reply can be read again this long
  };
  explicit StreamSessions(Options options) : options_(options) {}
  StreamSessions() : StreamSessions(Options{}) {}

  // A new session under `id` (an earlier one with the same id is cancelled and replaced).
  std::shared_ptr<StreamSession> start(const std::string& id, int64_t now);
  std::shared_ptr<StreamSession> find(const std::string& id, int64_t now);
  // The Stop: cancels and forgets the session, if there is one.
  void stop(const std::string& id);
  // The sessions whose id is one of `ids` or starts with "ID::" (one per model, as
  // llama-server's router keys them).
  std::vector<std::shared_ptr<StreamSession>> lookup(const std::vector<std::string>& ids, int64_t now);

 private:
  void expire(int64_t now);  // with mu_ held
  Options options_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<StreamSession>> sessions_;
};

}  // namespace moetier::server
