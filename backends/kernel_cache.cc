#include "backends/kernel_cache.h"

#include <utility>

namespace kgrad {
namespace {

bool SameTensor(const Tensor& a, const Tensor& b) {
  return a.buffer() == b.buffer() && a.dtype() == b.dtype() && a.shape() == b.shape();
}

}  // namespace

std::optional<Tensor> KernelCache::Find(const Tensor& source, const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry& e : entries_) {
    if (e.key == key && SameTensor(e.source, source)) return e.derived;
  }
  return std::nullopt;
}

void KernelCache::Store(const Tensor& source, std::string key, Tensor derived) {
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry& e : entries_) {
    if (e.key == key) {
      e.source = source;
      e.derived = std::move(derived);
      return;
    }
  }
  if (entries_.size() >= kMaxEntries) entries_.erase(entries_.begin());  // the oldest
  entries_.push_back(Entry{source, std::move(key), std::move(derived)});
}

size_t KernelCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::shared_ptr<const void> KernelCache::FindPlan(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [k, plan] : plans_) {
    if (k == key) return plan;
  }
  return nullptr;
}

void KernelCache::StorePlan(std::string key, std::shared_ptr<const void> plan) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [k, p] : plans_) {
    if (k == key) {
      p = std::move(plan);
      return;
    }
  }
  if (plans_.size() >= kMaxEntries) plans_.erase(plans_.begin());  // the oldest
  plans_.emplace_back(std::move(key), std::move(plan));
}

size_t KernelCache::num_plans() const {
  std::lock_guard<std::mutex> lock(mu_);
  return plans_.size();
}

}  // namespace kgrad
