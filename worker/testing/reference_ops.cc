#include "worker/testing/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace psgd {
namespace reference {

Vec Conv2d(const Conv2dShape& s, const Vec& x, const Vec& w, const Vec& b) {
  const SamePadding ph = s.pad_h();
  const SamePadding pw = s.pad_w();
  Vec y(s.batch * s.out_channels * ph.output * pw.output);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t o = 0; o < s.out_channels; ++o)
      for (int64_t h = 0; h < ph.output; ++h)
        for (int64_t v = 0; v < pw.output; ++v) {
          double sum = s.has_bias ? b[o] : 0.0;
          for (int64_t c = 0; c < s.in_channels; ++c)
            for (int64_t kh = 0; kh < s.kernel_h; ++kh)
              for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
                const int64_t ih = h * s.stride + kh - ph.before;
                const int64_t iw = v * s.stride + kw - pw.before;
                if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width)
                  continue;
                sum +=
                    x[((n * s.in_channels + c) * s.height + ih) * s.width +
                      iw] *
                    w[((o * s.in_channels + c) * s.kernel_h + kh) * s.kernel_w +
                      kw];
              }
          y[((n * s.out_channels + o) * ph.output + h) * pw.output + v] = sum;
        }
  return y;
}

Vec BatchNormTraining(const BatchNormShape& s, const Vec& x, const Vec& gamma,
                      const Vec& beta, Vec* mean, Vec* var) {
  const int64_t plane = s.height * s.width;
  const double m = static_cast<double>(s.batch * plane);
  Vec mu(s.channels, 0.0), sigma2(s.channels, 0.0);
  for (int64_t c = 0; c < s.channels; ++c) {
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t i = 0; i < plane; ++i)
        mu[c] += x[(n * s.channels + c) * plane + i];
    mu[c] /= m;
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t i = 0; i < plane; ++i) {
        const double d = x[(n * s.channels + c) * plane + i] - mu[c];
        sigma2[c] += d * d;
      }
    sigma2[c] /= m;
  }
  Vec y = BatchNormInference(s, x, gamma, beta, mu, sigma2);
  if (mean != nullptr) *mean = mu;
  if (var != nullptr) *var = sigma2;
  return y;
}

Vec BatchNormInference(const BatchNormShape& s, const Vec& x, const Vec& gamma,
                       const Vec& beta, const Vec& mean, const Vec& var) {
  const int64_t plane = s.height * s.width;
  Vec y(x.size());
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c) {
      const double scale = gamma[c] / std::sqrt(var[c] + s.epsilon);
      for (int64_t i = 0; i < plane; ++i) {
        const int64_t k = (n * s.channels + c) * plane + i;
        y[k] = (x[k] - mean[c]) * scale + beta[c];
        if (s.relu) y[k] = std::max(y[k], 0.0);
      }
    }
  return y;
}

Vec GlobalAvgPool(int64_t rows, int64_t inner, const Vec& x) {
  Vec y(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < inner; ++i) y[r] += x[r * inner + i];
    y[r] /= static_cast<double>(inner);
  }
  return y;
}

Vec MaxPool(const PoolShape& s, const Vec& x) {
  const SamePadding ph = ComputeSamePadding(s.height, s.window, s.stride);
  const SamePadding pw = ComputeSamePadding(s.width, s.window, s.stride);
  Vec y(s.batch * s.channels * ph.output * pw.output);
  for (int64_t p = 0; p < s.batch * s.channels; ++p)
    for (int64_t oh = 0; oh < ph.output; ++oh)
      for (int64_t ow = 0; ow < pw.output; ++ow) {
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < s.window; ++i)
          for (int64_t j = 0; j < s.window; ++j) {
            const int64_t h = oh * s.stride - ph.before + i;
            const int64_t v = ow * s.stride - pw.before + j;
            if (h < 0 || h >= s.height || v < 0 || v >= s.width) continue;
            m = std::max(m, x[(p * s.height + h) * s.width + v]);
          }
        y[(p * ph.output + oh) * pw.output + ow] = m;
      }
  return y;
}

Vec Lrn(const LrnShape& s, const Vec& x) {
  const LrnParams& q = s.params;
  Vec y(x.size());
  const int64_t plane = s.height * s.width;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      for (int64_t i = 0; i < plane; ++i) {
        double sqr_sum = 0.0;
        for (int64_t k = c - q.depth_radius; k <= c + q.depth_radius; ++k) {
          if (k < 0 || k >= s.channels) continue;
          const double v = x[(n * s.channels + k) * plane + i];
          sqr_sum += v * v;
        }
        const int64_t at = (n * s.channels + c) * plane + i;
        y[at] = x[at] / std::pow(double{q.bias} + double{q.alpha} * sqr_sum,
                                 double{q.beta});
      }
  return y;
}

Vec Relu(const Vec& x) {
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = std::max(x[i], 0.0);
  return y;
}

Vec Dense(const DenseShape& s, const Vec& x, const Vec& w, const Vec& b) {
  Vec y(s.batch * s.outputs);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t m = 0; m < s.outputs; ++m) {
      double sum = b[m];
      for (int64_t k = 0; k < s.inputs; ++k) {
        sum += x[n * s.inputs + k] * w[k * s.outputs + m];
      }
      y[n * s.outputs + m] = sum;
    }
  return y;
}

double SoftmaxCrossEntropy(int64_t batch, int64_t classes, const Vec& logits,
                           const std::vector<int32_t>& labels) {
  double total = 0.0;
  for (int64_t n = 0; n < batch; ++n) {
    const double* row = logits.data() + n * classes;
    const double max = *std::max_element(row, row + classes);
    double sum = 0.0;
    for (int64_t k = 0; k < classes; ++k) sum += std::exp(row[k] - max);
    total += std::log(sum) + max - row[labels[n]];
  }
  return total / static_cast<double>(batch);
}

double L2Loss(const Vec& w) {
  double sum = 0.0;
  for (double v : w) sum += v * v;
  return sum / 2.0;
}

}  // namespace reference
}  // namespace psgd
