// Owners of GPU memory (DeviceBuffer) and of page-locked host memory
// (PinnedBuffer), the RAII types behind every allocation of the GPU backend
// except the DeviceTensors it hands out (those free through their deleter,
// which does the same as ~DeviceBuffer).
//
// Every cudaMalloc and cudaMallocHost of the backend goes through
// DeviceMalloc / PinnedBuffer::Allocate, which count them for the tests of
// "a step allocates nothing" (Allocations).
//
// Thread-safety: an owner is used by one thread at a time; Allocations and
// DeviceMalloc may be called from any thread.
#ifndef PSGD_WORKER_GPU_DEVICE_MEMORY_H_
#define PSGD_WORKER_GPU_DEVICE_MEMORY_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/statusor.h"

namespace psgd::gpu {

// cudaMalloc of `bytes`, counted. On failure the CUDA error is
// cleared (not sticky) and the status names the call and the bytes.
absl::Status DeviceMalloc(void** data, size_t bytes);

// How many device and pinned host allocations this process has made.
int64_t Allocations();

// Frees device memory that work on `stream` may still use: waits for the
// stream, then cudaFree. Errors are dropped (this runs in destructors).
void FreeDeviceMemory(void* data, cudaStream_t stream);

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // `bytes` of uninitialised memory on the current device (cudaMalloc).
  // `stream` is the stream whose work uses it: destruction waits for it.
  // RESOURCE_EXHAUSTED when the device is out of memory. Zero bytes give an
  // empty buffer.
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes,
                                               cudaStream_t stream);
  ~DeviceBuffer() { Reset(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return size_; }

 private:
  void Reset();

  void* data_ = nullptr;
  size_t size_ = 0;
  cudaStream_t stream_ = nullptr;
};

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  // `bytes` of page-locked host memory (cudaMallocHost), so that copies
  // from and to it run asynchronously. RESOURCE_EXHAUSTED on failure.
  static absl::StatusOr<PinnedBuffer> Allocate(size_t bytes);
  ~PinnedBuffer() { Reset(); }
  PinnedBuffer(PinnedBuffer&& other) noexcept { *this = std::move(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return size_; }

 private:
  void Reset();

  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_DEVICE_MEMORY_H_
