// arena.cpp — layout, allocation and initial fill of the guarded image; cache cell location.
//
// See arena.h for the image layout. Everything here is plain host code; the fill is the only place
// that decides which pre-run pattern each byte holds, and classify.cpp classifies differences against
// the same CacheLocator roles, so the two cannot disagree about what a cell is.
#include "arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "windows.h"
#include "case/context_parallel.h"
#include "case/csr.h"
#include "case/placement.h"
#include "case/window.h"
#include "values/payload.h"

namespace kvf {

namespace {

constexpr int64_t kAlign = 256;  // section alignment (cudaMalloc's guarantee)

// Checked 64-bit arithmetic: sizes come from user-supplied cases.
int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw std::length_error(std::string("arena: ") + what + " overflows 64 bits");
  return r;
}
int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw std::length_error(std::string("arena: ") + what + " overflows 64 bits");
  return r;
}
int64_t round_up(int64_t x, int64_t to, const char* what) { return checked_add(x, (to - x % to) % to, what); }

int64_t require_non_negative(int64_t x, const char* what) {
  if (x < 0) throw std::invalid_argument(std::string("arena: negative ") + what);
  return x;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Layout

ArenaLayout plan_arena(const Case& c) {
  const int64_t in_size = dtype_size(c.input_dtype);
  const int64_t cache_size = dtype_size(c.cache_dtype);
  const int64_t slot_size = index_type_size(c.slot_dtype);

  ArenaLayout l;
  // One block's span, clamped: an off-by-one-block write from either end of the cache lands in a
  // guard band, and tiny or huge blocks still get a sensible band.
  const int64_t block_span = checked_mul(std::max<int64_t>(c.cache.stride_block, 0), cache_size, "block span");
  l.guard_bytes = round_up(std::clamp<int64_t>(block_span, 4096, int64_t{1} << 20), kAlign, "guard band");

  l.input_bytes = checked_mul(require_non_negative(c.input_buffer_elems, "input_buffer_elems"), in_size, "input buffer");
  // slot_mapping, or (CSR addressing) the CSR arrays the kernel reads instead (case/csr.h), or (a
  // ring with window input positions) slot_mapping, then each row's position and its request's
  // length (case/window.h), all int32.
  // A sharded case: its int32 slot mappings and positions (case/context_parallel.h, CpSection).
  l.slots_bytes = c.addressing == Addressing::csr ? checked_mul(csr_arrays(c).size(), 4, "CSR arrays")
                  : c.has_cp()                    ? checked_mul(cp_section(c).size, 4, "slot mappings and positions")
                  : c.window_input == WindowInput::positions ? checked_mul(c.num_slots(), 3 * 4, "slot_mapping and window rows")
                                                             : checked_mul(c.num_slots(), slot_size, "slot_mapping");
  l.cache_bytes = checked_mul(require_non_negative(c.cache_buffer_elems, "cache_buffer_elems"), cache_size, "cache buffer");
  const int64_t scale_count = static_scale_count(c.scale_kind, c.num_heads, c.cache.num_blocks);
  l.scales_bytes = checked_mul(checked_mul(require_non_negative(scale_count, "static scale count"), c.num_fields(), "static scales"), 4,
                               "static scales");
  l.scale_cache_bytes = checked_mul(require_non_negative(c.scale_cache_elems, "scale_cache_elems"), c.scale_cache_elem_size(), "scale cache buffer");
  constexpr int64_t counter_bytes = sizeof(unsigned long long);

  // Each section starts at the next 256-byte boundary after the previous section's end plus a guard
  // band; the alignment slack belongs to the guard.
  auto next_begin = [&](int64_t prev_end) { return checked_add(round_up(prev_end, kAlign, "layout"), l.guard_bytes, "layout"); };
  l.input_begin = next_begin(0);
  l.slots_begin = next_begin(checked_add(l.input_begin, l.input_bytes, "layout"));
  l.scales_begin = next_begin(checked_add(l.slots_begin, l.slots_bytes, "layout"));
  l.cache_begin = next_begin(checked_add(l.scales_begin, l.scales_bytes, "layout"));
  l.scale_cache_begin = next_begin(checked_add(l.cache_begin, l.cache_bytes, "layout"));
  l.counter_begin = next_begin(checked_add(l.scale_cache_begin, l.scale_cache_bytes, "layout"));
  l.total_bytes = next_begin(checked_add(l.counter_begin, counter_bytes, "layout"));
  return l;
}

// ---------------------------------------------------------------------------------------------
// Storage

void Arena::Free::operator()(std::byte* p) const {
  if (mapped > 0) {
    munmap(p, mapped);
  } else {
    std::free(p);
  }
}

namespace {

// 256-byte aligned storage of `bytes` (a multiple of 256 by construction of the layout).
std::byte* allocate_image(int64_t bytes) {
  const auto size = static_cast<size_t>(std::max<int64_t>(round_up(bytes, kAlign, "image"), kAlign));
  void* p = std::aligned_alloc(static_cast<size_t>(kAlign), size);
  if (p == nullptr) throw std::bad_alloc();
  return static_cast<std::byte*>(p);
}

// Address space for a windowed image: reads as zeros, and only the pages written (the materialised
// ranges) take memory. Huge pages are refused so that a 4 KiB window costs 4 KiB.
std::byte* map_image(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  madvise(p, bytes, MADV_NOHUGEPAGE);
  return static_cast<std::byte*>(p);
}

}  // namespace

void Arena::allocate() {
  if (!windowed_) {
    data_ = std::unique_ptr<std::byte[], Free>(allocate_image(layout_.total_bytes), Free{});
    return;
  }
  const auto bytes = static_cast<size_t>(std::max<int64_t>(round_up(layout_.total_bytes, kWindowPage, "image"), kWindowPage));
  data_ = std::unique_ptr<std::byte[], Free>(map_image(bytes), Free{bytes});
}

void Arena::copy_from(const Arena& other) {
  for (const ByteRange& r : materialized_)
    std::memcpy(data_.get() + r.begin, other.data_.get() + r.begin, static_cast<size_t>(r.size()));
}

Arena::Arena(const ArenaLayout& layout) : layout_(layout), materialized_{{0, layout.total_bytes}} { allocate(); }

Arena::Arena(const ArenaLayout& layout, std::vector<ByteRange> materialized)
    : layout_(layout), windowed_(true), materialized_(std::move(materialized)) {
  for (const ByteRange& r : materialized_)
    if (r.begin < 0 || r.end < r.begin || r.end > layout_.total_bytes)
      throw std::invalid_argument("arena: a materialised range lies outside the image");
  allocate();
}

Arena::Arena(const Arena& other) : layout_(other.layout_), windowed_(other.windowed_), materialized_(other.materialized_) {
  allocate();
  copy_from(other);
}

Arena Arena::shaped_like(const Arena& other) {
  return other.windowed_ ? Arena(other.layout_, other.materialized_) : Arena(other.layout_);
}

Arena& Arena::operator=(const Arena& other) {
  if (this == &other) return *this;
  if (data_ == nullptr || windowed_ || other.windowed_ || layout_.total_bytes != other.layout_.total_bytes) {
    layout_ = other.layout_;
    windowed_ = other.windowed_;
    allocate();
  }
  layout_ = other.layout_;
  materialized_ = other.materialized_;
  copy_from(other);
  return *this;
}

unsigned long long Arena::counter_value() const {
  unsigned long long v;
  std::memcpy(&v, data() + layout_.counter_begin, sizeof v);
  return v;
}

uint64_t load_elem(const std::byte* base, int64_t index, int size) {
  const std::byte* p = base + index * size;
  switch (size) {
    case 2: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case 8: { uint64_t v; std::memcpy(&v, p, 8); return v; }
    default: { uint8_t v; std::memcpy(&v, p, 1); return v; }
  }
}

void store_elem(std::byte* base, int64_t index, int size, uint64_t bits) {
  std::byte* p = base + index * size;
  switch (size) {
    case 2: { const auto v = static_cast<uint16_t>(bits); std::memcpy(p, &v, 2); return; }
    case 4: { const auto v = static_cast<uint32_t>(bits); std::memcpy(p, &v, 4); return; }
    case 8: { std::memcpy(p, &bits, 8); return; }
    default: { const auto v = static_cast<uint8_t>(bits); std::memcpy(p, &v, 1); return; }
  }
}

uint32_t load_field_elem(const std::byte* buffer, DType t, int64_t elem) {
  if (dtype_bits(t) != 4) return static_cast<uint32_t>(load_elem(buffer, elem, dtype_size(t)));
  const auto byte = static_cast<uint32_t>(load_elem(buffer, elem / 2, 1));
  return elem % 2 == 0 ? byte & 0xFu : byte >> 4;
}

void store_field_elem(std::byte* buffer, DType t, int64_t elem, uint32_t bits) {
  if (dtype_bits(t) != 4) return store_elem(buffer, elem, dtype_size(t), bits);
  const auto byte = static_cast<uint32_t>(load_elem(buffer, elem / 2, 1));
  const uint32_t updated = elem % 2 == 0 ? (byte & 0xF0u) | (bits & 0xFu) : (byte & 0x0Fu) | ((bits & 0xFu) << 4);
  store_elem(buffer, elem / 2, 1, updated);
}

// ---------------------------------------------------------------------------------------------
// Cache cell location

CacheLocator::CacheLocator(const Case& c)
    : CacheLocator(c.has_format() ? CacheLocator(c, FieldBuffer::cache)
                                  : CacheLocator(c, c.cache, c.has_value() ? CacheShape(c.cache, c.cache_field(false), c.cache_field(true))
                                                                           : CacheShape(c.cache, c.cache_field(false)))) {}

CacheLocator CacheLocator::scale_cache(const Case& c) {
  if (c.has_format()) return CacheLocator(c, FieldBuffer::scale_cache);
  if (!c.has_value()) return CacheLocator(c, c.scale_cache, CacheShape(c.scale_cache, geometry_layout(c.scale_cache, c.scale_k_offset, c.num_heads, 1)));
  return CacheLocator(c, c.scale_cache, CacheShape(c.scale_cache, c.scale_k_offset, c.scale_v_offset, c.num_heads, 1));
}

CacheLocator::CacheLocator(const Case& c, FieldBuffer buffer) : c_(c), shared_(shared_blocks(c)) {
  const CacheFields fields = c.fields();
  for (int i = 0; i < fields.count; ++i) {
    const CacheField& f = fields.field[i];
    if (f.buffer != buffer) continue;
    typed_.push_back(TypedField{i, dtype_bits(f.dtype), f.index == 1, FieldShape(f.layout)});
  }
  shape_.g = c.cache;  // blocks and block size: every field's (num_blocks, block_size) are the cache's
  own_blocks(c.cache);
}

CacheLocator::CacheLocator(const Case& c, const CacheGeometry& g, const CacheShape& shape) : c_(c), shape_(shape), shared_(shared_blocks(c)) {
  own_blocks(g);
}

void CacheLocator::own_blocks(const CacheGeometry& g) {
  const Case& c = c_;
  owners_.assign(static_cast<size_t>(std::max<int64_t>(g.num_blocks, 0)), Owner{});
  const int64_t shard_blocks = std::max<int64_t>(c.shard_blocks(), 1);
  for (size_t r = 0; r < c.requests.size(); ++r) {
    const Request& q = c.requests[r];
    for (size_t li = 0; li < q.blocks.size(); ++li) {
      // Every shard holds the request's block (context_parallel.h: one table for all ranks).
      for (int64_t b = q.blocks[li], shard = 0; b >= 0 && shard < c.num_ranks(); ++shard, b += shard_blocks) {
        if (b >= g.num_blocks || (shard == 0 && b >= shard_blocks)) break;
        Owner& o = owners_[static_cast<size_t>(b)];
        if (o.request < 0) o = Owner{static_cast<int64_t>(r), static_cast<int64_t>(li)};  // a shared block's first owner
      }
    }
    positions_.emplace_back(consecutive_positions(q) ? std::vector<int64_t>{} : q.positions);
    std::sort(positions_.back().begin(), positions_.back().end());
    extent_.push_back(written_extent(q));
  }
}

CacheCell CacheLocator::cell(bool is_value, int64_t block, int64_t pos, int64_t head, int64_t dim) const {
  CacheCell cell;
  cell.is_value = is_value;
  cell.block = block;
  cell.pos = pos;
  cell.head = head;
  cell.dim = dim;
  if (c_.has_cp()) cell.rank = block / std::max<int64_t>(c_.shard_blocks(), 1);
  if (c_.is_sink(block, pos)) {
    cell.role = CacheCell::Role::sink;
    return cell;
  }
  const Owner o = owner(block);
  if (o.request < 0) {
    cell.role = CacheCell::Role::free_block;
    return cell;
  }
  const Request& r = c_.requests[static_cast<size_t>(o.request)];
  cell.request = o.request;
  cell.token = o.logical * shape_.g.block_size + pos;
  if (c_.has_cp()) cell.token = shards_of(c_).global(cell.rank, cell.token);  // shard `rank`'s local position
  if (c_.has_window()) {
    // A ring (window.h): the cell is ring index `token`; it holds the latest position that maps to it
    // and stays in the window, written by this call if that position is one of its tokens.
    const Window w = window_of(c_);
    const int64_t held = w.held(cell.token, r.context_len + r.new_len);
    cell.role = held < 0 ? CacheCell::Role::tail : held >= r.context_len ? CacheCell::Role::new_token : CacheCell::Role::context;
    if (held >= 0) cell.token = held;
    return cell;
  }
  const auto& explicit_positions = positions_[static_cast<size_t>(o.request)];
  if (cell.token < r.context_len) {
    cell.role = CacheCell::Role::context;
    cell.shared = !shared_.empty() && shared_.count(block) != 0;
  } else if (explicit_positions.empty() ? cell.token < r.context_len + r.new_len
                                        : std::binary_search(explicit_positions.begin(), explicit_positions.end(), cell.token)) {
    cell.role = CacheCell::Role::new_token;
  } else if (cell.token < extent_[static_cast<size_t>(o.request)]) {
    cell.role = CacheCell::Role::hole;
  } else {
    cell.role = CacheCell::Role::tail;
  }
  return cell;
}

CacheCell CacheLocator::locate(int64_t elem) const {
  if (!typed_.empty()) {
    CacheCell cells[2];
    return locate_byte(elem, cells) > 0 ? cells[0] : CacheCell{};
  }
  const CellIndex i = shape_.locate(elem);
  if (!i.is_cell) return CacheCell{};
  return cell(i.is_value, i.block, i.pos, i.head, i.dim);
}

int CacheLocator::locate_byte(int64_t byte, CacheCell (&out)[2]) const {
  int n = 0;
  for (const TypedField& t : typed_) {
    // The field's elements that hold the byte: two nibbles, one byte, or the word around it.
    const int64_t first = t.bits == 4 ? 2 * byte : byte / (t.bits / 8);
    const int64_t count = t.bits == 4 ? 2 : 1;
    for (int64_t e = first; e < first + count && n < 2; ++e) {
      const FieldCoord x = t.shape.locate(e);
      if (!x.found) continue;
      CacheCell cl = cell(t.is_value, x.block, x.pos, x.head, x.dim);
      cl.field = t.field;
      cl.elem = e;
      out[n++] = cl;
    }
    if (n > 0) return n;  // fields are disjoint (validate.h): no other field holds the byte
  }
  return n;
}

CacheCell locate_cache_elem(const Case& c, int64_t elem) { return CacheLocator(c).locate(elem); }

void reset_sink(const Case& c, const Arena& initial, Arena& a) {
  if (c.padding != PaddingMode::sink || c.capacity() < 1) return;
  const int size = dtype_size(c.cache_dtype);
  for (const CacheField& f : c.fields())
    for (int64_t h = 0; h < f.num_heads; ++h)
      for (int64_t d = 0; d < f.head_dim; ++d) {
        const int64_t e = field_offset(f.layout, 0, 0, h, d);
        store_elem(a.cache(), e, size, load_elem(initial.cache(), e, size));
      }
  if (c.scale_kind != ScaleKind::per_token_head) return;
  for (const CacheField& f : c.fields()) {
    const int64_t base = f.index == 1 ? c.scale_v_offset : c.scale_k_offset;
    for (int64_t h = 0; h < f.num_heads; ++h) {
      const int64_t e = base + cache_elem_offset(c.scale_cache, 0, 0, h, 0);
      store_elem(a.scale_cache(), e, 4, load_elem(initial.scale_cache(), e, 4));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Initial fill

namespace {

// `count` elements of `size` bytes (1, 2 or 4) from `begin`, every one holding `bits`: a pattern fill.
void fill_elems(std::byte* begin, int64_t count, int size, uint32_t bits) {
  if (count <= 0) return;
  if (size == 1) {
    std::memset(begin, static_cast<int>(bits & 0xFFu), static_cast<size_t>(count));
    return;
  }
  store_elem(begin, 0, size, bits);  // then the filled prefix doubles until it covers the range
  const int64_t bytes = count * size;
  for (int64_t done = size; done < bytes;) {
    const int64_t n = std::min(done, bytes - done);
    std::memcpy(begin + done, begin, static_cast<size_t>(n));
    done += n;
  }
}

// row[i] at elements first + i * step of a buffer of T, i in [0, count).
template <typename T>
void store_strided(std::byte* buffer, int64_t first, int64_t step, int64_t count, const uint32_t* row) {
  for (int64_t i = 0; i < count; ++i) {
    const auto v = static_cast<T>(row[i]);
    std::memcpy(buffer + (first + i * step) * static_cast<int64_t>(sizeof(T)), &v, sizeof v);
  }
}

// Stores row[d] at cell (b, p, h, d) of `field` for every dim d. Where the dim mode is one stride
// of whole elements (every layout but vLLM's x-packed key, and every dtype but the 4-bit ones), the
// row's first offset comes from field_offset() and the others step along that stride, which is
// what field_offset() gives them; otherwise field_offset() and store_field_elem() per element.
void store_row(std::byte* buffer, const CacheField& field, int64_t b, int64_t p, int64_t h, const uint32_t* row) {
  const Mode& dim = field.layout.mode[static_cast<int>(Axis::dim)];
  const int bits = dtype_bits(field.dtype);
  if (dim.rank != 1 || bits == 4) {
    for (int64_t d = 0; d < field.head_dim; ++d) store_field_elem(buffer, field.dtype, field_offset(field.layout, b, p, h, d), row[d]);
    return;
  }
  const int64_t first = field_offset(field.layout, b, p, h, 0), step = dim.stride[0];
  switch (bits) {
    case 32: return store_strided<uint32_t>(buffer, first, step, field.head_dim, row);
    case 16: return store_strided<uint16_t>(buffer, first, step, field.head_dim, row);
    default: return store_strided<uint8_t>(buffer, first, step, field.head_dim, row);
  }
}

// Cells (tensor, b, pos, head, dim) of block `b` of the KV cache by their role: context cells hold
// earlier tokens, free blocks the free-block canary, new-token cells and block tails the tail canary.
void fill_block(const Case& c, const CacheLocator& loc, Arena& a, int64_t b) {
  using golden::Canary;
  std::vector<uint32_t> row, free_row, tail_row;  // [head_dim] values of one (pos, head) of a field
  for (const CacheField& field : c.fields()) {
    const bool is_value = field.index == 1;
    std::byte* buffer = field_buffer(a, field);
    const auto dims = static_cast<size_t>(field.head_dim);
    row.resize(dims);
    free_row.assign(dims, golden::canary_bits(field.dtype, Canary::free_block));
    tail_row.assign(dims, golden::canary_bits(field.dtype, Canary::block_tail));
    for (int64_t p = 0; p < c.cache.block_size; ++p) {
      const CacheCell role = loc.cell(is_value, b, p, 0, 0);
      for (int64_t h = 0; h < field.num_heads; ++h) {
        switch (role.role) {
          case CacheCell::Role::context:
            golden::context_field_row_bits(c, field, role.request, role.token, h, row.data());
            store_row(buffer, field, b, p, h, row.data());
            break;
          case CacheCell::Role::free_block:
          case CacheCell::Role::sink: store_row(buffer, field, b, p, h, free_row.data()); break;  // no owner
          default: store_row(buffer, field, b, p, h, tail_row.data()); break;  // new-token cells (not yet written), holes and block tails
        }
      }
    }
  }
}

// Every section but the KV cache buffer: guard bands (0xFF, and zeros after slot_mapping), input
// buffer, slot_mapping, static scales, scale cache, counter. The cache buffer is left to the caller.
void fill_all_but_cache(const Case& c, Arena& a) {
  using golden::Canary;
  using golden::Tensor;
  const ArenaLayout& l = a.layout();
  for (const ByteRange& r : a.materialized())  // guard bands (and everything, to start)
    std::memset(a.data() + r.begin, 0xFF, static_cast<size_t>(r.size()));

  // Input buffer: input-gap canary everywhere, then each field's source views row by row. An
  // element holds the payload of the entry dim it supplies (an MLA k_pe dim d: entry dim D_c + d).
  const int in_size = dtype_size(c.input_dtype);
  fill_elems(a.input(), c.input_buffer_elems, in_size, golden::canary_bits(c.input_dtype, Canary::input_gap));
  std::vector<uint32_t> values;  // [width] one (row, head) of a view
  for (const CacheField& field : c.fields()) {
    const Tensor t = field.index == 1 ? Tensor::value : Tensor::key;
    int64_t first = 0;
    for (int part = 0; part < field.num_parts; ++part) {
      const CacheField::Part& src = field.parts[part];
      const InputView& v = src.view;
      values.resize(static_cast<size_t>(src.width));
      for (int64_t row = 0; row < c.num_input_rows; ++row) {
        for (int64_t h = 0; h < field.num_heads; ++h) {
          golden::input_row_bits(c, t, row, h, first, src.width, values.data());
          const int64_t e = v.offset + input_elem_offset(v.stride_token, v.stride_head, row, h, 0);  // dims are contiguous
          for (int64_t d = 0; d < src.width; ++d) store_elem(a.input(), e + d, in_size, values[static_cast<size_t>(d)]);
        }
      }
      first += src.width;
    }
  }

  // slot_mapping, narrowed to its dtype (validation guarantees the values fit); or the CSR arrays;
  // or a sharded case's section (context_parallel.h): with input slot_mapping the ranks' slot
  // mappings, which the producer writes (the cp_mapping canary until then), and the producer's
  // inputs; with input positions slot_mapping and the rows' positions.
  const int slot_size = index_type_size(c.slot_dtype);
  if (c.addressing == Addressing::csr) {
    const std::vector<int32_t> csr = csr_arrays(c).packed();
    for (size_t i = 0; i < csr.size(); ++i) store_elem(a.slots(), static_cast<int64_t>(i), 4, static_cast<uint32_t>(csr[i]));
  }
  if (c.has_cp()) {
    const CpSection s = cp_section(c);
    const CpRows rows = cp_rows(c);
    const int64_t T = c.num_slots();
    auto put = [&](int64_t at, int32_t v) { store_elem(a.slots(), at, 4, static_cast<uint32_t>(v)); };
    if (c.cp_input == CpInput::slot_mapping) {
      for (int64_t i = 0; i < c.cp_world_size * T; ++i) put(s.rank_mappings + i, static_cast<int32_t>(kCpMappingCanary));
      for (int64_t i = 0; i < T; ++i) put(s.requests + i, rows.request[static_cast<size_t>(i)]);
      const CpTables tables = cp_tables(c);
      for (size_t i = 0; i < tables.blocks.size(); ++i) put(s.tables + static_cast<int64_t>(i), tables.blocks[i]);
    } else {
      for (int64_t i = 0; i < T; ++i) put(i, static_cast<int32_t>(c.slot_mapping[static_cast<size_t>(i)]));
    }
    for (int64_t i = 0; i < T; ++i) put(s.positions + i, rows.position[static_cast<size_t>(i)]);
  }
  for (int64_t i = 0; i < c.num_slots() && c.addressing != Addressing::csr && !c.has_cp(); ++i) {
    const int64_t s = c.slot_mapping[static_cast<size_t>(i)];
    const uint64_t bits = slot_size == 4 ? static_cast<uint32_t>(static_cast<int32_t>(s)) : static_cast<uint64_t>(s);
    store_elem(a.slots(), i, slot_size, bits);
  }
  if (c.window_input == WindowInput::positions) {
    const WindowRows rows = window_rows(c);
    for (int64_t i = 0; i < c.num_slots(); ++i) {
      store_elem(a.slots(), c.num_slots() + i, 4, static_cast<uint32_t>(rows.position[static_cast<size_t>(i)]));
      store_elem(a.slots(), 2 * c.num_slots() + i, 4, static_cast<uint32_t>(rows.seq_len[static_cast<size_t>(i)]));
    }
  }
  // The guard band right after slot_mapping reads as slot 0 (zero bytes) instead of -1 (0xFF): a
  // kernel that reads slot_mapping past its end (grid sized by key rows, bug B8) then writes a
  // CUDA-graph padding row into slot 0, which the diff sees, instead of silently skipping it.
  const int64_t slots_end = l.slots_begin + l.slots_bytes;
  std::memset(a.data() + slots_end, 0x00, static_cast<size_t>((l.scales_begin - slots_end) / 2));

  // Static scales: K's then V's, from the case's scale distribution.
  const int64_t scale_count = static_scale_count(c.scale_kind, c.num_heads, c.cache.num_blocks);
  for (int64_t i = 0; i < scale_count; ++i) {
    store_elem(a.scales(), i, 4, golden::scale_bits(c, Tensor::key, i));
    if (c.has_value()) store_elem(a.scales(), scale_count + i, 4, golden::scale_bits(c, Tensor::value, i));
  }

  // Scale cache buffer (per_token_head): fp32 gap canary everywhere, then every (tensor, block, pos,
  // head) cell by the role of its KV cache cell: context cells hold earlier tokens' scales,
  // new-token cells and block tails the tail canary, free blocks the free-block canary.
  // A quantised format's scale cache: the byte gap canary everywhere (its fields: make_initial_arena).
  const uint32_t scale_gap = golden::canary_bits(DType::f32, Canary::cache_gap);
  const uint32_t scale_free = golden::canary_bits(DType::f32, Canary::free_block);
  const uint32_t scale_tail = golden::canary_bits(DType::f32, Canary::block_tail);
  if (c.has_format()) {
    std::memset(a.scale_cache(), static_cast<int>(golden::canary_bits(DType::uint8, Canary::cache_gap)), static_cast<size_t>(l.scale_cache_bytes));
  } else {
    fill_elems(a.scale_cache(), c.scale_cache_elems, 4, scale_gap);
  }
  if (c.scale_kind == ScaleKind::per_token_head) {
    const CacheLocator scale_loc = CacheLocator::scale_cache(c);
    for (const CacheField& field : c.fields()) {
      const bool is_value = field.index == 1;
      const Tensor t = is_value ? Tensor::value : Tensor::key;
      const int64_t base = is_value ? c.scale_v_offset : c.scale_k_offset;
      for (int64_t b = 0; b < c.scale_cache.num_blocks; ++b) {
        for (int64_t p = 0; p < c.scale_cache.block_size; ++p) {
          const CacheCell role = scale_loc.cell(is_value, b, p, 0, 0);
          for (int64_t h = 0; h < c.num_heads; ++h) {
            uint32_t bits;
            switch (role.role) {
              case CacheCell::Role::context: bits = golden::context_scale_bits(c, t, role.request, role.token, h); break;
              case CacheCell::Role::free_block:
              case CacheCell::Role::sink: bits = scale_free; break;  // no owner
              default: bits = scale_tail; break;  // new-token cells (not yet written), holes and block tails
            }
            store_elem(a.scale_cache(), base + cache_elem_offset(c.scale_cache, b, p, h, 0), 4, bits);
          }
        }
      }
    }
  }

  // The invalid-slot counter starts at zero.
  const unsigned long long zero = 0;
  std::memcpy(a.data() + l.counter_begin, &zero, sizeof zero);
}

}  // namespace

Arena make_initial_arena(const Case& c) {
  Arena a(plan_arena(c));
  fill_all_but_cache(c, a);
  // Cache buffer: gap canary everywhere, then every (tensor, block, pos, head, dim) cell by role.
  // A quantised format's cache buffer holds bytes of several fields: the byte gap canary.
  const DType unit = c.has_format() ? DType::uint8 : c.cache_dtype;
  const int cache_size = dtype_size(unit);
  const uint32_t gap = golden::canary_bits(unit, golden::Canary::cache_gap);
  fill_elems(a.cache(), c.cache_buffer_elems, cache_size, gap);
  const CacheLocator loc(c);  // roles by (block, pos): the same in every buffer
  for (int64_t b = 0; b < c.cache.num_blocks; ++b) fill_block(c, loc, a, b);
  return a;
}

Arena make_initial_arena(const Case& c, const WindowPlan& plan) {
  Arena a(plan_arena(c), plan.ranges);
  fill_all_but_cache(c, a);
  // Cache windows, as the dense arena has them: the gap canary on stride gaps, the free-block canary
  // on cells, then the cells of every owned block (all inside windows) by role.
  const ArenaLayout& l = a.layout();
  const int cache_size = dtype_size(c.cache_dtype);
  const uint32_t gap = golden::canary_bits(c.cache_dtype, golden::Canary::cache_gap);
  const uint32_t free_block = golden::canary_bits(c.cache_dtype, golden::Canary::free_block);
  const CacheLocator loc(c);
  for (const ElemRange& w : cache_windows(plan, l))
    for (int64_t e = w.begin; e < w.end; ++e) store_elem(a.cache(), e, cache_size, loc.shape().locate(e).is_cell ? free_block : gap);
  for (int64_t shard = 0; shard < c.cache.num_blocks; shard += c.shard_blocks())  // each rank's copy of the tables
    for (const Request& r : c.requests)
      for (const int64_t b : r.blocks)
        if (b >= 0 && shard + b < c.cache.num_blocks) fill_block(c, loc, a, shard + b);
  return a;
}

}  // namespace kvf
