#include "worker/data/batcher.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <set>

#include "worker/data/augment.h"

namespace psgd {
namespace {

std::vector<Batch> Drain(Batcher* b) {
  std::vector<Batch> out;
  for (;;) {
    absl::StatusOr<Batch> next = b->Next();
    if (!next.ok()) {
      CHECK(next.status().code() == absl::StatusCode::kOutOfRange);
      return out;
    }
    out.push_back(std::move(next).value());
  }
}

// n images with distinct central crops; labels index % 10.
ImageSet UniqueSet(int64_t n) {
  ImageSet s;
  s.pixels.resize(n * ImageSet::kImageBytes);
  s.labels.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    s.labels[i] = i % 10;
    uint8_t* im = s.pixels.data() + i * ImageSet::kImageBytes;
    for (int64_t p = 0; p < ImageSet::kImageBytes; ++p) {
      im[p] = static_cast<uint8_t>((p * (i + 1) * 13) % 251);
    }
  }
  return s;
}

// The example indices of a batch's images, matched by their standardised
// central crops; also checks that each label belongs to its image.
std::vector<int64_t> Identify(const ImageSet& set, const Batch& batch) {
  std::vector<int64_t> ids;
  std::vector<float> crop(kCropPixels);
  for (int64_t j = 0; j < static_cast<int64_t>(batch.labels.size()); ++j) {
    const float* got = batch.images.data() + j * kCropPixels;
    int64_t id = -1;
    for (int64_t i = 0; i < set.count() && id < 0; ++i) {
      CentralCropImage(set.image(i), crop.data());
      if (std::equal(crop.begin(), crop.end(), got)) id = i;
    }
    REQUIRE(id >= 0);
    CHECK(batch.labels[j] == set.labels[id]);
    ids.push_back(id);
  }
  return ids;
}

TEST_CASE(
    "evaluation batches: every example once, in order, last batch partial") {
  const ImageSet set = UniqueSet(23);
  auto b = Batcher::Create(&set, BatcherOptions::ForEvaluation(5)).value();
  CHECK(b->batches_per_epoch() == 5);
  std::vector<Batch> batches = Drain(b.get());
  REQUIRE(batches.size() == 5);
  CHECK(batches.back().labels.size() == 3);
  std::vector<int64_t> seen;
  for (const Batch& batch : batches) {
    CHECK(batch.images.shape()[1] == 3);
    for (int64_t id : Identify(set, batch)) seen.push_back(id);
  }
  std::vector<int64_t> expected(23);
  for (int64_t i = 0; i < 23; ++i) expected[i] = i;
  CHECK(seen == expected);
  // Out of data stays out of data.
  CHECK(b->Next().status().code() == absl::StatusCode::kOutOfRange);
  CHECK(b->Next().status().code() == absl::StatusCode::kOutOfRange);
}

TEST_CASE("shuffled epochs cover each example once; shards are disjoint") {
  const ImageSet set = UniqueSet(30);
  BatcherOptions o = BatcherOptions::ForEvaluation(4);
  o.shuffle = true;
  o.epochs = 2;
  o.seed = 9;
  o.num_workers = 3;
  std::set<int64_t> all;
  for (int w = 0; w < 3; ++w) {
    o.worker_index = w;
    auto b = Batcher::Create(&set, o).value();
    CHECK(b->examples_per_epoch() == 10);
    std::map<int64_t, std::vector<int64_t>> by_epoch;
    for (const Batch& batch : Drain(b.get())) {
      for (int64_t id : Identify(set, batch))
        by_epoch[batch.epoch].push_back(id);
    }
    REQUIRE(by_epoch.size() == 2);
    CHECK(by_epoch[0] != by_epoch[1]);  // reshuffled
    for (auto& [epoch, ids] : by_epoch) {
      std::vector<int64_t> sorted = ids;
      std::sort(sorted.begin(), sorted.end());
      for (size_t k = 0; k < sorted.size(); ++k) {
        CHECK(sorted[k] == w + 3 * static_cast<int64_t>(k));  // the shard
      }
      all.insert(ids.begin(), ids.end());
    }
  }
  CHECK(all.size() == 30);
}

TEST_CASE(
    "own-order workers see everything in different orders; seeds repeat") {
  const ImageSet set = UniqueSet(12);
  BatcherOptions o = BatcherOptions::ForEvaluation(12);
  o.shuffle = true;
  o.partition = BatcherOptions::Partition::kOwnOrder;
  o.num_workers = 2;
  auto order = [&](int worker, uint64_t seed) {
    o.worker_index = worker;
    o.seed = seed;
    auto b = Batcher::Create(&set, o).value();
    std::vector<Batch> batches = Drain(b.get());
    REQUIRE(batches.size() == 1);
    return Identify(set, batches[0]);
  };
  const auto w0 = order(0, 5), w1 = order(1, 5), again = order(0, 5);
  CHECK(w0 != w1);
  CHECK(w0 == again);
  auto sorted = w1;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted.size() == 12);
  CHECK(sorted.front() == 0);
  CHECK(sorted.back() == 11);
}

