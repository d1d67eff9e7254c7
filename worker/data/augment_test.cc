#include "worker/data/augment.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <set>
#include <vector>

namespace psgd {
namespace {

void CheckStandardized(const float* x, int64_t n) {
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += x[i];
    sq += double{x[i]} * x[i];
  }
  CHECK(std::abs(sum / n) < 1e-5);
  CHECK(std::sqrt(sq / n) == Approx(1.0).epsilon(1e-4));
}

// Random bytes: no two crops of it are alike.
std::vector<uint8_t> CodedImage() {
  std::vector<uint8_t> image(3072);
  Rng rng(1);
  for (uint8_t& v : image) v = static_cast<uint8_t>(rng.UniformInt(256));
  return image;
}

// Pearson correlation of out's channel c with the crop (top, left, flip) of
// image's channel c.
double Correlation(const std::vector<uint8_t>& image, const float* out, int c,
                   int top, int left, bool flip) {
  double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
  const int n = 576;
  for (int h = 0; h < 24; ++h) {
    for (int w = 0; w < 24; ++w) {
      const double x =
          image[c * 1024 + (top + h) * 32 + left + (flip ? 23 - w : w)];
      const double y = out[c * 576 + h * 24 + w];
      sx += x;
      sy += y;
      sxx += x * x;
      syy += y * y;
      sxy += x * y;
    }
  }
  const double cov = sxy / n - sx / n * sy / n;
  return cov /
         std::sqrt((sxx / n - sx * sx / n / n) * (syy / n - sy * sy / n / n));
}

TEST_CASE("per-image standardisation as TensorFlow's") {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  StandardizeImage(6, x.data());
  CheckStandardized(x.data(), 6);
  // A constant image divides by 1/sqrt(n) instead of 0.
  std::vector<float> flat(16, 5.0f);
  StandardizeImage(16, flat.data());
  for (float v : flat) CHECK(v == 0.0f);
}

TEST_CASE("the evaluation path is the standardised central crop") {
  const std::vector<uint8_t> image = CodedImage();
  std::vector<float> out(kCropPixels);
  CentralCropImage(image.data(), out.data());
  CheckStandardized(out.data(), kCropPixels);
  // Standardisation is affine: order within the crop is kept, and the crop
  // is the one at offset 4.
  for (int c = 0; c < 3; ++c) {
    CHECK(Correlation(image, out.data(), c, 4, 4, false) == Approx(1.0));
  }
}

TEST_CASE(
    "distortions: every crop offset and both flips, then affine per channel") {
  const std::vector<uint8_t> image = CodedImage();
  std::vector<float> out(kCropPixels);
  Rng rng(42);
  std::set<int> tops, lefts, flips;
  for (int draw = 0; draw < 400; ++draw) {
    DistortImage(image.data(), &rng, out.data());
    CheckStandardized(out.data(), kCropPixels);
    // Exactly one (top, left, flip) explains channel 0, and the same one
    // explains the other channels: a crop and flip shared by the channels,
    // then an affine map per channel (brightness, contrast, standardisation).
    int found = 0;
    for (int top = 0; top <= 8; ++top)
      for (int left = 0; left <= 8; ++left)
        for (bool flip : {false, true}) {
          if (Correlation(image, out.data(), 0, top, left, flip) < 0.999999)
            continue;
          ++found;
          tops.insert(top);
          lefts.insert(left);
          flips.insert(flip);
          CHECK(Correlation(image, out.data(), 1, top, left, flip) > 0.999999);
          CHECK(Correlation(image, out.data(), 2, top, left, flip) > 0.999999);
        }
    CHECK(found == 1);
  }
  CHECK(tops.size() == 9);
  CHECK(lefts.size() == 9);
  CHECK(flips.size() == 2);
}

TEST_CASE("distortions repeat with the seed") {
  const std::vector<uint8_t> image = CodedImage();
  std::vector<float> a(kCropPixels), b(kCropPixels), c(kCropPixels);
  Rng r1(7), r2(7), r3(8);
  DistortImage(image.data(), &r1, a.data());
  DistortImage(image.data(), &r2, b.data());
  DistortImage(image.data(), &r3, c.data());
  CHECK(a == b);
  CHECK(a != c);
}

// The standard CIFAR recipe against a direct reading of its definition:
// pad the bytes with zeros, crop, flip, normalise per channel.
TEST_CASE("pad, crop, flip and normalise as torchvision's recipe") {
  std::vector<uint8_t> image(kCifarPixels);
  for (int64_t i = 0; i < kCifarPixels; ++i) image[i] = (i * 37 + 11) % 256;
  std::vector<float> normalized(kCifarPixels);
  NormalizeCifarImage(image.data(), normalized.data());
  CHECK(normalized[0] ==
        Approx((image[0] / 255.0 - kCifarMean[0]) / kCifarStd[0]));
  int flips = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    // The draws, repeated from the same stream: top, left, flip.
    Rng draws(seed);
    const int64_t top = static_cast<int64_t>(draws.UniformInt(9));
    const int64_t left = static_cast<int64_t>(draws.UniformInt(9));
    const bool flip = draws.UniformInt(2) == 1;
    flips += flip;
    Rng rng(seed);
    std::vector<float> out(kCifarPixels);
    PadCropFlipNormalize(image.data(), &rng, out.data());
    bool all = true;
    for (int64_t c = 0; c < 3; ++c) {
      for (int64_t h = 0; h < 32; ++h) {
        for (int64_t w = 0; w < 32; ++w) {
          // Padded image (40 x 40), cropped at (top, left), then mirrored.
          const int64_t pw = (flip ? 31 - w : w) + left;
          const int64_t ph = h + top;
          const bool inside = ph >= 4 && ph < 36 && pw >= 4 && pw < 36;
          const double v =
              inside ? image[(c * 32 + ph - 4) * 32 + pw - 4] / 255.0 : 0.0;
          const double want = (v - kCifarMean[c]) / kCifarStd[c];
          all &= std::abs(out[(c * 32 + h) * 32 + w] - want) < 1e-5;
        }
      }
    }
    INFO("seed " << seed << " top " << top << " left " << left);
    CHECK(all);
  }
  CHECK(flips > 5);
  CHECK(flips < 35);
}

}  // namespace
}  // namespace psgd
