#include "worker/data/dataset.h"

#include <algorithm>
#include <catch2/catch.hpp>

#include "worker/testing/cifar10_files.h"

namespace psgd {
namespace {

TEST_CASE("data sets are opened by name") {
  DataOptions o;
  o.name = "synthetic";
  o.synthetic_train = 30;
  o.synthetic_test = 20;
  absl::StatusOr<Dataset> d = OpenDataset(o);
  REQUIRE(d.ok());
  CHECK(d->name == "synthetic");
  CHECK(d->train.count() == 30);
  CHECK(d->test.count() == 20);
  // The test images are drawn with another seed.
  CHECK(!std::equal(d->test.pixels.begin(), d->test.pixels.end(),
                    d->train.pixels.begin()));

  const std::string dir = testing::MakeTempDir("dataset_cifar");
  testing::WriteCifar10Dir(dir, 3);
  o = DataOptions();
  o.data_dir = dir;
  o.records_per_file = 3;
  d = OpenDataset(o);
  REQUIRE(d.ok());
  CHECK(d->train.count() == 15);
  CHECK(d->test.count() == 3);

  o.name = "imagenet";
  absl::Status s = OpenDataset(o).status();
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("unknown data set 'imagenet'"));
  o = DataOptions();
  o.data_dir = dir + "/missing";
  CHECK(OpenDataset(o).status().code() == absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace psgd
