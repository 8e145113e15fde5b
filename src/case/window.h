// window.h — sliding-window ring caches (docs/contract.md, "Serving conventions").
//
// A request of a ring case keeps S = window_sinks sink positions and a window of R = W - S further
// positions (W = window_size): at length L (tokens so far) it holds positions [0, min(S, L)) and
// [max(S, L - R), L). Position p lives at ring index
//   ring_index(p) = p                       (p < S)
//                   S + (p - S) mod R       (p >= S)
// of the request's block table (logical slot ring_index(p): block ring_index / block_size, offset
// ring_index % block_size), so the table needs ceil(min(W, L) / block_size) blocks. The contract is
// positional: after the call, ring index i holds the latest position < L that maps to it and is
// still in the window; a token of this call already outside the window (p >= S, p < L - R) is not
// written. Either the caller's slot_mapping marks those tokens with -1 (input slot_mapping), or every
// token carries its ring slot and the kernel skips them itself, given each row's position and its
// request's length (input positions: int32 arrays beside slot_mapping, window_rows()).
#pragma once

#include <cstdint>
#include <vector>

#include "case.h"

namespace kvf {

struct Window {
  int64_t size = 0;   // W
  int64_t sinks = 0;  // S

  int64_t ring() const { return size - sinks; }
  int64_t index(int64_t p) const { return p < sinks ? p : sinks + (p - sinks) % ring(); }
  // Whether position p < len is still held at length len.
  bool kept(int64_t p, int64_t len) const { return p < sinks || p >= len - ring(); }
  // The position ring index i holds at length len, or -1 when none has reached it yet.
  int64_t held(int64_t i, int64_t len) const {
    if (i >= size || i >= len) return -1;
    if (i < sinks) return i;
    return i + (len - 1 - i) / ring() * ring();
  }
  // Slots of the ring a request's sequence of length len uses.
  int64_t used(int64_t len) const { return len < size ? len : size; }
};

inline Window window_of(const Case& c) { return {c.window_size, c.window_sinks}; }

// Each row's logical position and its request's length after the call (rows of a ring case with
// positions input), -1 and 0 for rows that are no request's token (padding, invalid slots). A row
// belongs to the request whose block holds its slot; a request's rows take its positions in order
// (Request::positions, or context_len, context_len + 1, ...). int32: what the kernel receives.
struct WindowRows {
  std::vector<int32_t> position;  // [T]
  std::vector<int32_t> seq_len;   // [T]
};
WindowRows window_rows(const Case& c);

}  // namespace kvf
