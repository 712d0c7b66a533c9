#include "model/expert_source.h"

namespace moetier {

ExpertStoreStats operator-(const ExpertStoreStats& b, const ExpertStoreStats& a) {
  ExpertStoreStats d = b;
  d.requests -= a.requests;
  d.hits -= a.hits;
  d.read_ahead_hits -= a.read_ahead_hits;
  d.misses -= a.misses;
  d.predicted -= a.predicted;
  d.predicted_used -= a.predicted_used;
  d.used_after_prediction -= a.used_after_prediction;
  d.reads -= a.reads;
  d.bytes_read -= a.bytes_read;
  d.read_busy_seconds -= a.read_busy_seconds;
  d.wait_seconds -= a.wait_seconds;
  return d;
}

ExpertStoreStats& operator+=(ExpertStoreStats& a, const ExpertStoreStats& b) {
  a.requests += b.requests;
  a.hits += b.hits;
  a.read_ahead_hits += b.read_ahead_hits;
  a.misses += b.misses;
  a.predicted += b.predicted;
  a.predicted_used += b.predicted_used;
  a.used_after_prediction += b.used_after_prediction;
  a.reads += b.reads;
  a.bytes_read += b.bytes_read;
  a.read_busy_seconds += b.read_busy_seconds;
  a.wait_seconds += b.wait_seconds;
  return a;
}

}  // namespace moetier
