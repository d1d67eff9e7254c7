// What the CUDA backend offers beyond the Backend interface, for code that
// keeps a whole training step on the device (gpu_bench, the gpu tests).
// Plain C++: callers need no CUDA headers. The backend itself is made by
// CreateGpuBackend (gpu_backend_factory.h) or CreateBackend("gpu:K").
//
// The backend: one non-blocking CUDA stream per backend, on which every op,
// copy and library call is enqueued in issue order; cuBLAS and cuDNN handles
// bound to it; device memory from cudaMalloc, zero-filled on the stream;
// host copies staged through pinned memory (gpu_context.h). Convolutions:
// cudnn_conv.h; LRN: cudnn_lrn.h; ReLU: cudnn_activation.h; dense:
// cublas_dense.h; pooling and the loss: kernel_ops.h.
//
// Thread-safety: as Backend (one thread at a time).
#ifndef PSGD_WORKER_GPU_GPU_BACKEND_H_
#define PSGD_WORKER_GPU_GPU_BACKEND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/backend/backend.h"
#include "worker/gpu/adam.h"

namespace psgd {

// Whether `backend` is the CUDA backend.
bool IsGpuBackend(const Backend& backend);

// One Adam step (adam.h) on device memory of the CUDA backend, enqueued on
// its stream: w, g, m, v of equal shape (m and v zero before step 1).
// INVALID_ARGUMENT when `backend` is not the CUDA backend, the shapes
// differ, or step < 1.
absl::Status GpuAdamUpdate(Backend* backend, const gpu::AdamParams& params,
                           int64_t step, DeviceView w, ConstDeviceView g,
                           DeviceView m, DeviceView v);

// "NVIDIA H100 80GB HBM3, compute capability 9.0, ..." for the CUDA
// backend; empty for others.
std::string GpuDescription(const Backend& backend);

// Bytes the CUDA backend has copied from the device to the host; 0 for
// other backends.
int64_t GpuBytesToHost(const Backend& backend);

// Device and pinned allocations (cudaMalloc, cudaMallocHost) this process's
// CUDA backends have made so far: a step that allocates nothing leaves it
// unchanged.
int64_t GpuAllocations();

// One line per plan the CUDA backend made (the convolution algorithms it
// chose, the LRN implementation); empty for other backends.
std::vector<std::string> GpuPlanNotes(const Backend& backend);

}  // namespace psgd

#endif  // PSGD_WORKER_GPU_GPU_BACKEND_H_
