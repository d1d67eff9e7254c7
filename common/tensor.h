// The tensor types shared by the parameter servers and the workers.
//
//   Shape        dimensions, outermost first (NCHW for images).
//   AlignedBuffer  owned float storage, 64-byte aligned, zero-initialised.
//   Tensor       a Shape plus an owned AlignedBuffer. Move-only; Clone()
//                copies explicitly.
//   TensorView / ConstTensorView  a non-owning (pointer, shape) pair for
//                borrowing part or all of a tensor; the owner must outlive it.
//
// Thread-safety: none of these synchronise; distinct objects may be used from
// distinct threads.
#ifndef PSGD_COMMON_TENSOR_H_
#define PSGD_COMMON_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace psgd {

using Shape = std::vector<int64_t>;

// Number of elements of `shape` (1 for a scalar, i.e. an empty shape).
// Requires non-negative dimensions.
int64_t NumElements(const Shape& shape);

// "[2, 3, 4]".
std::string ShapeToString(const Shape& shape);

// OK when every dimension is positive and the element count fits in memory
// terms (below 2^40); INVALID_ARGUMENT naming the shape otherwise.
absl::Status ValidateShape(const Shape& shape);

// Owned, zero-initialised float storage aligned to kAlignment bytes.
class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t size);
  // Storage of `size` floats whose values are whatever the allocator left:
  // for a buffer its first user writes in full (a copy), where zeroing it
  // first would be one more pass over the memory.
  static AlignedBuffer Uninitialized(size_t size);
  ~AlignedBuffer();

  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  float* data() { return data_; }
  const float* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  struct NoZeroing {};
  AlignedBuffer(size_t size, NoZeroing);

  float* data_ = nullptr;
  size_t size_ = 0;
};

class ConstTensorView {
 public:
  ConstTensorView() = default;
  ConstTensorView(const float* data, Shape shape)
      : data_(data), shape_(std::move(shape)) {}

  const float* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t size() const { return NumElements(shape_); }
  absl::Span<const float> span() const {
    return absl::MakeConstSpan(data_, static_cast<size_t>(size()));
  }

 private:
  const float* data_ = nullptr;
  Shape shape_;
};

class TensorView {
 public:
  TensorView() = default;
  TensorView(float* data, Shape shape)
      : data_(data), shape_(std::move(shape)) {}

  float* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t size() const { return NumElements(shape_); }
  absl::Span<float> span() const {
    return absl::MakeSpan(data_, static_cast<size_t>(size()));
  }
  operator ConstTensorView() const { return ConstTensorView(data_, shape_); }

 private:
  float* data_ = nullptr;
  Shape shape_;
};

class Tensor {
 public:
  // An empty tensor: no storage, size() == 0.
  Tensor() = default;
  // Zero-filled tensor. Requires ValidateShape(shape).ok().
  explicit Tensor(Shape shape);

  // A tensor holding `values`; INVALID_ARGUMENT when the shape is invalid or
  // its element count differs from values.size().
  static absl::StatusOr<Tensor> FromVector(Shape shape,
                                           const std::vector<float>& values);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  Tensor Clone() const;

  float* data() { return buffer_.data(); }
  const float* data() const { return buffer_.data(); }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t size() const { return static_cast<int64_t>(buffer_.size()); }

  absl::Span<float> span() { return absl::MakeSpan(data(), buffer_.size()); }
  absl::Span<const float> span() const {
    return absl::MakeConstSpan(data(), buffer_.size());
  }
  TensorView view() { return TensorView(data(), shape_); }
  ConstTensorView view() const { return ConstTensorView(data(), shape_); }

  void Fill(float value);

 private:
  Shape shape_;
  AlignedBuffer buffer_;
};

}  // namespace psgd

#endif  // PSGD_COMMON_TENSOR_H_
