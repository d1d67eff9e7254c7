// Memory that a compute backend owns: host RAM for the CPU backend, GPU memory
// for the CUDA backend. Host code never dereferences these pointers; data
// moves in and out through Backend::CopyToDevice / CopyToHost.
//
//   DeviceTensor      owns an allocation made by a backend, with a shape.
//                     Move-only; frees through the backend's deleter.
//   DeviceView / ConstDeviceView  non-owning (pointer, shape) into backend
//                     memory. Distinct types from TensorView so that host and
//                     backend pointers cannot be mixed up.
//
// Thread-safety: none of these synchronise; distinct objects may be used from
// distinct threads. A DeviceTensor must not outlive the backend that made it.
#ifndef PSGD_WORKER_BACKEND_DEVICE_TENSOR_H_
#define PSGD_WORKER_BACKEND_DEVICE_TENSOR_H_

#include <cstdint>
#include <functional>
#include <utility>

#include "common/tensor.h"

namespace psgd {

class ConstDeviceView {
 public:
  ConstDeviceView() = default;
  ConstDeviceView(const float* data, Shape shape)
      : data_(data), shape_(std::move(shape)) {}

  const float* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t size() const { return NumElements(shape_); }
  // The same memory seen with another shape of equal element count (e.g.
  // (N, C, H, W) as (N, C*H*W)). CHECK-fails on a count mismatch.
  ConstDeviceView Reshaped(Shape shape) const;

 private:
  const float* data_ = nullptr;
  Shape shape_;
};

class DeviceView {
 public:
  DeviceView() = default;
  DeviceView(float* data, Shape shape)
      : data_(data), shape_(std::move(shape)) {}

  float* data() const { return data_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t size() const { return NumElements(shape_); }
  DeviceView Reshaped(Shape shape) const;
  operator ConstDeviceView() const { return ConstDeviceView(data_, shape_); }

 private:
  float* data_ = nullptr;
  Shape shape_;
};

class DeviceTensor {
 public:
  using Deleter = std::function<void(float*)>;

  DeviceTensor() = default;
  // Takes ownership of `data` (an allocation of NumElements(shape) floats);
  // `deleter` frees it.
  DeviceTensor(float* data, Shape shape, Deleter deleter)
      : data_(data), shape_(std::move(shape)), deleter_(std::move(deleter)) {}
  ~DeviceTensor() { Reset(); }

  DeviceTensor(DeviceTensor&& other) noexcept { *this = std::move(other); }
  DeviceTensor& operator=(DeviceTensor&& other) noexcept {
    if (this != &other) {
      Reset();
      data_ = std::exchange(other.data_, nullptr);
      shape_ = std::move(other.shape_);
      deleter_ = std::move(other.deleter_);
    }
    return *this;
  }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  const Shape& shape() const { return shape_; }
  int64_t size() const { return data_ == nullptr ? 0 : NumElements(shape_); }
  DeviceView view() { return DeviceView(data_, shape_); }
  ConstDeviceView view() const { return ConstDeviceView(data_, shape_); }

 private:
  void Reset() {
    if (data_ != nullptr && deleter_) deleter_(data_);
    data_ = nullptr;
  }

  float* data_ = nullptr;
  Shape shape_;
  Deleter deleter_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_BACKEND_DEVICE_TENSOR_H_
