// fill_rows_test.cpp — the arena fill's row-wise context values equal the element-wise definition.
#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include "gen/capabilities.h"
#include "gen/profile.h"
#include "golden/payload.h"

namespace kvf {
namespace {

// context_field_row_bits() computes a row's values with the coordinate hash's prefix hoisted out of
// the dim loop; it must give context_field_bits() bit for bit, on every field of every format, or
// the fill (and every saved case's pre-run image) would change.
TEST(FillRows, aContextRowEqualsItsElementsOnEveryProfilesFields) {
  const std::filesystem::path configs = std::filesystem::path(KVFUZZ_SOURCE_DIR) / "configs";
  for (const char* profile : {"", "formats.json", "quant.json", "quant-formats.json", "serving.json"}) {
    const Profile pr = *profile == '\0' ? default_profile() : load_profile(configs / profile);
    const CaseSource source(pr, std::nullopt);
    for (int64_t i = 0; i < 40; ++i) {
      const Case c = source.draw(11, i).kase;
      for (const CacheField& f : c.fields()) {
        std::vector<uint32_t> row(static_cast<size_t>(f.head_dim));
        for (int64_t request = 0; request < 3; ++request)
          for (int64_t pos = 0; pos < 5; ++pos)
            for (int64_t head = 0; head < f.num_heads; ++head) {
              golden::context_field_row_bits(c, f, request, pos, head, row.data());
              for (int64_t d = 0; d < f.head_dim; ++d)
                ASSERT_EQ(row[d], golden::context_field_bits(c, f, request, pos, head, d))
                    << (*profile ? profile : "default") << " case " << i << " field " << f.name << " request " << request << " pos " << pos
                    << " head " << head << " dim " << d;
            }
      }
    }
  }
}

}  // namespace
}  // namespace kvf
