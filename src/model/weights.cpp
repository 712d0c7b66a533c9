#include "model/weights.h"

#include <fmt/format.h>

#include "cpu/dot.h"
#include "tensor/type_ops.h"

namespace moetier {

namespace {

std::string shape_string(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

const gguf::TensorInfo* WeightBinder::lookup(const std::string& name) {
  if (!status_.is_ok()) return nullptr;
  const TensorSpec* spec = nullptr;
  for (const auto& s : specs_) {
    if (s.name == name) spec = &s;
  }
  const gguf::TensorInfo* t = file_.header().find_tensor(name);
  if (!t) {
    status_ = Status::bad_input(fmt::format("missing tensor '{}'", name));
    return nullptr;
  }
  if (spec) {
    std::vector<int64_t> have(t->ne.begin(), t->ne.begin() + t->n_dims);
    // Trailing 1-dims are not significant in GGUF ({256} == {256, 1}).
    while (have.size() > spec->ne.size() && have.back() == 1) have.pop_back();
    if (have != spec->ne) {
      status_ = Status::bad_input(fmt::format("tensor '{}' has shape {}, expected {}", name, shape_string(have),
                                              shape_string(spec->ne)));
      return nullptr;
    }
  }
  return t;
}

cpu::WeightMatrix WeightBinder::matrix(const std::string& name) {
  const gguf::TensorInfo* t = lookup(name);
  if (!t) return {};
  if (!cpu::activation_type_for(t->type)) {
    status_ = Status::bad_input(
        fmt::format("tensor '{}' has type {}, which moetier cannot compute with yet", name, dtype_name(t->type)));
    return {};
  }
  return cpu::WeightMatrix{.type = t->type,
                           .n_in = t->ne[0],
                           .n_out = t->ne[1],
                           .n_mat = t->ne[2],
                           .row_bytes = dtype_row_bytes(t->type, t->ne[0]),
                           .data = file_.tensor_data(*t),
                           .layout = file_.interleaved(*t) ? cpu::RowLayout::kInterleaved8 : cpu::RowLayout::kRows};
}

const float* WeightBinder::f32(const std::string& name) {
  const gguf::TensorInfo* t = lookup(name);
  if (!t) return nullptr;
  if (t->type == DType::F32) return reinterpret_cast<const float*>(file_.tensor_data(*t));
  const TypeOps* ops = type_ops(t->type);
  if (!ops) {
    status_ = Status::bad_input(
        fmt::format("tensor '{}' has type {}, which moetier cannot convert yet", name, dtype_name(t->type)));
    return nullptr;
  }
  auto& out = converted_.emplace_back(static_cast<size_t>(t->n_elements));
  const int64_t row = t->ne[0];
  const int64_t row_bytes = dtype_row_bytes(t->type, row);
  const uint8_t* src = file_.tensor_data(*t);
  for (int64_t r = 0; r < static_cast<int64_t>(t->n_elements) / row; ++r) {
    ops->dequantize_row(src + r * row_bytes, out.data() + r * row, row);
  }
  return out.data();
}

}  // namespace moetier
