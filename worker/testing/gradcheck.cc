#include "worker/testing/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "worker/backend_factory/factory.h"

namespace psgd {
namespace testing {

std::vector<std::string> CpuBackendNames() {
  return {"cpu", "cpu:conv=im2col,lrn=onednn,pool=threads",
          "cpu:conv=im2col,gemm=openblas"};
}

std::unique_ptr<Backend> MakeBackend(const std::string& name) {
  BackendOptions options;
  options.threads = 2;
  return Unwrap(CreateBackend(name, options));
}

std::vector<float> RandomValues(int64_t n, uint64_t seed, float lo, float hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> RandomAwayFromZero(int64_t n, uint64_t seed, float lo,
                                      float hi, float margin) {
  std::vector<float> v = RandomValues(n, seed, lo, hi);
  for (float& x : v) {
    if (std::abs(x) < margin) x = x < 0 ? x - margin : x + margin;
  }
  return v;
}

std::vector<float> DistinctValues(int64_t n, uint64_t seed, float lo,
                                  float hi) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<float> v(n);
  const double step = (double{hi} - lo) / static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] =
        static_cast<float>(lo + step * (static_cast<double>(order[i]) + 0.5));
  }
  return v;
}

std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

namespace {

// Element (image i, channel ch, position p) lies at NCHW index `nchw` and
// at index `blocked` in blocks of `block` channels: copies one to the other.
std::vector<float> Relayout(const std::vector<float>& v, const Shape& s,
                            int64_t block, bool to_blocks) {
  REQUIRE(static_cast<int64_t>(v.size()) == NumElements(s));
  std::vector<float> out(v.size());
  const int64_t plane = s[2] * s[3];
  for (int64_t i = 0; i < s[0]; ++i) {
    for (int64_t ch = 0; ch < s[1]; ++ch) {
      for (int64_t p = 0; p < plane; ++p) {
        const int64_t nchw = (i * s[1] + ch) * plane + p;
        const int64_t blocked =
            ((i * (s[1] / block) + ch / block) * plane + p) * block +
            ch % block;
        if (to_blocks) {
          out[blocked] = v[nchw];
        } else {
          out[nchw] = v[blocked];
        }
      }
    }
  }
  return out;
}

}  // namespace

std::vector<float> ToBlocks(const std::vector<float>& nchw, const Shape& s,
                            int64_t block) {
  return Relayout(nchw, s, block, /*to_blocks=*/true);
}

std::vector<float> FromBlocks(const std::vector<float>& blocked, const Shape& s,
                              int64_t block) {
  return Relayout(blocked, s, block, /*to_blocks=*/false);
}

DeviceTensor Upload(Backend* backend, const std::vector<float>& values,
                    const Shape& shape) {
  DeviceTensor t = Unwrap(backend->Allocate(shape));
  REQUIRE(static_cast<int64_t>(values.size()) == t.size());
  REQUIRE_OK(backend->CopyToDevice(
      ConstTensorView(values.data(), {static_cast<int64_t>(values.size())}),
      t.view()));
  return t;
}

DeviceTensor Zeros(Backend* backend, const Shape& shape) {
  return Unwrap(backend->Allocate(shape));
}

std::vector<float> Download(Backend* backend, ConstDeviceView view) {
  std::vector<float> out(view.size());
  REQUIRE_OK(backend->CopyToHost(view, TensorView(out.data(), {view.size()})));
  return out;
}

double Dot(const std::vector<double>& values,
           const std::vector<float>& weights) {
  REQUIRE(values.size() == weights.size());
  double sum = 0.0;
  for (size_t i = 0; i < values.size(); ++i) sum += values[i] * weights[i];
  return sum;
}

double GradientError::relative() const {
  if (max_abs_numeric == 0.0) return max_abs_error == 0.0 ? 0.0 : INFINITY;
  return max_abs_error / max_abs_numeric;
}