TEST_CASE("training batches: full batches only, distorted, repeatable") {
  const ImageSet set = UniqueSet(50);
  BatcherOptions o;
  o.batch_size = 8;
  o.epochs = 3;
  o.seed = 4;
  auto a = Batcher::Create(&set, o).value();
  auto b = Batcher::Create(&set, o).value();
  CHECK(a->batches_per_epoch() == 6);
  const auto drain_start = std::chrono::steady_clock::now();
  std::vector<Batch> ba = Drain(a.get());
  const double drain_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                    drain_start)
          .count();
  std::vector<Batch> bb = Drain(b.get());
  REQUIRE(ba.size() == 18);
  REQUIRE(bb.size() == 18);
  for (size_t i = 0; i < ba.size(); ++i) {
    CHECK(ba[i].labels.size() == 8);
    CHECK(ba[i].epoch == static_cast<int64_t>(i / 6));
    CHECK(ba[i].labels == bb[i].labels);
    CHECK(std::equal(ba[i].images.span().begin(), ba[i].images.span().end(),
                     bb[i].images.span().begin()));
  }
  // Next() counted its time waiting for batches: some, and no more than
  // the calls (all of them in the Drain above) took.
  CHECK(a->wait_seconds() > 0.0);
  CHECK(a->wait_seconds() <= drain_seconds);
}

