// Fully connected layer on the CPU: three GEMMs and a bias.
//
// Thread-safety: as DenseOp (one thread at a time).
#ifndef PSGD_WORKER_CPU_DENSE_H_
#define PSGD_WORKER_CPU_DENSE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/thread_pool.h"
#include "worker/backend/backend.h"
#include "worker/cpu/gemm.h"

namespace psgd {

// INVALID_ARGUMENT for an invalid shape. `pool` is not owned and must
// outlive the op.
absl::StatusOr<std::unique_ptr<DenseOp>> CreateCpuDense(const DenseShape& shape,
                                                        const GemmConfig& gemm,
                                                        ThreadPool* pool);

}  // namespace psgd

#endif  // PSGD_WORKER_CPU_DENSE_H_
