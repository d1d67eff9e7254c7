#include "worker/data/batcher.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/data/augment.h"
#include "worker/random.h"

namespace psgd {
namespace {

absl::Status CheckOptions(const BatcherOptions& o) {
  auto bad = [](absl::string_view field, int64_t value,
                absl::string_view want) {
    return absl::InvalidArgumentError(
        absl::StrCat("batcher: ", field, " is ", value, ", ", want));
  };
  if (o.batch_size < 1) return bad("batch_size", o.batch_size, "must be >= 1");
  if (o.epochs < 0) return bad("epochs", o.epochs, "must be >= 0 (0: no end)");
  if (o.num_workers < 1)
    return bad("num_workers", o.num_workers, "must be >= 1");
  if (o.worker_index < 0 || o.worker_index >= o.num_workers) {
    return bad("worker_index", o.worker_index,
               absl::StrCat("must be in [0, ", o.num_workers, ")"));
  }
  if (o.prefetch < 1) return bad("prefetch", o.prefetch, "must be >= 1");
  return absl::OkStatus();
}

}  // namespace

BatcherOptions BatcherOptions::ForEvaluation(int64_t batch_size,
                                             Pipeline pipeline) {
  BatcherOptions o;
  o.batch_size = batch_size;
  o.pipeline = pipeline;
  o.epochs = 1;
  o.shuffle = false;
  o.augment = false;
  o.drop_remainder = false;
  return o;
}

BatcherOptions::Pipeline BatcherOptions::PipelineFor(const Shape& image) {
  return image == Shape{3, kCifarSize, kCifarSize} ? Pipeline::kCifar
                                                   : Pipeline::kTutorial;
}

absl::StatusOr<std::unique_ptr<Batcher>> Batcher::Create(
    const ImageSet* set, const BatcherOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  std::vector<int64_t> shard;
  for (int64_t i = 0; i < set->count(); ++i) {
    if (options.partition != BatcherOptions::Partition::kShard ||
        i % options.num_workers == options.worker_index) {
      shard.push_back(i);
    }
  }
  const int64_t size = static_cast<int64_t>(shard.size());
  if (size == 0 || (options.drop_remainder && size < options.batch_size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batcher: worker ", options.worker_index, " of ", options.num_workers,
        " has ", size, " examples, fewer than one batch of ",
        options.batch_size));
  }
  return std::unique_ptr<Batcher>(new Batcher(set, options, std::move(shard)));
}

Batcher::Batcher(const ImageSet* set, const BatcherOptions& options,
                 std::vector<int64_t> shard)
    : set_(set),
      options_(options),
      shard_(std::move(shard)),
      batches_per_epoch_(
          options.drop_remainder
              ? static_cast<int64_t>(shard_.size()) / options.batch_size
              : (static_cast<int64_t>(shard_.size()) + options.batch_size - 1) /
                    options.batch_size),
      producer_(options.partition == BatcherOptions::Partition::kServers
                    ? std::thread()
                    : std::thread([this] { Produce(); })) {}

Batcher::~Batcher() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  changed_.SignalAll();
  if (producer_.joinable()) producer_.join();
}

double Batcher::wait_seconds() const {
  MutexLock lock(&mu_);
  return wait_seconds_;
}

absl::StatusOr<Batch> Batcher::BatchOf(absl::Span<const int64_t> examples,
                                       int64_t epoch, int64_t index) const {
  if (examples.empty()) {
    return absl::InvalidArgumentError("batcher: a batch of no examples");
  }
  for (int64_t e : examples) {
    if (e < 0 || e >= set_->count()) {
      return absl::InvalidArgumentError(
          absl::StrCat("batcher: example ", e, " is outside the set of ",
                       set_->count(), " (the servers' data { num_samples } ",
                       "must not exceed the training set)"));
    }
  }
  return MakeBatch(examples, epoch, index);
}

absl::StatusOr<Batch> Batcher::Next() {
  if (options_.partition == BatcherOptions::Partition::kServers) {
    return absl::FailedPreconditionError(
        "batcher: the servers hand out this worker's data (BatchOf)");
  }
  absl::StatusOr<Batch> b;
  {
    MutexLock lock(&mu_);
    if (finished_) {
      return absl::OutOfRangeError(
          absl::StrCat("batcher: the ", options_.epochs, " epochs are done"));
    }
    const auto start = std::chrono::steady_clock::now();
    changed_.Wait(&mu_, [this]() {
      mu_.AssertHeld();
      return !queue_.empty();
    });
    wait_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    b = std::move(queue_.front());
    queue_.pop_front();
    if (!b.ok()) finished_ = true;
  }
  changed_.SignalAll();
  return b;
}

void Batcher::Produce() {
  std::vector<int64_t> order = shard_;
  for (int64_t epoch = 0; options_.epochs == 0 || epoch < options_.epochs;
       ++epoch) {
    if (options_.shuffle) {
      order = shard_;
      Rng rng(DeriveSeed({options_.seed,
                          static_cast<uint64_t>(options_.worker_index),
                          static_cast<uint64_t>(epoch)}));
      // Fisher-Yates with our Rng, the same on every standard library.
      for (int64_t i = static_cast<int64_t>(order.size()) - 1; i > 0; --i) {
        std::swap(order[i], order[rng.UniformInt(i + 1)]);
      }
    }
    for (int64_t b = 0; b < batches_per_epoch_; ++b) {
      const int64_t begin = b * options_.batch_size;
      const int64_t end = std::min<int64_t>(begin + options_.batch_size,
                                            static_cast<int64_t>(order.size()));
      Batch batch = MakeBatch(
          absl::MakeConstSpan(order).subspan(begin, end - begin), epoch, b);
      {
        MutexLock lock(&mu_);
        changed_.Wait(&mu_, [this]() {
          mu_.AssertHeld();
          return stop_ || static_cast<int>(queue_.size()) < options_.prefetch;
        });
        if (stop_) return;
        queue_.push_back(std::move(batch));
      }
      changed_.SignalAll();
    }
  }
  {
    MutexLock lock(&mu_);
    queue_.push_back(absl::OutOfRangeError(
        absl::StrCat("batcher: the ", options_.epochs, " epochs are done")));
  }
  changed_.SignalAll();
}

Batch Batcher::MakeBatch(absl::Span<const int64_t> examples, int64_t epoch,
                         int64_t index) const {
  const int64_t n = static_cast<int64_t>(examples.size());
  Batch batch;
  const bool cifar = options_.pipeline == BatcherOptions::Pipeline::kCifar;
  const int64_t size = cifar ? kCifarSize : kCropSize;
  batch.images = Tensor({n, 3, size, size});
  batch.labels.resize(n);
  batch.epoch = epoch;
  batch.index = index;
  batch.examples.assign(examples.begin(), examples.end());
  Rng rng(DeriveSeed(
      {options_.seed, static_cast<uint64_t>(options_.worker_index),
       static_cast<uint64_t>(epoch), static_cast<uint64_t>(index), 0xa06u}));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t example = examples[i];
    float* out = batch.images.data() + i * 3 * size * size;
    if (cifar && options_.augment) {
      PadCropFlipNormalize(set_->image(example), &rng, out);
    } else if (cifar) {
      NormalizeCifarImage(set_->image(example), out);
    } else if (options_.augment) {
      DistortImage(set_->image(example), &rng, out);
    } else {
      CentralCropImage(set_->image(example), out);
    }
    batch.labels[i] = set_->labels[example];
  }
  return batch;
}

}  // namespace psgd
