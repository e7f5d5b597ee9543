#include "model/block_cache.h"

namespace shardtrace {

std::shared_ptr<const RunResult> BlockCache::Find(const std::string& key) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = runs_.find(key);
  return it == runs_.end() ? nullptr : it->second;
}

std::shared_ptr<const RunResult> BlockCache::Store(const std::string& key,
                                                   std::shared_ptr<const RunResult> run) {
  const std::lock_guard<std::mutex> lock(mutex_);
  return runs_.try_emplace(key, std::move(run)).first->second;
}

std::shared_ptr<const StepResult> BlockCache::FindStep(const std::string& key) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = steps_.find(key);
  return it == steps_.end() ? nullptr : it->second;
}

std::shared_ptr<const StepResult> BlockCache::StoreStep(const std::string& key,
                                                        std::shared_ptr<const StepResult> step) {
  const std::lock_guard<std::mutex> lock(mutex_);
  return steps_.try_emplace(key, std::move(step)).first->second;
}

}  // namespace shardtrace
