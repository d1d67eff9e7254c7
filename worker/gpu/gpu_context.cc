#include "worker/gpu/gpu_context.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace psgd::gpu {
namespace {

constexpr size_t kStagingAlignment = 256;
constexpr size_t kMinUploadStaging = size_t{16} << 20;
constexpr size_t kMinDownloadStaging = size_t{1} << 20;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

// FAILED_PRECONDITION unless device `device` exists, naming what
// cudaGetDeviceCount said.
absl::Status CheckDeviceExists(const std::string& name, int device) {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::FailedPreconditionError(absl::StrCat(
        "backend '", name, "': no usable GPU: cudaGetDeviceCount failed with ",
        cudaGetErrorName(error), " (", cudaGetErrorString(error),
        "); is there an NVIDIA GPU with a driver for CUDA ",
        CUDART_VERSION / 1000, "? Use device cpu otherwise"));
  }
  if (count == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "backend '", name,
        "': no usable GPU: cudaGetDeviceCount found no CUDA devices"));
  }
  if (device >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "backend '", name, "': device ", device,
        " does not exist: cudaGetDeviceCount found ", count,
        count == 1 ? " device (gpu:0)"
                   : absl::StrCat(" devices (gpu:0 .. gpu:", count - 1, ")")));
  }
  return absl::OkStatus();
}

}  // namespace

GpuContext::GpuContext(const GpuBackendOptions& options)
    : options_(options), name_(options.ToString()) {}

absl::StatusOr<std::unique_ptr<GpuContext>> GpuContext::Create(
    const GpuBackendOptions& options) {
  std::unique_ptr<GpuContext> context(new GpuContext(options));
  const std::string& name = context->name_;
  RETURN_IF_ERROR(CheckDeviceExists(name, options.device));
  RETURN_IF_ERROR(context->Activate());
  cudaDeviceProp prop;
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.device));
  context->description_ = absl::StrCat(
      prop.name, ", compute capability ", prop.major, ".", prop.minor, ", ",
      prop.multiProcessorCount, " SMs, ", prop.totalGlobalMem >> 20, " MiB");
  int driver = 0, runtime = 0;
  CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&driver));
  CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&runtime));
  absl::StrAppend(&context->description_, "; driver for CUDA ", driver / 1000,
                  ".", driver % 1000 / 10, ", runtime ", runtime / 1000, ".",
                  runtime % 1000 / 10, ", ", CublasVersionString(), ", ",
                  CudnnVersionString());
  if (prop.major < 8) {
    return absl::FailedPreconditionError(absl::StrCat(
        "backend '", name, "': ", context->description_,
        ": this build has GPU code for compute capability 8.0 and newer "
        "(sm_80, sm_90 and compute_90 PTX; see CUDA_ARCH_FLAGS in "
        "third_party/cuda.bzl)"));
  }
  CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&context->stream_, cudaStreamNonBlocking));
  CUDA_RETURN_IF_ERROR(
      cudaEventCreateWithFlags(&context->upload_done_, cudaEventDisableTiming));
  ASSIGN_OR_RETURN(
      context->cublas_,
      WithPrefix(CublasHandle::Create(context->stream_, options.tf32),
                 absl::StrCat("backend '", name, "': ")));
  ASSIGN_OR_RETURN(context->cudnn_,
                   WithPrefix(CreateCudnnHandle(context->stream_),
                              absl::StrCat("backend '", name, "': ")));
  return context;
}

GpuContext::~GpuContext() {
  (void)Activate();
  if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
  // Members that use the stream go first.
  cudnn_ = CudnnHandle();
  cublas_ = CublasHandle();
  workspace_ = DeviceBuffer();
  upload_ = PinnedBuffer();
  download_ = PinnedBuffer();
  if (upload_done_ != nullptr) (void)cudaEventDestroy(upload_done_);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
}

absl::Status GpuContext::Activate() const {
  CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device));
  return absl::OkStatus();
}

absl::StatusOr<void*> GpuContext::Workspace(size_t bytes) {
  if (bytes <= workspace_.size()) return workspace_.data();
  workspace_ = DeviceBuffer();  // waits for the stream, frees the old one
  ASSIGN_OR_RETURN(workspace_,
                   WithPrefix(DeviceBuffer::Allocate(bytes, stream_),
                              absl::StrCat(name_, " cuDNN workspace: ")));
  return workspace_.data();
}

absl::Status GpuContext::Upload(const void* host, void* device, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  const size_t need = RoundUp(bytes, kStagingAlignment);
  if (need > upload_.size()) {
    // Copies in flight may still read the old area.
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
    const size_t size = std::max({need, 2 * upload_.size(), kMinUploadStaging});
    upload_ = PinnedBuffer();
    ASSIGN_OR_RETURN(upload_,
                     WithPrefix(PinnedBuffer::Allocate(size),
                                absl::StrCat(name_, " upload staging: ")));
    upload_offset_ = 0;
  } else if (upload_offset_ + need > upload_.size()) {
    // Wrapping around: the area is free once the last copy has run.
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(upload_done_));
    upload_offset_ = 0;
  }
  char* staging = upload_.as<char>() + upload_offset_;
  std::memcpy(staging, host, bytes);
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(device, staging, bytes, cudaMemcpyHostToDevice, stream_));
  CUDA_RETURN_IF_ERROR(cudaEventRecord(upload_done_, stream_));
  upload_offset_ += need;
  return absl::OkStatus();
}

absl::Status GpuContext::Download(const void* device, void* host,
                                  size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (bytes > download_.size()) {
    const size_t size =
        std::max({bytes, 2 * download_.size(), kMinDownloadStaging});
    download_ = PinnedBuffer();
    ASSIGN_OR_RETURN(download_,
                     WithPrefix(PinnedBuffer::Allocate(size),
                                absl::StrCat(name_, " download staging: ")));
  }
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(download_.data(), device, bytes,
                                       cudaMemcpyDeviceToHost, stream_));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  std::memcpy(host, download_.data(), bytes);
  bytes_downloaded_ += static_cast<int64_t>(bytes);
  return absl::OkStatus();
}

absl::Status GpuContext::Synchronize() {
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  return absl::OkStatus();
}

}  // namespace psgd::gpu
