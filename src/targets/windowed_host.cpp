// windowed_host.cpp — Target::run_windowed()'s default: the whole image in host memory, the cache
// filled page by page when the kernel first touches it.
//
// The image is reserved as address space between two inaccessible fences, like the worker's arena
// (campaign/isolation.cpp). The materialised ranges (arena/windows.h) are made accessible and copied
// in; every other page, all inside the cache section, stays inaccessible. When the kernel first
// touches one of them, the SIGSEGV handler makes the page accessible, stores the fill in its elements
// (CacheFill, cache_fill.cuh) and returns, and the access is retried: the page holds its pre-run
// bytes, as if the whole cache had been filled before the run. A fault anywhere else (a wild write
// into a fence) goes to the handler that was installed before ours, or kills the process as it would
// have without us: a `crash`, as in a dense run. After the run the materialised ranges are copied
// back and the touched pages, the only ones the kernel can have changed, are checked against the
// fill with the CPU build of the Thrust check (arena/outside_scan_cpu.h). Memory is the windows plus
// the touched pages, whatever the size of the cache.
//
// Limits: each touched page outside the windows is a separate mapping until its neighbours are
// touched too; a kernel scattering writes over more pages than vm.max_map_count allows (65530 by
// default) makes mprotect fail, and that fault is then a `crash` instead of a stray_write.
//
// Concurrency: several images may be live at once (campaign threads with --no-fork); the handler
// finds the faulting one in a fixed table. Concurrent first touches of one page by several threads
// are serialised per page; a plain access by another thread in the instant between a page becoming
// accessible and its fill is not (the kernels kvfuzz runs this way touch the image from one thread).
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "arena/outside_scan_cpu.h"
#include "base/errors.h"
#include "target.h"

namespace kvf {

namespace {

constexpr size_t kFence = size_t{64} << 30;  // address space only (PROT_NONE, MAP_NORESERVE)

// Pages of one live image that are filled on first touch.
struct LazyRegion {
  std::byte* begin = nullptr;  // first lazily filled page
  std::byte* end = nullptr;    // past the last
  std::byte* cache = nullptr;  // element 0 of the cache buffer
  int64_t cache_elems = 0;
  CacheFill fill;
  std::unique_ptr<std::atomic<uint8_t>[]> state;  // per page: 0 untouched, 1 being filled, 2 filled
  size_t page = 4096;
};

constexpr int kMaxRegions = 256;
std::atomic<LazyRegion*> g_regions[kMaxRegions];
struct sigaction g_previous;  // the SIGSEGV action before ours

void chain(int sig, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default action: reinstall it and raise the signal again; it is blocked until this handler returns,
  // then kills the process as it would have without us (also for a SIGSEGV sent by raise() or kill).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);
}

extern "C" void on_fault(int sig, siginfo_t* info, void* context) {
  auto* addr = static_cast<std::byte*>(info->si_addr);
  const bool fault = info->si_code > 0;  // from the MMU, not kill() / raise()
  for (std::atomic<LazyRegion*>& slot : g_regions) {
    if (!fault) break;
    LazyRegion* r = slot.load(std::memory_order_acquire);
    if (r == nullptr || addr < r->begin || addr >= r->end) continue;
    const auto index = static_cast<size_t>(addr - r->begin) / r->page;
    std::atomic<uint8_t>& state = r->state[index];
    uint8_t expected = 0;
    if (state.compare_exchange_strong(expected, 1)) {
      std::byte* p = r->begin + index * r->page;
      if (mprotect(p, r->page, PROT_READ | PROT_WRITE) != 0) break;
      const int size = r->fill.elem_size;
      const int64_t lo = std::max<int64_t>(0, (p - r->cache) / size);
      const int64_t hi = std::min<int64_t>(r->cache_elems, (p + r->page - r->cache) / size);
      auto* cache = reinterpret_cast<unsigned char*>(r->cache);
      for (int64_t e = lo; e < hi; ++e) store_cache_bits(cache, e, size, r->fill.bits);
      state.store(2, std::memory_order_release);
      return;
    }
    if (expected == 2) break;  // filled and still faulting: a genuine fault
    while (state.load(std::memory_order_acquire) != 2) {
    }
    return;
  }
  chain(sig, info, context);
}

void install_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &g_previous) != 0) throw InfraError("cannot install the page-fill handler (sigaction SIGSEGV)");
  });
}

