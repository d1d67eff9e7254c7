#include "worker/gpu/device_memory.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/gpu/cuda_status.h"

namespace psgd::gpu {
namespace {
std::atomic<int64_t> allocations{0};
}  // namespace

absl::Status DeviceMalloc(void** data, size_t bytes) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  absl::Status s = CudaStatus(cudaMalloc(data, bytes), "cudaMalloc");
  if (!s.ok()) {
    *data = nullptr;
    (void)cudaGetLastError();  // an allocation failure is not sticky
    return absl::Status(s.code(),
                        absl::StrCat(s.message(), " (", bytes, " bytes)"));
  }
  return absl::OkStatus();
}

int64_t Allocations() { return allocations.load(std::memory_order_relaxed); }

void FreeDeviceMemory(void* data, cudaStream_t stream) {
  if (data == nullptr) return;
  (void)cudaStreamSynchronize(stream);
  (void)cudaFree(data);
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes,
                                                    cudaStream_t stream) {
  DeviceBuffer buffer;
  buffer.stream_ = stream;
  if (bytes == 0) return buffer;
  RETURN_IF_ERROR(DeviceMalloc(&buffer.data_, bytes));
  buffer.size_ = bytes;
  return buffer;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    stream_ = other.stream_;
  }
  return *this;
}

void DeviceBuffer::Reset() {
  FreeDeviceMemory(data_, stream_);
  data_ = nullptr;
  size_ = 0;
}

absl::StatusOr<PinnedBuffer> PinnedBuffer::Allocate(size_t bytes) {
  PinnedBuffer buffer;
  if (bytes == 0) return buffer;
  allocations.fetch_add(1, std::memory_order_relaxed);
  absl::Status s =
      CudaStatus(cudaMallocHost(&buffer.data_, bytes), "cudaMallocHost");
  if (!s.ok()) {
    buffer.data_ = nullptr;
    (void)cudaGetLastError();
    return absl::ResourceExhaustedError(
        absl::StrCat(s.message(), " (", bytes, " bytes of pinned memory)"));
  }
  buffer.size_ = bytes;
  return buffer;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void PinnedBuffer::Reset() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace psgd::gpu
