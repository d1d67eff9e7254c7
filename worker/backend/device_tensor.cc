#include "worker/backend/device_tensor.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace psgd {
namespace {

// A programmer's error: the caller asked for a shape of another size.
void CheckSameCount(const Shape& from, const Shape& to) {
  if (NumElements(from) == NumElements(to)) return;
  std::fprintf(stderr, "Reshaped: %s and %s differ in element count\n",
               ShapeToString(from).c_str(), ShapeToString(to).c_str());
  std::abort();
}

}  // namespace

ConstDeviceView ConstDeviceView::Reshaped(Shape shape) const {
  CheckSameCount(shape_, shape);
  return ConstDeviceView(data_, std::move(shape));
}

DeviceView DeviceView::Reshaped(Shape shape) const {
  CheckSameCount(shape_, shape);
  return DeviceView(data_, std::move(shape));
}

}  // namespace psgd
