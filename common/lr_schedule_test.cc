#include "common/lr_schedule.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace psgd {
namespace {

TEST_CASE("no schedule: the factor is 1 at every update") {
  LrSchedule s;
  for (int64_t t : {1, 2, 1000}) CHECK(LrFactor(s, t) == 1.0);
}

TEST_CASE("linear warmup, then the linear scaling rule's factor") {
  LrSchedule s;
  s.scale = 4.0;
  s.warmup_steps = 10;
  s.warmup_from = 0.25;
  // t/10 of the way from 0.25*4 to 4.
  CHECK(LrFactor(s, 1) == Approx(4.0 * (0.25 + 0.75 * 0.1)));
  CHECK(LrFactor(s, 5) == Approx(4.0 * (0.25 + 0.75 * 0.5)));
  CHECK(LrFactor(s, 10) == Approx(4.0));
  CHECK(LrFactor(s, 11) == 4.0);
  CHECK(LrFactor(s, 5000) == 4.0);
}

TEST_CASE("step decay counts from the end of the warmup") {
  LrSchedule s;
  s.warmup_steps = 2;
  s.decay = LrSchedule::Decay::kStep;
  s.decay_every = 3;
  s.decay_factor = 0.5;
  CHECK(LrFactor(s, 3) == 1.0);    // u = 1
  CHECK(LrFactor(s, 4) == 1.0);    // u = 2
  CHECK(LrFactor(s, 5) == 0.5);    // u = 3
  CHECK(LrFactor(s, 8) == 0.25);   // u = 6
  CHECK(LrFactor(s, 10) == 0.25);  // u = 8
}

TEST_CASE("cosine decay from 1 to the final factor, then flat") {
  LrSchedule s;
  s.decay = LrSchedule::Decay::kCosine;
  s.decay_steps = 100;
  s.final_factor = 0.1;
  CHECK(LrFactor(s, 50) == Approx(0.1 + 0.9 * 0.5));
  CHECK(LrFactor(s, 25) == Approx(0.1 + 0.9 * (1 + std::cos(M_PI * 0.25)) / 2));
  CHECK(LrFactor(s, 100) == Approx(0.1));
  CHECK(LrFactor(s, 400) == Approx(0.1));
}

TEST_CASE("bad schedules are refused naming the field") {
  auto why = [](const LrSchedule& s, int64_t last = 0) {
    return std::string(ValidateLrSchedule(s, last).message());
  };
  LrSchedule s;
  CHECK(ValidateLrSchedule(s, 100).ok());
  s.warmup_steps = 200;
  CHECK(why(s, 100) ==
        "learning-rate schedule: warmup_steps is 200, goes past the last "
        "step 100");
  CHECK(ValidateLrSchedule(s, 0).ok());  // last step unknown
  s = LrSchedule();
  s.scale = 0;
  CHECK(why(s) ==
        "learning-rate schedule: scale is 0, must be positive and "
        "finite");
  s = LrSchedule();
  s.warmup_from = 1.5;
  CHECK(why(s).find("warmup_from") != std::string::npos);
  s = LrSchedule();
  s.decay = LrSchedule::Decay::kStep;
  CHECK(why(s).find("decay_every is 0") != std::string::npos);
  s.decay_every = 5;
  s.decay_factor = 0;
  CHECK(why(s).find("decay_factor") != std::string::npos);
  s = LrSchedule();
  s.decay = LrSchedule::Decay::kCosine;
  CHECK(why(s).find("decay_steps is 0") != std::string::npos);
  s.decay_steps = 10;
  s.final_factor = -0.1;
  CHECK(why(s).find("final_factor") != std::string::npos);
}

}  // namespace
}  // namespace psgd
