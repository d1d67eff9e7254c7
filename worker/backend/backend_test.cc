// The backend interface's entries (backend.h) over a fake implementation
// that counts its calls: every call of every op and of the backend, with
// its arguments of the plan's shapes, runs the implementation once; with
// any one argument of another shape it is INVALID_ARGUMENT naming that
// argument (op_shapes.h's texts) and the implementation does not run. Also
// the loss's labels, batch norm's y (checked only with its fused ReLU), and
// the backend's element-wise calls, copies and allocation.
#include "worker/backend/backend.h"

#include <catch2/catch.hpp>
#include <functional>
#include <string>
#include <vector>

namespace psgd {
namespace {

int calls = 0;  // implementation calls so far

absl::Status Ran() {
  ++calls;
  return absl::OkStatus();
}

// Views without memory: the entries read shapes only, the fakes nothing.
DeviceView View(const Shape& s) { return DeviceView(nullptr, s); }

// The fake of an op whose shape type is S; the ops below add their calls.
template <typename Op, typename S>
class Fake : public Op {
 public:
  explicit Fake(const S& s) : shape_(s) {}
  const S& shape() const override { return shape_; }

 private:
  const S shape_;
};

// Max pooling and LRN: the same two calls.
template <typename Op, typename S>
class FakeTwoCalls : public Fake<Op, S> {
 public:
  using Fake<Op, S>::Fake;

 private:
  absl::Status DoForward(ConstDeviceView, DeviceView) override { return Ran(); }
  absl::Status DoBackward(ConstDeviceView, ConstDeviceView, ConstDeviceView,
                          DeviceView) override {
    return Ran();
  }
};
using FakePool = FakeTwoCalls<MaxPoolOp, PoolShape>;
using FakeLrn = FakeTwoCalls<LrnOp, LrnShape>;

// Convolution and dense: the same forward and data gradient.
template <typename Op, typename S>
class FakeWeighted : public Fake<Op, S> {
 public:
  using Fake<Op, S>::Fake;

 private:
  absl::Status DoForward(ConstDeviceView, ConstDeviceView, ConstDeviceView,
                         DeviceView) override {
    return Ran();
  }
  absl::Status DoBackwardData(ConstDeviceView, ConstDeviceView,
                              DeviceView) override {
    return Ran();
  }
};

class FakeConv : public FakeWeighted<Conv2dOp, Conv2dShape> {
 public:
  using FakeWeighted::FakeWeighted;

 private:
  absl::Status DoBackwardFilter(ConstDeviceView, ConstDeviceView, DeviceView,
                                DeviceView) override {
    return Ran();
  }
};

class FakeDense : public FakeWeighted<DenseOp, DenseShape> {
 public:
  using FakeWeighted::FakeWeighted;

 private:
  absl::Status DoBackwardWeights(ConstDeviceView, ConstDeviceView, DeviceView,
                                 DeviceView) override {
    return Ran();
  }
};

class FakeBatchNorm : public Fake<BatchNormOp, BatchNormShape> {
 public:
  using Fake::Fake;

 private:
  absl::Status DoForwardTraining(ConstDeviceView, ConstDeviceView,
                                 ConstDeviceView, DeviceView, DeviceView,
                                 DeviceView, DeviceView, DeviceView) override {
    return Ran();
  }
  absl::Status DoForwardInference(ConstDeviceView, ConstDeviceView,
                                  ConstDeviceView, ConstDeviceView,
                                  ConstDeviceView, DeviceView) override {
    return Ran();
  }
  absl::Status DoBackward(ConstDeviceView, ConstDeviceView, ConstDeviceView,
                          ConstDeviceView, ConstDeviceView, ConstDeviceView,
                          DeviceView, DeviceView, DeviceView) override {
    return Ran();
  }
};

class FakeXent : public Fake<SoftmaxCrossEntropyOp, SoftmaxCrossEntropyShape> {
 public:
  using Fake::Fake;

