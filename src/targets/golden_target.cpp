// golden_target.cpp — the `golden` target: the golden model (src/golden/golden.h) run on the image.
//
// It writes exactly what the contract says, so every check of it passes by construction; its use is
// as the reference side of a differential run: `kvfuzz compare --target T --against golden` shows
// the first byte where target T's image departs from the contract (campaign/compare.h).
#include "golden/golden.h"
#include "target.h"

namespace kvf {

namespace {

class GoldenTarget final : public Target {
 public:
  const TargetInfo& info() const override { return info_; }

  RunResult run(const Case& c, std::byte* image, const ArenaLayout& layout) override {
    golden::golden_append(c, image, layout);
    return {};
  }

 private:
  TargetInfo info_{
      "golden",
      "the golden model (src/golden) on the host: the contract itself, for `kvfuzz compare --against golden`",
      "every valid case",
      "exact",
      false,
  };
};

}  // namespace

std::unique_ptr<Target> make_golden_target(const TargetOptions&) { return std::make_unique<GoldenTarget>(); }

}  // namespace kvf
