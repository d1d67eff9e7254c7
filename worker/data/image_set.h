// A labelled set of 8-bit images held in memory, in CIFAR-10's layout: each
// image is (3, 32, 32) bytes, R, G and B planes, rows top to bottom.
//
// Thread-safety: a plain value; const access from several threads is safe.
#ifndef PSGD_WORKER_DATA_IMAGE_SET_H_
#define PSGD_WORKER_DATA_IMAGE_SET_H_

#include <cstdint>
#include <vector>

namespace psgd {

struct ImageSet {
  static constexpr int64_t kChannels = 3;
  static constexpr int64_t kSize = 32;
  static constexpr int64_t kImageBytes = kChannels * kSize * kSize;  // 3072
  static constexpr int64_t kClasses = 10;

  std::vector<uint8_t> pixels;  // (count, 3, 32, 32)
  std::vector<uint8_t> labels;  // (count), each in [0, 10)

  int64_t count() const { return static_cast<int64_t>(labels.size()); }
  const uint8_t* image(int64_t i) const {
    return pixels.data() + i * kImageBytes;
  }
};

}  // namespace psgd

#endif  // PSGD_WORKER_DATA_IMAGE_SET_H_
