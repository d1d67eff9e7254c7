// What every op of one GPU backend shares: the device, its one stream, the
// cuBLAS and cuDNN handles bound to that stream, the one cuDNN workspace
// (grown to the largest any plan needs), and the pinned staging buffers
// through which host data moves.
//
// Copies. Upload copies host data into a pinned staging area and enqueues
// the DMA on the stream, returning at once: the caller may reuse its buffer,
// and the copy overlaps the work already queued and the host's next calls.
// The staging area is used as a ring; it waits for the stream only when it
// wraps around. Download enqueues the DMA into pinned memory, waits for the
// stream, and copies out.
//
// Thread-safety: one thread at a time (as Backend). The context must outlive
// every op, buffer and tensor made with it.
#ifndef PSGD_WORKER_GPU_GPU_CONTEXT_H_
#define PSGD_WORKER_GPU_GPU_CONTEXT_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/gpu/cublas_util.h"
#include "worker/gpu/cudnn_util.h"
#include "worker/gpu/device_memory.h"
#include "worker/gpu/gpu_options.h"

namespace psgd::gpu {

class GpuContext {
 public:
  // FAILED_PRECONDITION when there is no usable GPU options.device (the
  // message names the device and what cudaGetDeviceCount said) or its
  // compute capability is below 8.0 (this build has sm_80 / sm_90 code);
  // other errors name the failing call.
  static absl::StatusOr<std::unique_ptr<GpuContext>> Create(
      const GpuBackendOptions& options);
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  const GpuBackendOptions& options() const { return options_; }
  // "gpu:0" (with options, as GpuBackendOptions::ToString).
  const std::string& name() const { return name_; }
  // "NVIDIA H100 80GB HBM3, compute capability 9.0, 132 SMs".
  const std::string& description() const { return description_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_.get(); }
  cudnnHandle_t cudnn() const { return cudnn_.get(); }

  // Makes the context's device current for the calling thread (every entry
  // point of the backend calls it; cheap when it already is).
  absl::Status Activate() const;

  // The shared cuDNN workspace, at least `bytes` long. Growing it waits for
  // the stream; its address may change, so ask at every use.
  absl::StatusOr<void*> Workspace(size_t bytes);

  // Host -> device, asynchronous as described above.
  absl::Status Upload(const void* host, void* device, size_t bytes);
  // Device -> host; returns when `host` holds the data.
  absl::Status Download(const void* device, void* host, size_t bytes);
  // Bytes Download has copied to the host so far.
  int64_t bytes_downloaded() const { return bytes_downloaded_; }
  // Waits for everything enqueued on the stream.
  absl::Status Synchronize();

  // One line per plan made (the algorithms a convolution chose, the LRN
  // implementation), for benchmarks and debugging.
  void NotePlan(std::string line) { plan_notes_.push_back(std::move(line)); }
  const std::vector<std::string>& plan_notes() const { return plan_notes_; }

 private:
  explicit GpuContext(const GpuBackendOptions& options);

  const GpuBackendOptions options_;
  const std::string name_;
  std::string description_;
  // Owned; destroyed last (the members below wait for it or use it).
  cudaStream_t stream_ = nullptr;
  CublasHandle cublas_;
  CudnnHandle cudnn_;
  DeviceBuffer workspace_;
  PinnedBuffer upload_;
  size_t upload_offset_ = 0;
  cudaEvent_t upload_done_ = nullptr;  // owned; the last Upload's copy
  PinnedBuffer download_;
  int64_t bytes_downloaded_ = 0;
  std::vector<std::string> plan_notes_;
};

}  // namespace psgd::gpu

#endif  // PSGD_WORKER_GPU_GPU_CONTEXT_H_