 private:
  absl::StatusOr<CrossEntropyResult> DoRun(ConstDeviceView,
                                           absl::Span<const int32_t>,
                                           DeviceView) override {
    ++calls;
    return CrossEntropyResult();
  }
};

class FakeBackend : public Backend {
 public:
  std::string name() const override { return "fake"; }
  absl::Status Synchronize() override { return absl::OkStatus(); }
  absl::StatusOr<std::unique_ptr<Conv2dOp>> CreateConv2d(
      const Conv2dShape&) override {
    return absl::UnimplementedError("fake");
  }
  absl::StatusOr<std::unique_ptr<MaxPoolOp>> CreateMaxPool(
      const PoolShape&) override {
    return absl::UnimplementedError("fake");
  }
  absl::StatusOr<std::unique_ptr<LrnOp>> CreateLrn(const LrnShape&) override {
    return absl::UnimplementedError("fake");
  }
  absl::StatusOr<std::unique_ptr<DenseOp>> CreateDense(
      const DenseShape&) override {
    return absl::UnimplementedError("fake");
  }
  absl::StatusOr<std::unique_ptr<SoftmaxCrossEntropyOp>>
  CreateSoftmaxCrossEntropy(const SoftmaxCrossEntropyShape&) override {
    return absl::UnimplementedError("fake");
  }
  absl::StatusOr<std::unique_ptr<BatchNormOp>> CreateBatchNorm(
      const BatchNormShape&) override {
    return absl::UnimplementedError("fake");
  }

