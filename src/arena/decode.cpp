// decode.cpp — see decode.h.
#include "decode.h"

#include <algorithm>

#include "values/convert.h"

namespace kvf {

namespace {

struct ByBits {
  bool operator()(const std::pair<uint32_t, uint64_t>& e, uint32_t bits) const { return e.first < bits; }
  bool operator()(uint32_t bits, const std::pair<uint32_t, uint64_t>& e) const { return bits < e.first; }
};

}  // namespace

void ValueDecoder::build() {
  built_ = true;
  const Case& c = c_;
  const int in_size = dtype_size(c.input_dtype);
  entries_.reserve(static_cast<size_t>(c.num_fields() * c.num_input_rows * c.num_heads * c.max_head_dim()));
  for (const CacheField& field : c.fields()) {  // ids by entry dim: an MLA k_pe dim d is D_c + d
    const bool is_value = field.index == 1;
    int64_t first = 0;
    for (int part = 0; part < field.num_parts; ++part) {
      const InputView& v = field.parts[part].view;
      for (int64_t row = 0; row < c.num_input_rows; ++row) {
        for (int64_t h = 0; h < field.num_heads; ++h) {
          for (int64_t d = 0; d < field.parts[part].width; ++d) {
            const int64_t e = v.offset + input_elem_offset(v.stride_token, v.stride_head, row, h, d);
            const auto bits = static_cast<uint32_t>(load_elem(initial_.input(), e, in_size));
            entries_.emplace_back(golden::convert_bits(bits, c.input_dtype, c.cache_dtype), id(is_value, row, h, first + d));
          }
        }
      }
      first += field.parts[part].width;
    }
  }
  std::sort(entries_.begin(), entries_.end());
}

DecodedValue ValueDecoder::decode(uint32_t bits, const CacheCell& cell) {
  if (!built_) build();
  const auto [lo, end] = std::equal_range(entries_.cbegin(), entries_.cend(), bits, ByBits{});
  if (lo == end) return DecodedValue{};

  const Unwritten& u = unwritten(bits, lo, end);
  if (!u.any_written) {
    DecodedValue d;
    d.source = u.kind;
    d.row = u.row;
    return d;
  }
  DecodedValue d;
  if (cell.role != CacheCell::Role::gap) {
    const uint64_t own = id(cell.is_value, 0, cell.head, cell.dim);
    const uint64_t both = id(false, 0, cell.head, cell.dim);
    const auto rows = static_cast<uint64_t>(c_.num_input_rows);
    if (cell.role == CacheCell::Role::context && cell.request >= 0 && end - lo > 1 && owned(lo, end, cell.request, own, both, d)) return d;
    if (pick(lo, end, own, own + rows, d)) return d;
    if (pick(lo, end, both, both + 2 * rows, d)) return d;
  }
  if (end - lo == 1) return use(lo->second);
  return ambiguous(lo, end);
}

// An ambiguous result over the candidates [first, last), naming their common request if any.
DecodedValue ValueDecoder::ambiguous(It first, It last) const {
  DecodedValue d;
  d.source = ValueSource::ambiguous;
  bool any = false;
  for (It it = first; it != last; ++it) {
    const auto row = static_cast<int64_t>(it->second % static_cast<uint64_t>(c_.num_input_rows));
    const int64_t r = request_of(row);
    if (r < 0) continue;  // rows that must not be written (or of free blocks) are no writers here
    if (!any) {
      d.common_request = r;
      any = true;
    } else if (r != d.common_request) {
      d.common_request = -1;
      break;
    }
  }
  return d;
}

// Candidate ids sort by (head, dim, tensor, row), so one (bits, head, dim[, tensor]) is a range.
uint64_t ValueDecoder::id(bool is_value, int64_t row, int64_t head, int64_t dim) const {
  return ((static_cast<uint64_t>(head) * static_cast<uint64_t>(c_.max_head_dim()) + static_cast<uint64_t>(dim)) * 2 +
          (is_value ? 1 : 0)) * static_cast<uint64_t>(c_.num_input_rows) + static_cast<uint64_t>(row);
}

ValueSource ValueDecoder::row_kind(int64_t row) const {
  if (row >= c_.num_slots()) return ValueSource::graph_row;
  const int64_t slot = c_.slot_mapping[static_cast<size_t>(row)];
  if (c_.is_padding(slot)) return ValueSource::padding_row;
  if (slot >= c_.capacity()) return ValueSource::invalid_row;
  return ValueSource::request;
}

// The request whose new token input row `row` is, -1 for a row that must not be written.
int64_t ValueDecoder::request_of(int64_t row) const {
  if (row_kind(row) != ValueSource::request) return -1;
  const int64_t slot = c_.slot_mapping[static_cast<size_t>(row)];
  return loc_.owner(slot / c_.cache.block_size).request;
}

DecodedValue ValueDecoder::use(uint64_t candidate) {
  DecodedValue d;
  const auto rows = static_cast<uint64_t>(c_.num_input_rows);
  d.row = static_cast<int64_t>(candidate % rows);
  uint64_t rest = candidate / rows;
  d.is_value = rest % 2 == 1;
  rest /= 2;
  d.dim = static_cast<int64_t>(rest % static_cast<uint64_t>(c_.max_head_dim()));
  d.head = static_cast<int64_t>(rest / static_cast<uint64_t>(c_.max_head_dim()));
  d.source = row_kind(d.row);
  if (d.source == ValueSource::request) {
    const int64_t slot = c_.slot_mapping[static_cast<size_t>(d.row)];
    const CacheLocator::Owner o = loc_.owner(slot / c_.cache.block_size);
    d.request = o.request;
    d.token = o.logical * c_.cache.block_size + slot % c_.cache.block_size;
    if (d.request < 0) d.source = ValueSource::unknown;  // an invalid case: slot in a free block
  }
  hint_row_ = d.row;
  return d;
}

// The candidates in [lo, end) of request `owner`'s rows, into `out`; false if there are none. Among
// them those of the cell's own tensor, head and dim (ids from `own`), then of its head and dim
// (from `both`), then any: the only one of the first non-empty set, else ambiguous (common_request
// `owner`).
bool ValueDecoder::owned(It lo, It end, int64_t owner, uint64_t own, uint64_t both, DecodedValue& out) {
  const auto rows = static_cast<uint64_t>(c_.num_input_rows);
  int64_t n[3] = {0, 0, 0};  // own tensor/head/dim, head/dim, any
  uint64_t pick_of[3] = {0, 0, 0};
  for (It it = lo; it != end; ++it) {
    if (request_of(static_cast<int64_t>(it->second % rows)) != owner) continue;
    const uint64_t id = it->second;
    const int set = id >= own && id < own + rows ? 0 : id >= both && id < both + 2 * rows ? 1 : 2;
    for (int k = set; k < 3; ++k) {
      ++n[k];
      pick_of[k] = id;
    }
  }
  for (int k = 0; k < 3; ++k) {
    if (n[k] == 0) continue;
    if (n[k] == 1) {
      out = use(pick_of[k]);
    } else {
      out = DecodedValue{};
      out.source = ValueSource::ambiguous;
      out.common_request = owner;
    }
    return true;
  }
  return false;
}

// Picks among the candidates in [lo, end) with ids in [id_lo, id_hi) into `out`; false if there are none.
bool ValueDecoder::pick(It lo, It end, uint64_t id_lo, uint64_t id_hi, DecodedValue& out) {
  const auto first = std::lower_bound(lo, end, Entry{lo->first, id_lo});
  const auto last = std::lower_bound(first, end, Entry{lo->first, id_hi});
  if (first == last) return false;
  if (hint_row_ >= 0) {
    for (uint64_t base = id_lo; base < id_hi; base += static_cast<uint64_t>(c_.num_input_rows)) {
      const Entry want{lo->first, base + static_cast<uint64_t>(hint_row_)};
      const auto it = std::lower_bound(first, last, want);
      if (it != last && *it == want) {
        out = use(want.second);
        return true;
      }
    }
  }
  if (last - first == 1) {
    out = use(first->second);
  } else {
    out = ambiguous(first, last);
  }
  return true;
}

// Whether any candidate of `bits` ([lo, end)) is a written row, else their common kind and row;
// computed once per bits.
const ValueDecoder::Unwritten& ValueDecoder::unwritten(uint32_t bits, It lo, It end) {
  const auto found = unwritten_.find(bits);
  if (found != unwritten_.end()) return found->second;
  Unwritten u;
  for (It it = lo; it != end; ++it) {
    const auto row = static_cast<int64_t>(it->second % static_cast<uint64_t>(c_.num_input_rows));
    const ValueSource k = row_kind(row);
    if (k == ValueSource::request) {
      u.any_written = true;
      break;
    }
    if (it == lo) {
      u.kind = k;
      u.row = row;
    } else {
      if (k != u.kind) u.kind = ValueSource::unwritten_rows;
      if (row != u.row) u.row = -1;
    }
  }
  return unwritten_.emplace(bits, u).first->second;
}

const char* canary_name(golden::Canary t) {
  using golden::Canary;
  switch (t) {
    case Canary::cache_gap: return "the stride-gap canary";
    case Canary::free_block: return "the free-block canary";
    case Canary::block_tail: return "the block-tail canary";
    case Canary::guard: return "the guard pattern";
    case Canary::input_gap: return "the input-gap canary";
    case Canary::padding_row: return "the padding-row canary";
    case Canary::invalid_row: return "the invalid-row canary";
    case Canary::graph_row: return "the graph-padding-row canary";
  }
  return "a canary";
}

std::string hex_bits(uint64_t bits, int bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int i = 2 * bytes - 1; i >= 0; --i) s += digits[(bits >> (4 * i)) & 0xF];
  return s;
}

}  // namespace kvf