TEST_CASE("BatchOf: the leased samples' images and labels, in their order") {
  const ImageSet set = UniqueSet(30);
  BatcherOptions o;
  o.partition = BatcherOptions::Partition::kServers;
  o.batch_size = 4;
  o.augment = false;  // the central crop: Identify reads the images back
  auto b = Batcher::Create(&set, o).value();
  const std::vector<int64_t> leased = {7, 2, 29, 0, 13};
  absl::StatusOr<Batch> batch = b->BatchOf(leased, /*epoch=*/3, /*index=*/5);
  REQUIRE(batch.ok());
  // The images themselves are the samples named, each with its label.
  CHECK(Identify(set, *batch) == leased);
  CHECK(batch->examples == leased);
  CHECK(batch->epoch == 3);
  CHECK(batch->index == 5);
  // Its own batches: none (the servers hand them out).
  CHECK(b->Next().status().code() == absl::StatusCode::kFailedPrecondition);

  // With augmentation: the same chunk gives the same bits (a redo), and
  // each image is still its sample's (the label).
  o.augment = true;
  auto a = Batcher::Create(&set, o).value();
  absl::StatusOr<Batch> x = a->BatchOf(leased, 3, 5);
  absl::StatusOr<Batch> y = a->BatchOf(leased, 3, 5);
  REQUIRE(x.ok());
  REQUIRE(y.ok());
  CHECK(x->images.span().size() == y->images.span().size());
  CHECK(std::equal(x->images.span().begin(), x->images.span().end(),
                   y->images.span().begin()));
  for (size_t j = 0; j < leased.size(); ++j) {
    CHECK(x->labels[j] == set.labels[leased[j]]);
  }

  // Samples outside the set, or none: refused, naming what is wrong.
  const std::vector<int64_t> outside = {3, 30};
  absl::StatusOr<Batch> bad = b->BatchOf(outside, 0, 0);
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(bad.status().message().find("example 30 is outside the set of 30") !=
        std::string::npos);
  CHECK(b->BatchOf({}, 0, 0).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("the CIFAR pipeline makes 32x32 normalised images") {
  const ImageSet set = UniqueSet(8);
  CHECK(BatcherOptions::PipelineFor({3, 32, 32}) ==
        BatcherOptions::Pipeline::kCifar);
  CHECK(BatcherOptions::PipelineFor({3, 24, 24}) ==
        BatcherOptions::Pipeline::kTutorial);
  auto eval = Batcher::Create(&set, BatcherOptions::ForEvaluation(
                                        8, BatcherOptions::Pipeline::kCifar))
                  .value();
  std::vector<Batch> batches = Drain(eval.get());
  REQUIRE(batches.size() == 1);
  CHECK(batches[0].images.shape() == Shape{8, 3, 32, 32});
  std::vector<float> want(kCifarPixels);
  NormalizeCifarImage(set.image(0), want.data());
  CHECK(std::equal(want.begin(), want.end(), batches[0].images.data()));
  BatcherOptions train;
  train.batch_size = 4;
  train.pipeline = BatcherOptions::Pipeline::kCifar;
  auto b = Batcher::Create(&set, train).value();
  batches = Drain(b.get());
  REQUIRE(batches.size() == 2);
  CHECK(batches[0].images.shape() == Shape{4, 3, 32, 32});
}

TEST_CASE("destroying a batcher whose producer waits on a full queue returns") {
  const ImageSet set = UniqueSet(20);
  for (int prefetch : {1, 3}) {
    BatcherOptions o;
    o.batch_size = 2;
    o.epochs = 0;  // no end
    o.prefetch = prefetch;
    auto b = Batcher::Create(&set, o).value();
    for (int i = 0; i < 25; ++i) REQUIRE(b->Next().ok());  // crosses epochs
    // b goes out of scope with the producer blocked.
  }
  // Destroyed before the first Next.
  BatcherOptions o;
  o.batch_size = 2;
  o.epochs = 0;
  auto b = Batcher::Create(&set, o).value();
}

TEST_CASE("bad options and too-small shards are refused") {
  const ImageSet set = UniqueSet(10);
  auto code = [&](BatcherOptions o) {
    return Batcher::Create(&set, o).status();
  };
  BatcherOptions o;
  o.batch_size = 0;
  CHECK_THAT(std::string(code(o).message()),
             Catch::Contains("batch_size is 0"));
  o = BatcherOptions();
  o.batch_size = 4;
  o.worker_index = 2;
  o.num_workers = 2;
  CHECK_THAT(std::string(code(o).message()),
             Catch::Contains("worker_index is 2"));
  o.worker_index = 0;
  o.num_workers = 0;
  CHECK(code(o).code() == absl::StatusCode::kInvalidArgument);
  o = BatcherOptions();
  o.batch_size = 4;
  o.num_workers = 4;  // 3 examples each, fewer than a batch
  CHECK_THAT(std::string(code(o).message()),
             Catch::Contains("fewer than one batch"));
  o = BatcherOptions();
  o.epochs = -1;
  CHECK(code(o).code() == absl::StatusCode::kInvalidArgument);
  o = BatcherOptions();
  o.prefetch = 0;
  CHECK(code(o).code() == absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psgd