 private:
  absl::StatusOr<DeviceTensor> DoAllocate(const Shape&) override {
    ++calls;
    return DeviceTensor();
  }
  absl::Status DoCopyToDevice(ConstTensorView, DeviceView) override {
    return Ran();
  }
  absl::Status DoCopyToHost(ConstDeviceView, TensorView) override {
    return Ran();
  }
  absl::Status DoReluForward(ConstDeviceView, DeviceView) override {
    return Ran();
  }
  absl::Status DoReluBackward(ConstDeviceView, ConstDeviceView,
                              DeviceView) override {
    return Ran();
  }
  absl::Status DoAdd(ConstDeviceView, ConstDeviceView, DeviceView) override {
    return Ran();
  }
  absl::Status DoAddRelu(ConstDeviceView, ConstDeviceView,
                         DeviceView) override {
    return Ran();
  }
  absl::Status DoCopy(ConstDeviceView, DeviceView) override { return Ran(); }
  absl::Status DoGlobalAvgPoolForward(ConstDeviceView, int64_t,
                                      DeviceView) override {
    return Ran();
  }
  absl::Status DoGlobalAvgPoolBackward(ConstDeviceView, int64_t,
                                       DeviceView) override {
    return Ran();
  }
  absl::StatusOr<double> DoL2WeightDecay(ConstDeviceView, float,
                                         DeviceView) override {
    ++calls;
    return 0.0;
  }
};

// One entry: its arguments' names and plan shapes, and the call on views of
// given shapes.
struct Entry {
  std::string name;
  std::vector<std::string> args;
  std::vector<Shape> shapes;
  std::function<absl::Status(const std::vector<Shape>&)> call;
};

// `s` with one more element along its first dimension ([] becomes [1]).
Shape Wrong(Shape s) {
  if (s.empty()) return {1};
  ++s[0];
  return s;
}

// The entry runs the implementation once on the plan's shapes, and refuses
// each argument of another shape, naming it, without running it. `says`:
// the text of a refusal, from the argument's name and shape.
void CheckEntry(const Entry& e,
                const std::function<std::string(const std::string& arg,
                                                const Shape& wrong)>& says) {
  INFO(e.name);
  REQUIRE(e.args.size() == e.shapes.size());
  int before = calls;
  CHECK(e.call(e.shapes).ok());
  CHECK(calls == before + 1);
  for (size_t k = 0; k < e.shapes.size(); ++k) {
    std::vector<Shape> shapes = e.shapes;
    shapes[k] = Wrong(shapes[k]);
    INFO("argument " << e.args[k] << " as " << ShapeToString(shapes[k]));
    before = calls;
    const absl::Status st = e.call(shapes);
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(st.message()),
               Catch::Contains(says(e.args[k], shapes[k])));
    CHECK(calls == before);
  }
}

// An op's text: "<op> <arg>: shape [..] but the plan is for [..]".
std::string OpSays(const std::string& arg, const Shape& wrong) {
  return arg + ": shape " + ShapeToString(wrong) + " but the plan is for";
}

TEST_CASE("every op call checks its arguments before the implementation") {
  Conv2dShape cs{2, 3, 5, 5, 4, 3, 3};
  FakeConv conv(cs);
  const Shape x = cs.input(), w = cs.filter(), b = cs.bias(), y = cs.output();
  CheckEntry({"conv forward",
              {"x", "w", "b", "y"},
              {x, w, b, y},
              [&](const std::vector<Shape>& s) {
                return conv.Forward(View(s[0]), View(s[1]), View(s[2]),
                                    View(s[3]));
              }},
             OpSays);
  CheckEntry({"conv backward data",
              {"dy", "w", "dx"},
              {y, w, x},
              [&](const std::vector<Shape>& s) {
                return conv.BackwardData(View(s[0]), View(s[1]), View(s[2]));
              }},
             OpSays);
  CheckEntry({"conv backward filter",
              {"x", "dy", "dw", "db"},
              {x, y, w, b},
              [&](const std::vector<Shape>& s) {
                return conv.BackwardFilter(View(s[0]), View(s[1]), View(s[2]),
                                           View(s[3]));
              }},
             OpSays);

  const PoolShape ps{2, 3, 5, 5, 3, 2};
  FakePool pool(ps);
  CheckEntry({"pool forward",
              {"x", "y"},
              {ps.input(), ps.output()},
              [&](const std::vector<Shape>& s) {
                return pool.Forward(View(s[0]), View(s[1]));
              }},
             OpSays);
  CheckEntry({"pool backward",
              {"x", "y", "dy", "dx"},
              {ps.input(), ps.output(), ps.output(), ps.input()},
              [&](const std::vector<Shape>& s) {
                return pool.Backward(View(s[0]), View(s[1]), View(s[2]),
                                     View(s[3]));
              }},
             OpSays);

  const LrnShape ls{2, 3, 5, 5, LrnParams()};
  FakeLrn lrn(ls);
  const Shape a = ls.input();
  CheckEntry({"lrn forward",
              {"x", "y"},
              {a, a},
              [&](const std::vector<Shape>& s) {
                return lrn.Forward(View(s[0]), View(s[1]));
              }},
             OpSays);
  CheckEntry({"lrn backward",
              {"x", "y", "dy", "dx"},
              {a, a, a, a},
              [&](const std::vector<Shape>& s) {
                return lrn.Backward(View(s[0]), View(s[1]), View(s[2]),
                                    View(s[3]));
              }},
             OpSays);

  const DenseShape ds{2, 6, 4};
  FakeDense dense(ds);
  CheckEntry({"dense forward",
              {"x", "w", "b", "y"},
              {ds.input(), ds.weights(), ds.bias(), ds.output()},
              [&](const std::vector<Shape>& s) {
                return dense.Forward(View(s[0]), View(s[1]), View(s[2]),
                                     View(s[3]));
              }},
             OpSays);
  CheckEntry({"dense backward data",
              {"dy", "w", "dx"},
              {ds.output(), ds.weights(), ds.input()},
              [&](const std::vector<Shape>& s) {
                return dense.BackwardData(View(s[0]), View(s[1]), View(s[2]));
              }},
             OpSays);
  CheckEntry({"dense backward weights",
              {"x", "dy", "dw", "db"},
              {ds.input(), ds.output(), ds.weights(), ds.bias()},
              [&](const std::vector<Shape>& s) {
                return dense.BackwardWeights(View(s[0]), View(s[1]), View(s[2]),
                                             View(s[3]));
              }},
             OpSays);
}

TEST_CASE(
    "batch norm's calls check every argument, y of the backward with "
    "its ReLU only") {
  BatchNormShape bs;
  bs.batch = 2;
  bs.channels = 3;
  bs.height = 4;
  bs.width = 4;
  bs.relu = true;
  FakeBatchNorm bn(bs);
  const Shape a = bs.input(), c = bs.params();
  CheckEntry({"forward training",
              {"x", "gamma", "beta", "y", "batch_mean", "batch_var",
               "running_mean", "running_var"},
              {a, c, c, a, c, c, c, c},
              [&](const std::vector<Shape>& s) {
                return bn.ForwardTraining(View(s[0]), View(s[1]), View(s[2]),
                                          View(s[3]), View(s[4]), View(s[5]),
                                          View(s[6]), View(s[7]));
              }},
             OpSays);
  CheckEntry({"forward inference",
              {"x", "gamma", "beta", "running_mean", "running_var", "y"},
              {a, c, c, c, c, a},
              [&](const std::vector<Shape>& s) {
                return bn.ForwardInference(View(s[0]), View(s[1]), View(s[2]),
                                           View(s[3]), View(s[4]), View(s[5]));
              }},
             OpSays);
  const auto backward = [](BatchNormOp& op, const std::vector<Shape>& s) {
    return op.Backward(View(s[0]), View(s[1]), View(s[2]), View(s[3]),
                       View(s[4]), View(s[5]), View(s[6]), View(s[7]),
                       View(s[8]));
  };
  CheckEntry({"backward",
              {"x", "y", "dy", "gamma", "batch_mean", "batch_var", "dx",
               "dgamma", "dbeta"},
              {a, a, a, c, c, c, a, c, c},
              [&](const std::vector<Shape>& s) { return backward(bn, s); }},
             OpSays);
  // Without the ReLU the backward does not read y.
  bs.relu = false;
  FakeBatchNorm plain(bs);
  const int before = calls;
  CHECK(backward(plain, {a, Wrong(a), a, c, c, c, a, c, c}).ok());
  CHECK(calls == before + 1);
}

TEST_CASE("the loss checks its shapes and its labels before running") {
  const SoftmaxCrossEntropyShape ss{2, 5};
  FakeXent xent(ss);
  std::vector<int32_t> labels = {1, 4};
  CheckEntry({"loss",
              {"logits", "dlogits"},
              {ss.logits(), ss.logits()},
              [&](const std::vector<Shape>& s) {
                return xent.Run(View(s[0]), labels, View(s[1])).status();
              }},
             OpSays);
  const int before = calls;
  const DeviceView l = View(ss.logits());
  absl::Status st = xent.Run(l, {1, 4, 0}, l).status();
  CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(st.message()),
             Catch::Contains("3 labels for a batch of 2"));
  for (int32_t bad : {-1, 5}) {
    labels[1] = bad;
    st = xent.Run(l, labels, l).status();
    CHECK(st.code() == absl::StatusCode::kInvalidArgument);
    CHECK_THAT(std::string(st.message()),
               Catch::Contains("label " + std::to_string(bad) +
                               " of example 1 is outside [0, 5)"));
  }
  CHECK(calls == before);
}

