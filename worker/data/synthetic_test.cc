#include "worker/data/synthetic.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "worker/data/augment.h"

namespace psgd {
namespace {

TEST_CASE(
    "synthetic sets are deterministic, balanced and sized like CIFAR-10") {
  absl::StatusOr<ImageSet> a = MakeSyntheticSet(100, 1);
  absl::StatusOr<ImageSet> b = MakeSyntheticSet(100, 1);
  absl::StatusOr<ImageSet> c = MakeSyntheticSet(100, 2);
  REQUIRE((a.ok() && b.ok() && c.ok()));
  CHECK(a->count() == 100);
  CHECK(a->pixels.size() == 100 * 3072u);
  CHECK(a->pixels == b->pixels);
  CHECK(a->pixels != c->pixels);
  for (int64_t i = 0; i < 100; ++i) CHECK(a->labels[i] == i % 10);
  CHECK(MakeSyntheticSet(0, 1).status().code() ==
        absl::StatusCode::kInvalidArgument);
}

TEST_CASE("synthetic classes separate: nearest class mean on distorted crops") {
  // Class means from one seed's distorted crops classify another seed's.
  ImageSet train = MakeSyntheticSet(1000, 1).value();
  ImageSet test = MakeSyntheticSet(500, 2).value();
  std::vector<std::vector<double>> means(10, std::vector<double>(kCropPixels));
  std::vector<float> crop(kCropPixels);
  Rng rng(3);
  for (int64_t i = 0; i < train.count(); ++i) {
    CentralCropImage(train.image(i), crop.data());
    for (int64_t p = 0; p < kCropPixels; ++p)
      means[train.labels[i]][p] += crop[p];
  }
  int correct = 0;
  for (int64_t i = 0; i < test.count(); ++i) {
    DistortImage(test.image(i), &rng, crop.data());
    int best = -1;
    double best_score = -1e300;
    for (int k = 0; k < 10; ++k) {
      // Correlation-like score; ignores crop shifts only partly, so this is
      // a weak classifier: the CNN does much better.
      double s = 0;
      for (int64_t p = 0; p < kCropPixels; ++p) s += means[k][p] * crop[p];
      if (s > best_score) {
        best_score = s;
        best = k;
      }
    }
    correct += best == test.labels[i];
  }
  INFO("nearest-mean accuracy " << correct / 500.0);
  // Well above chance (10%): the classes carry signal through distortions.
  CHECK(correct > 150);
}

}  // namespace
}  // namespace psgd
