#include "model/block_cache.h"

namespace shardtrace {
namespace {

// The stored value under `key`, or null; and storing unless another thread stored it first.
template <typename T>
std::shared_ptr<const T> FindIn(std::mutex& mutex,
                                 const std::map<std::string, std::shared_ptr<const T>, std::less<>>& map,
                                 const std::string& key) {
  const std::lock_guard<std::mutex> lock(mutex);
  const auto it = map.find(key);
  return it == map.end() ? nullptr : it->second;
}
template <typename T>
std::shared_ptr<const T> StoreIn(std::mutex& mutex,
                                 std::map<std::string, std::shared_ptr<const T>, std::less<>>& map,
                                 const std::string& key, std::shared_ptr<const T> value) {
  const std::lock_guard<std::mutex> lock(mutex);
  return map.try_emplace(key, std::move(value)).first->second;
}

}  // namespace

std::shared_ptr<const RunResult> BlockCache::Find(const std::string& key) const {
  return FindIn(mutex_, runs_, key);
}

std::shared_ptr<const RunResult> BlockCache::Store(const std::string& key,
                                                   std::shared_ptr<const RunResult> run) {
  return StoreIn(mutex_, runs_, key, std::move(run));
}

std::shared_ptr<const StepResult> BlockCache::FindStep(const std::string& key) const {
  return FindIn(mutex_, steps_, key);
}

std::shared_ptr<const StepResult> BlockCache::StoreStep(const std::string& key,
                                                        std::shared_ptr<const StepResult> step) {
  return StoreIn(mutex_, steps_, key, std::move(step));
}

}  // namespace shardtrace