TEST_CASE("the backend's element-wise calls check their shapes first") {
  FakeBackend be;
  const Shape a = {2, 8, 3, 3};
  // The element-wise texts name the op, not the argument.
  const auto says = [](const std::string& op) {
    return [op](const std::string&, const Shape&) { return op; };
  };
  CheckEntry({"add",
              {"a", "b", "y"},
              {a, a, a},
              [&](const std::vector<Shape>& s) {
                return be.Add(View(s[0]), View(s[1]), View(s[2]));
              }},
             says("add: shapes"));
  CheckEntry({"add relu",
              {"a", "b", "y"},
              {a, a, a},
              [&](const std::vector<Shape>& s) {
                return be.AddRelu(View(s[0]), View(s[1]), View(s[2]));
              }},
             says("add relu: shapes"));
  CheckEntry({"relu",
              {"x", "y"},
              {a, a},
              [&](const std::vector<Shape>& s) {
                return be.ReluForward(View(s[0]), View(s[1]));
              }},
             says("relu: shapes"));
  CheckEntry({"relu backward",
              {"y", "dy", "dx"},
              {a, a, a},
              [&](const std::vector<Shape>& s) {
                return be.ReluBackward(View(s[0]), View(s[1]), View(s[2]));
              }},
             says("relu backward: shapes"));
  CheckEntry({"l2 weight decay",
              {"w", "dw"},
              {a, a},
              [&](const std::vector<Shape>& s) {
                return be.L2WeightDecay(View(s[0]), 0.1f, View(s[1])).status();
              }},
             says("l2 weight decay: shapes"));
  CheckEntry({"copy",
              {"src", "dst"},
              {a, a},
              [&](const std::vector<Shape>& s) {
                return be.Copy(View(s[0]), View(s[1]));
              }},
             says("copy: "));
  // Copies between host and device check element counts only.
  Tensor host({2, 8, 3, 3});
  CheckEntry({"to device",
              {"dst"},
              {a},
              [&](const std::vector<Shape>& s) {
                return be.CopyToDevice(host.view(), View(s[0]));
              }},
             says("CopyToDevice: 144 elements into 216"));
  CheckEntry({"to host",
              {"src"},
              {a},
              [&](const std::vector<Shape>& s) {
                return be.CopyToHost(View(s[0]), host.view());
              }},
             says("CopyToHost: 216 elements into 144"));
  CheckEntry({"global average pooling",
              {"x", "y"},
              {a, {2, 8}},
              [&](const std::vector<Shape>& s) {
                return be.GlobalAvgPoolForward(View(s[0]), 8, View(s[1]));
              }},
             says("global average pooling: x"));
  CheckEntry({"global average pooling backward",
              {"dy", "dx"},
              {{2, 8}, a},
              [&](const std::vector<Shape>& s) {
                return be.GlobalAvgPoolBackward(View(s[0]), 8, View(s[1]));
              }},
             says("global average pooling: x"));
  // A channel block that does not divide the channels.
  int before = calls;
  CHECK(be.GlobalAvgPoolForward(View(a), 16, View({2, 8})).code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(calls == before);
  CHECK(be.Allocate({2, 3}).ok());
  CHECK(calls == before + 1);
  CHECK(be.Allocate({2, -3}).status().code() ==
        absl::StatusCode::kInvalidArgument);
  CHECK(calls == before + 1);
}

}  // namespace
}  // namespace psgd