// The whole image of a windowed case in host memory; see the file comment.
class LazyImage {
 public:
  LazyImage(const ArenaLayout& l, const WindowPlan& plan, const std::byte* source) {
    region_.page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (static_cast<int64_t>(region_.page) > kWindowPage || kWindowPage % static_cast<int64_t>(region_.page) != 0)
      throw InfraError("windowed runs need a page size dividing 4 KiB");
    bytes_ = (static_cast<size_t>(l.total_bytes) + region_.page - 1) / region_.page * region_.page;
    void* reserve = mmap(nullptr, kFence + bytes_ + kFence, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserve == MAP_FAILED) throw std::bad_alloc();
    reserve_ = static_cast<std::byte*>(reserve);
    image_ = reserve_ + kFence;
    madvise(image_, bytes_, MADV_NOHUGEPAGE);
    for (const ByteRange& r : plan.ranges) {
      if (mprotect(image_ + r.begin, static_cast<size_t>(r.size()), PROT_READ | PROT_WRITE) != 0) {
        munmap(reserve_, kFence + bytes_ + kFence);
        throw std::bad_alloc();
      }
      std::memcpy(image_ + r.begin, source + r.begin, static_cast<size_t>(r.size()));
    }
    const size_t cache_begin = static_cast<size_t>(l.cache_begin) / region_.page * region_.page;
    const size_t cache_end = (static_cast<size_t>(l.cache_begin + l.cache_bytes) + region_.page - 1) / region_.page * region_.page;
    region_.begin = image_ + cache_begin;
    region_.end = image_ + cache_end;
    region_.cache = image_ + l.cache_begin;
    region_.cache_elems = l.cache_bytes / plan.fill.elem_size;
    region_.fill = plan.fill;
    pages_ = (cache_end - cache_begin) / region_.page;
    region_.state = std::make_unique<std::atomic<uint8_t>[]>(pages_);
    for (size_t i = 0; i < pages_; ++i) region_.state[i].store(0, std::memory_order_relaxed);
    install_handler();
    for (std::atomic<LazyRegion*>& slot : g_regions) {
      LazyRegion* none = nullptr;
      if (slot.compare_exchange_strong(none, &region_)) {
        slot_ = &slot;
        break;
      }
    }
    if (slot_ == nullptr) {
      munmap(reserve_, kFence + bytes_ + kFence);
      throw InfraError("too many windowed images at once (" + std::to_string(kMaxRegions) + ")");
    }
  }
  ~LazyImage() {
    slot_->store(nullptr, std::memory_order_release);
    munmap(reserve_, kFence + bytes_ + kFence);
  }
  LazyImage(const LazyImage&) = delete;
  LazyImage& operator=(const LazyImage&) = delete;

  std::byte* data() { return image_; }
  const unsigned char* cache() const { return reinterpret_cast<const unsigned char*>(region_.cache); }

  void copy_back(std::byte* dest, const WindowPlan& plan) const {
    for (const ByteRange& r : plan.ranges) std::memcpy(dest + r.begin, image_ + r.begin, static_cast<size_t>(r.size()));
  }

  // The cache elements of the pages the kernel touched, as maximal element ranges.
  std::vector<ElemRange> touched() const {
    std::vector<ElemRange> out;
    const int64_t size = region_.fill.elem_size;
    for (size_t i = 0; i < pages_; ++i) {
      if (region_.state[i].load(std::memory_order_acquire) == 0) continue;
      const std::byte* p = region_.begin + i * region_.page;
      const int64_t lo = std::max<int64_t>(0, (p - region_.cache) / size);
      const int64_t hi = std::min<int64_t>(region_.cache_elems, (p + region_.page - region_.cache) / size);
      if (!out.empty() && out.back().end == lo) {
        out.back().end = hi;
      } else if (lo < hi) {
        out.push_back({lo, hi});
      }
    }
    return out;
  }

 private:
  std::byte* reserve_ = nullptr;
  std::byte* image_ = nullptr;
  size_t bytes_ = 0;
  size_t pages_ = 0;
  LazyRegion region_;
  std::atomic<LazyRegion*>* slot_ = nullptr;
};

}  // namespace

RunResult Target::run_windowed(const Case& c, std::byte* image, const ArenaLayout& layout, const WindowPlan& plan,
                               OutsideDiff& outside) {
  LazyImage host(layout, plan, image);
  const RunResult r = run(c, host.data(), layout);
  host.copy_back(image, plan);
  if (r.status == RunStatus::ok) outside = scan_outside_host(host.cache(), plan.fill, cache_windows(plan, layout), host.touched());
  return r;
}

}  // namespace kvf
