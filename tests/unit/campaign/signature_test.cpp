// signature_test.cpp — finding signatures v2 (src/campaign/signature.h): one bug, one signature.
//
//   ctest --test-dir build -R 'Signature\.' --output-on-failure
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "campaign/signature.h"

namespace kvf {
namespace {

Verdict failing(FindingKind kind, const char* victim, const char* writer, const char* sentence = "") {
  Finding f;
  f.kind = kind;
  f.victim_class = victim;
  f.writer_class = writer;
  f.sentence = sentence;
  Verdict v;
  v.findings = {f};
  return v;
}

Case some_case(Layout layout, DType dtype, int64_t heads) {
  Case c;
  c.layout = layout;
  c.input_dtype = c.cache_dtype = dtype;
  c.num_heads = heads;
  return c;
}

TEST(Signature, namesTheBugNotTheCaseThatShowedIt) {
  // One stray write, seen through different layouts, dtypes, shapes, cells and decodings.
  const Signature a = signature_of(some_case(Layout::paged_hnd, DType::f16, 2), failing(FindingKind::stray_write, "context", "request"));
  const Signature b = signature_of(some_case(Layout::paged_nhd, DType::bf16, 64), failing(FindingKind::stray_write, "gap", "ambiguous"));
  const Signature c = signature_of(some_case(Layout::paged_nhd, DType::f32, 8), failing(FindingKind::stray_write, "tail", "unknown"));
  EXPECT_EQ(a.text(), "v2 stray_write|own_cells|kernel");
  EXPECT_EQ(a.id(), b.id());
  EXPECT_EQ(a.id(), c.id());
  EXPECT_EQ(a.identity, a.bug);
  // Other bugs stay apart: a free block, another request, a padding row's value.
  const Case k = some_case(Layout::paged_nhd, DType::f16, 2);
  EXPECT_NE(signature_of(k, failing(FindingKind::stray_write, "free_block", "request")).id(), a.id());
  EXPECT_EQ(signature_of(k, failing(FindingKind::cross_request_write, "shared_block", "request")).text(),
            "v2 cross_request_write|other_request|kernel");
  EXPECT_EQ(signature_of(k, failing(FindingKind::padding_leak, "free_block", "padding_row")).text(), "v2 padding_leak|cache|padding_row");
  EXPECT_EQ(signature_of(k, failing(FindingKind::missing_write, "scale_cache:new_token", "kernel")).text(),
            "v2 missing_write|scale_cache:new_token|kernel");
}

TEST(Signature, runFailuresShareOneSignatureButTheShrinkerKeepsTheirMessage) {
  const Case c = some_case(Layout::paged_nhd, DType::f16, 64);
  const Verdict heads = failing(FindingKind::launch_error, "run", "kernel", "launch refused: 64 heads");
  const Verdict empty = failing(FindingKind::launch_error, "run", "kernel", "launch refused: empty batch");
  EXPECT_EQ(signature_of(c, heads).text(), "v2 launch_error|run|kernel");
  EXPECT_EQ(signature_of(c, heads).id(), signature_of(c, empty).id());
  EXPECT_EQ(identity_of(heads), "launch_error|run|kernel|launch_refused:_#_heads");
  EXPECT_NE(identity_of(heads), identity_of(empty));
}

TEST(Signature, anIndexOfVersionOneIsReadAndItsEntriesMatchNothingNew) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kvfuzz-sig-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / FindingsIndex::kFileName)
      << R"({"schema": "kvfuzz-findings-index", "version": 1, "signature_version": 1, "signatures": {"b2e057c75f449f41":
           {"signature": "v1 oob_write|guard_band|kernel paged_hnd|f16>f16|none|requests=0|heads=1|padding=1|invalid=0",
            "file": "old.json", "size": [1, 0, 1, 1, 100], "found": 3, "superseded": []}}})";
  FindingsIndex index(dir);
  const Signature s = signature_of(some_case(Layout::paged_hnd, DType::f16, 1), failing(FindingKind::oob_write, "guard_band", "kernel"));
  EXPECT_FALSE(index.find(s.id()));
  EXPECT_TRUE(index.offer(s, "new.json", {1, 0, 1, 1, 100}));
  ASSERT_TRUE(index.find("b2e057c75f449f41"));  // the v1 entry stays
  EXPECT_EQ(index.find("b2e057c75f449f41")->file, "old.json");
  EXPECT_EQ(index.find(s.id())->file, "new.json");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvf
