#include "worker/bench/op_profile.h"

#include <time.h>

#include <chrono>
#include <functional>
#include <vector>

#include "common/status_macros.h"

namespace psgd {
namespace {

// Allocates and fills a tensor with a fixed pattern (values in [-1, 1]).
absl::StatusOr<DeviceTensor> Filled(Backend* b, const Shape& shape) {
  ASSIGN_OR_RETURN(DeviceTensor t, b->Allocate(shape));
  Tensor host(shape);
  for (int64_t i = 0; i < host.size(); ++i) {
    host.data()[i] = static_cast<float>((i * 7919 % 2001) - 1000) / 1000.0f;
  }
  RETURN_IF_ERROR(b->CopyToDevice(host.view(), t.view()));
  return t;
}

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// Inputs, outputs and gradients of a layer y = f(x, w, b).
struct LayerBuffers {
  DeviceTensor x, w, b, y, dx, dw, db;

  static absl::StatusOr<LayerBuffers> Make(Backend* backend, const Shape& x,
                                           const Shape& w, const Shape& b,
                                           const Shape& y) {
    LayerBuffers t;
    ASSIGN_OR_RETURN(t.x, Filled(backend, x));
    ASSIGN_OR_RETURN(t.w, Filled(backend, w));
    ASSIGN_OR_RETURN(t.b, Filled(backend, b));
    ASSIGN_OR_RETURN(t.y, Filled(backend, y));
    ASSIGN_OR_RETURN(t.dx, Filled(backend, x));
    ASSIGN_OR_RETURN(t.dw, Filled(backend, w));
    ASSIGN_OR_RETURN(t.db, Filled(backend, b));
    return t;
  }
};

class Profiler {
 public:
  Profiler(Backend* backend, int reps) : backend_(backend), reps_(reps) {}

  absl::Status Time(const std::string& name,
                    const std::function<absl::Status()>& op) {
    RETURN_IF_ERROR(op());  // warm-up
    RETURN_IF_ERROR(backend_->Synchronize());
    const double cpu0 = CpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps_; ++r) RETURN_IF_ERROR(op());
    RETURN_IF_ERROR(backend_->Synchronize());
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    times_.push_back(
        {name, 1e3 * s / reps_, 1e3 * (CpuSeconds() - cpu0) / reps_});
    return absl::OkStatus();
  }

  std::vector<OpTime> times() const { return times_; }

 private:
  Backend* const backend_;
  const int reps_;
  std::vector<OpTime> times_;
};

}  // namespace

absl::StatusOr<std::vector<OpTime>> ProfileTutorialOps(Backend* b, int64_t n,
                                                       int reps) {
  Profiler p(b, reps);
  // conv1 on (n, 3, 24, 24), conv2 on (n, 64, 12, 12).
  for (const auto& [name, c, size, backward_data] :
       {std::tuple<const char*, int64_t, int64_t, bool>{"conv1", 3, 24, false},
        {"conv2", 64, 12, true}}) {
    const Conv2dShape s{n, c, size, size, 64, 5, 5};
    ASSIGN_OR_RETURN(auto op, b->CreateConv2d(s));
    ASSIGN_OR_RETURN(
        LayerBuffers t,
        LayerBuffers::Make(b, s.input(), s.filter(), s.bias(), s.output()));
    const std::string n_ = name;
    RETURN_IF_ERROR(p.Time(n_ + " forward", [&] {
      return op->Forward(t.x.view(), t.w.view(), t.b.view(), t.y.view());
    }));
    if (backward_data) {
      RETURN_IF_ERROR(p.Time(n_ + " backward data", [&] {
        return op->BackwardData(t.y.view(), t.w.view(), t.dx.view());
      }));
    }
    RETURN_IF_ERROR(p.Time(n_ + " backward filter", [&] {
      return op->BackwardFilter(t.x.view(), t.y.view(), t.dw.view(),
                                t.db.view());
    }));
    DeviceTensor& y = t.y;
    RETURN_IF_ERROR(p.Time(n_ + " relu forward+backward", [&] {
      RETURN_IF_ERROR(b->ReluForward(y.view(), y.view()));
      return b->ReluBackward(y.view(), y.view(), y.view());
    }));
  }
  for (const auto& [name, size] :
       {std::pair<const char*, int64_t>{"pool1", 24}, {"pool2", 12}}) {
    const PoolShape s{n, 64, size, size, 3, 2};
    ASSIGN_OR_RETURN(auto op, b->CreateMaxPool(s));
    ASSIGN_OR_RETURN(DeviceTensor x, Filled(b, s.input()));
    ASSIGN_OR_RETURN(DeviceTensor y, Filled(b, s.output()));
    ASSIGN_OR_RETURN(DeviceTensor dx, Filled(b, s.input()));
    const std::string n_ = name;
    RETURN_IF_ERROR(p.Time(n_ + " forward",
                           [&] { return op->Forward(x.view(), y.view()); }));
    RETURN_IF_ERROR(p.Time(n_ + " backward", [&] {
      return op->Backward(x.view(), y.view(), y.view(), dx.view());
    }));
  }
  {
    const LrnShape s{n, 64, 12, 12, LrnParams()};
    ASSIGN_OR_RETURN(auto op, b->CreateLrn(s));
    ASSIGN_OR_RETURN(DeviceTensor x, Filled(b, s.input()));
    ASSIGN_OR_RETURN(DeviceTensor y, Filled(b, s.input()));
    ASSIGN_OR_RETURN(DeviceTensor dx, Filled(b, s.input()));
    RETURN_IF_ERROR(p.Time("lrn forward (x2 in the model)",
                           [&] { return op->Forward(x.view(), y.view()); }));
    RETURN_IF_ERROR(p.Time("lrn backward (x2 in the model)", [&] {
      return op->Backward(x.view(), y.view(), y.view(), dx.view());
    }));
  }
  for (const auto& [name, in, out] :
       {std::tuple<const char*, int64_t, int64_t>{"local3", 2304, 384},
        {"local4", 384, 192},
        {"softmax_linear", 192, 10}}) {
    const DenseShape s{n, in, out};
    ASSIGN_OR_RETURN(auto op, b->CreateDense(s));
    ASSIGN_OR_RETURN(
        LayerBuffers t,
        LayerBuffers::Make(b, s.input(), s.weights(), s.bias(), s.output()));
    const std::string n_ = name;
    RETURN_IF_ERROR(p.Time(n_ + " forward+backward", [&] {
      RETURN_IF_ERROR(
          op->Forward(t.x.view(), t.w.view(), t.b.view(), t.y.view()));
      RETURN_IF_ERROR(op->BackwardData(t.y.view(), t.w.view(), t.dx.view()));
      return op->BackwardWeights(t.x.view(), t.y.view(), t.dw.view(),
                                 t.db.view());
    }));
  }
  return p.times();
}

}  // namespace psgd