std::string GradientError::ToString() const {
  return absl::StrCat("checked ", checked, " coordinates: max |error| ",
                      max_abs_error, " at ", worst_index, ", max |gradient| ",
                      max_abs_numeric, ", relative ", relative());
}

GradientError CompareGradient(
    const std::function<double(const std::vector<double>&)>& f,
    const std::vector<double>& x, const std::vector<float>& analytic, double h,
    int64_t max_checks, uint64_t seed) {
  REQUIRE(x.size() == analytic.size());
  std::vector<int64_t> indices(x.size());
  std::iota(indices.begin(), indices.end(), 0);
  if (static_cast<int64_t>(indices.size()) > max_checks) {
    std::mt19937_64 rng(seed);
    std::shuffle(indices.begin(), indices.end(), rng);
    indices.resize(max_checks);
  }
  GradientError e;
  std::vector<double> probe = x;
  for (int64_t i : indices) {
    probe[i] = x[i] + h;
    const double up = f(probe);
    probe[i] = x[i] - h;
    const double down = f(probe);
    probe[i] = x[i];
    const double numeric = (up - down) / (2.0 * h);
    double error = std::abs(numeric - analytic[i]);
    // A NaN would never compare greater and so never be recorded.
    if (!std::isfinite(error)) error = INFINITY;
    e.max_abs_numeric = std::max(e.max_abs_numeric, std::abs(numeric));
    if (error > e.max_abs_error) {
      e.max_abs_error = error;
      e.worst_index = i;
    }
    ++e.checked;
  }
  return e;
}

Comparison MaxRelativeDifference(const std::vector<float>& a,
                                 const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  return Compare(a, b);
}

void CheckWeightedLayer(Backend* backend, const WeightedLayer& layer,
                        double tolerance) {
  const auto x = RandomValues(NumElements(layer.x), 1, -1, 1);
  const auto w = RandomValues(NumElements(layer.w), 2, -0.5, 0.5);
  const auto b = RandomValues(NumElements(layer.b), 3, -0.5, 0.5);
  const auto r = RandomValues(NumElements(layer.y), 4, -1, 1);
  DeviceTensor dx = Upload(backend, x, layer.x);
  DeviceTensor dw = Upload(backend, w, layer.w);
  DeviceTensor db = Upload(backend, b, layer.b);
  DeviceTensor dr = Upload(backend, r, layer.y);
  DeviceTensor y = Zeros(backend, layer.y);
  REQUIRE_OK(layer.forward(dx.view(), dw.view(), db.view(), y.view()));
  const auto xd = ToDouble(x), wd = ToDouble(w), bd = ToDouble(b);
  CHECK(MaxRelativeDifference(Download(backend, y.view()),
                              layer.reference(xd, wd, bd)) < 1e-5);

  DeviceTensor gx = Zeros(backend, layer.x);
  DeviceTensor gw = Zeros(backend, layer.w);
  DeviceTensor gb = Zeros(backend, layer.b);
  REQUIRE_OK(layer.backward_data(dr.view(), dw.view(), gx.view()));
  REQUIRE_OK(layer.backward_params(dx.view(), dr.view(), gw.view(), gb.view()));
  // The scalar sum(r * y): its gradient is what the backward passes got r
  // for.
  auto ex = CompareGradient(
      [&](const auto& v) { return Dot(layer.reference(v, wd, bd), r); }, xd,
      Download(backend, gx.view()));
  INFO("dx " << ex.ToString());
  CHECK(ex.relative() < tolerance);
  auto ew = CompareGradient(
      [&](const auto& v) { return Dot(layer.reference(xd, v, bd), r); }, wd,
      Download(backend, gw.view()));
  INFO("dw " << ew.ToString());
  CHECK(ew.relative() < tolerance);
  auto eb = CompareGradient(
      [&](const auto& v) { return Dot(layer.reference(xd, wd, v), r); }, bd,
      Download(backend, gb.view()));
  INFO("db " << eb.ToString());
  CHECK(eb.relative() < tolerance);
}

}  // namespace testing
}  // namespace psgd
