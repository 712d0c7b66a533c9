// Binding a file's tensors to a model's weights, with validation: every tensor the
// architecture expects must be present, of a type moetier computes with, and of the
// expected shape. Errors name the tensor.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "core/status.h"
#include "cpu/matmul.h"
#include "gguf/model_file.h"
#include "model/arch.h"

namespace moetier {

class WeightBinder {
 public:
  // `converted` receives f32 copies of small tensors stored in another type (it must
  // outlive the pointers f32() returns; a deque keeps them stable).
  WeightBinder(const gguf::ModelFile& file, const std::vector<TensorSpec>& specs,
               std::deque<std::vector<float>>& converted)
      : file_(file), specs_(specs), converted_(converted) {}

  // A matrix (2-D) or stack of matrices (3-D expert tensor) by name.
  cpu::WeightMatrix matrix(const std::string& name);
  // A 1-D (or small) tensor as f32 (norm weights, biases, ssm_a, conv taps); tensors of
  // other types are dequantized once at load.
  const float* f32(const std::string& name);
  // The same for a tensor the file may lack (TensorSpec::optional): nullptr when absent.
  const float* f32_optional(const std::string& name) {
    return file_.header().find_tensor(name) ? f32(name) : nullptr;
  }

  // The first error met while binding (missing tensor, wrong shape, unsupported type).
  const Status& status() const { return status_; }

 private:
  const gguf::TensorInfo* lookup(const std::string& name);
  const gguf::ModelFile& file_;
  const std::vector<TensorSpec>& specs_;
  std::deque<std::vector<float>>& converted_;
  Status status_;
};

}  // namespace moetier
