// Batches for training and evaluation from an ImageSet: seeded shuffling,
// each worker's shard or its own order, epochs, the training distortions or
// the evaluation crop, and a background thread that keeps batches ready.
//
//   ASSIGN_OR_RETURN(auto batches, Batcher::Create(&data.train, options));
//   for (;;) {
//     absl::StatusOr<Batch> b = batches->Next();
//     if (absl::IsOutOfRange(b.status())) break;  // the epochs are done
//     RETURN_IF_ERROR(b.status());
//     ... b->images (N, 3, 24, 24) or (N, 3, 32, 32), b->labels ...
//   }
//
// Every batch is a function of (seed, worker_index, epoch, batch index)
// only, so runs repeat exactly whatever the threads' timing.
//
// Thread-safety: Next() may be called from one thread at a time. The
// producer thread starts in Create and is stopped and joined by the
// destructor, also while it waits on a full queue. The lock is common/mutex.h's
// (std::mutex underneath, so that ThreadSanitizer sees the ordering; its
// annotations are checked by --config=tsa).
#ifndef PSGD_WORKER_DATA_BATCHER_H_
#define PSGD_WORKER_DATA_BATCHER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/mutex.h"
#include "common/tensor.h"
#include "worker/data/image_set.h"

namespace psgd {

struct Batch {
  Tensor images;                  // (N, 3, S, S), S as the pipeline
  std::vector<int32_t> labels;    // (N)
  int64_t epoch = 0;              // 0-based
  int64_t index = 0;              // batch index within the epoch
  std::vector<int64_t> examples;  // the set's items read, as `labels`
};

struct BatcherOptions {
  int64_t batch_size = 128;
  // Passes over the data; 0 means without end.
  int64_t epochs = 1;
  uint64_t seed = 0;
  // Which worker this is, of how many.
  int worker_index = 0;
  int num_workers = 1;
  // kShard: this worker reads every num_workers-th example from
  // worker_index on (disjoint shards). kOwnOrder: every worker reads all
  // examples, each in its own order. kServers: the servers hand out the
  // examples (data { sharding: SERVERS }, ps/state/data_queue.h): no batches
  // of its own; BatchOf makes each leased chunk's batch.
  enum class Partition { kShard, kOwnOrder, kServers };
  Partition partition = Partition::kShard;
  bool shuffle = true;  // a fresh permutation per epoch
  // Which preprocessing (augment.h): kTutorial, TensorFlow's 24x24 crops
  // (the tutorial network); kCifar, 32x32 pad-crop-flip-normalise (the
  // layer-graph networks). PipelineFor picks it from a model's image shape.
  enum class Pipeline { kTutorial, kCifar };
  Pipeline pipeline = Pipeline::kTutorial;
  bool augment = true;  // the pipeline's distortions; else its evaluation
                        // path (central crop / normalisation only)
  // Drop an epoch's last partial batch (training); keep it (evaluation).
  bool drop_remainder = true;
  int prefetch = 4;  // batches kept ready, >= 1

  // One in-order pass with the evaluation crop, keeping the last partial
  // batch.
  static BatcherOptions ForEvaluation(int64_t batch_size,
                                      Pipeline pipeline = Pipeline::kTutorial);
  // kCifar for (3, 32, 32) images, else kTutorial.
  static Pipeline PipelineFor(const Shape& image);
};

class Batcher {
 public:
  // `set` is not owned and must outlive the Batcher. INVALID_ARGUMENT for
  // bad options (naming the field) or a shard with fewer examples than
  // one batch.
  static absl::StatusOr<std::unique_ptr<Batcher>> Create(
      const ImageSet* set, const BatcherOptions& options);
  ~Batcher();

  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // The next batch, waiting for the producer if it is behind; OUT_OF_RANGE
  // once the epochs are done (and on every later call). FAILED_PRECONDITION
  // with Partition::kServers.
  absl::StatusOr<Batch> Next();
  // The batch of `examples` (indices of the set) with this batcher's
  // pipeline, as batch `index` of `epoch` (its augmentation's seed).
  // INVALID_ARGUMENT naming an index outside the set, or for none.
  absl::StatusOr<Batch> BatchOf(absl::Span<const int64_t> examples,
                                int64_t epoch, int64_t index) const;

  int64_t examples_per_epoch() const {
    return static_cast<int64_t>(shard_.size());
  }
  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  // Passes over the data (0: without end).
  int64_t epochs() const { return options_.epochs; }
  // Seconds Next() has spent waiting for the producer, in total.
  double wait_seconds() const;

 private:
  Batcher(const ImageSet* set, const BatcherOptions& options,
          std::vector<int64_t> shard);
  void Produce();
  Batch MakeBatch(absl::Span<const int64_t> examples, int64_t epoch,
                  int64_t index) const;

  // Constant after construction.
  const ImageSet* const set_;  // Not owned.
  const BatcherOptions options_;
  const std::vector<int64_t> shard_;  // this worker's example indices
  const int64_t batches_per_epoch_;

  mutable Mutex mu_;
  CondVar changed_;
  // Batches ready, then (after the last) one OUT_OF_RANGE status.
  std::deque<absl::StatusOr<Batch>> queue_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // OUT_OF_RANGE handed out
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  double wait_seconds_ ABSL_GUARDED_BY(mu_) = 0.0;

  // Last: starts after the fields above exist. None with kServers.
  std::thread producer_;
};

}  // namespace psgd

#endif  // PSGD_WORKER_DATA_BATCHER_H_
