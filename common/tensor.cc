#include "common/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psgd {

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::Status ValidateShape(const Shape& shape) {
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeToString(shape),
                       " has a dimension that is not positive"));
    }
    if (n > kMaxElements / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeToString(shape), " is too large"));
    }
    n *= d;
  }
  return absl::OkStatus();
}

AlignedBuffer::AlignedBuffer(size_t size, NoZeroing) : size_(size) {
  if (size == 0) return;
  // aligned_alloc wants a multiple of the alignment.
  size_t bytes =
      (size * sizeof(float) + kAlignment - 1) / kAlignment * kAlignment;
  data_ = static_cast<float*>(std::aligned_alloc(kAlignment, bytes));
  if (data_ == nullptr) throw std::bad_alloc();
}

AlignedBuffer::AlignedBuffer(size_t size) : AlignedBuffer(size, NoZeroing{}) {
  if (data_ != nullptr) std::memset(data_, 0, size_ * sizeof(float));
}

AlignedBuffer AlignedBuffer::Uninitialized(size_t size) {
  return AlignedBuffer(size, NoZeroing{});
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

Tensor::Tensor(Shape shape)
    : shape_(std::move(shape)),
      buffer_(static_cast<size_t>(NumElements(shape_))) {}

absl::StatusOr<Tensor> Tensor::FromVector(Shape shape,
                                          const std::vector<float>& values) {
  if (absl::Status s = ValidateShape(shape); !s.ok()) return s;
  if (NumElements(shape) != static_cast<int64_t>(values.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shape ", ShapeToString(shape), " has ", NumElements(shape),
        " elements but ", values.size(), " values were given"));
  }
  Tensor t(std::move(shape));
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

Tensor Tensor::Clone() const {
  Tensor t(shape_);
  if (size() > 0) std::memcpy(t.data(), data(), size() * sizeof(float));
  return t;
}

void Tensor::Fill(float value) { std::fill(data(), data() + size(), value); }

}  // namespace psgd
