// The dynamic-batching server: batch times worked by hand, the batching rule on cases with a
// known answer, and queueing theory (M/D/1) for the waits.
#include "sim/batchserve/batch_server.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "sim/batchserve/batch_cost.h"
#include "sim/core/error.h"
#include "sim/hardware/card.h"
#include "sim/llm/model_spec.h"
#include "tests/support/catalogues.h"

using namespace capsim;

namespace {

constexpr auto& catalogue = capsim_test::card_catalogue;

// A cost whose batch of n takes n x `item_s` (pure compute) plus `overhead_s`.
BatchCost linear_cost(double item_s, double overhead_s) {
  BatchCost c;
  c.flops_per_item = item_s * 1e12;
  c.compute_rate = 1e12;
  c.weight_bytes = 0;
  c.memory_rate = 1;
  c.overhead_s = overhead_s;
  return c;
}

}  // namespace

TEST_CASE("batch-serve: one batch's time is the roofline 2-norm plus the overhead, by hand",
          "[batchserve]") {
  // A model of 1 TFLOP per item reading 1 GB of weights per batch, fp16 on a T4 (65 TFLOPS,
  // efficiency 0.55; 320 GB/s, efficiency 0.75; calibration/cards/t4.yaml), 1 ms overhead:
  //   compute 1e12 / (65e12 x 0.55) = 27.972028 ms, memory 1e9 / (320e9 x 0.75) = 4.166667 ms,
  //   t(1) = sqrt(27.972028^2 + 4.166667^2) + 1 = 28.280655 + 1 = 29.280655 ms.
  const BatchCost c =
      make_batch_cost(generic_item_work(1e12, 1e9), catalogue().find("t4"), Precision::kFp16, 1e-3);
  CHECK(c.compute_seconds(1) == Approx(0.027972028).epsilon(1e-8));
  CHECK(c.memory_seconds() == Approx(1.0 / 240).epsilon(1e-12));
  CHECK(c.seconds(1) == Approx(0.029280655).epsilon(1e-8));
  // Eight items: compute 223.776224 ms, memory unchanged: sqrt(223.776224^2 + 4.166667^2) + 1
  // = 224.815012 ms; the weights are read once per batch, so items per second rise from 34.15
  // to 35.58 (compute dominates: batching buys little here).
  CHECK(c.seconds(8) == Approx(0.224815012).epsilon(1e-8));
  CHECK(c.throughput(8) > c.throughput(1));
}

TEST_CASE("batch-serve: BERT-base FLOPs and bytes per item, by hand", "[batchserve]") {
  const ModelSpec bert = capsim_test::model_catalogue().find("bert-base-uncased");
  // Per layer: attention 4 x 768^2 + 4 x 768 biases = 2,362,368; MLP 2 x 768 x 3072 + 3072 +
  // 768 = 4,722,432; 12 layers: 85,017,600 matmul parameters.
  // FLOPs at 128 tokens: 2 x 85,017,600 x 128 = 21,764,505,600 plus attention
  // 4 x 12 x 768 x 128^2 = 603,979,776: 22,368,485,376.
  const ItemWork w = encoder_item_work(bert, 128, Precision::kFp32);
  CHECK(w.flops_per_item == Approx(22'368'485'376.0));
  CHECK(w.weight_bytes == Approx(85'017'600.0 * 4));
  // The whole model in fp32 is the guide's "440 MB"; in int8 its "110 MB".
  CHECK(w.model_bytes / 1e6 == Approx(437.9).margin(0.1));
  CHECK(encoder_item_work(bert, 128, Precision::kInt8).model_bytes / 1e6 ==
        Approx(109.5).margin(0.1));
}

TEST_CASE("batch-serve: a lone item's latency is one batch of one, or max-delay more",
          "[batchserve]") {
  BatchServeConfig c;
  c.cost = make_batch_cost(generic_item_work(1e12, 1e9), catalogue().find("t4"), Precision::kFp16,
                           1e-3);  // t(1) = 29.280655 ms, above
  c.rate = 1.0;
  c.requests = 1;
  c.max_batch = 1;  // a batch of one is full at once
  c.max_delay_s = 0.010;
  BatchServeResult r = simulate_batch_serving(c);
  REQUIRE(r.items == 1);
  CHECK(r.latency_s.max() == Approx(0.029280655).margin(1e-9));
  CHECK(r.wait_s.max() == 0);
  c.max_batch = 8;  // not full: with no delay allowed it starts at once
  c.max_delay_s = 0;
  r = simulate_batch_serving(c);
  CHECK(r.latency_s.max() == Approx(0.029280655).margin(1e-9));
  c.max_delay_s = 0.010;  // not full: it waits the 10 ms for company that never comes
  r = simulate_batch_serving(c);
  CHECK(r.wait_s.max() == Approx(0.010).margin(1e-9));
  CHECK(r.latency_s.max() == Approx(0.039280655).margin(1e-9));
}

TEST_CASE("batch-serve: batches fill to max-batch under overload, stay single under light load",
          "[batchserve]") {
  BatchServeConfig c;
  c.cost = linear_cost(0.001, 0.010);  // t(n) = 10 ms + n ms; t(4) = 14 ms: 286 items/s
  c.max_batch = 4;
  c.max_delay_s = 0.005;
  c.rate = 2000;  // far above capacity: the queue always holds 4 or more
  c.requests = 20000;
  BatchServeResult r = simulate_batch_serving(c);
  CHECK(r.items == 20000);
  CHECK(r.mean_batch() > 3.99);
  CHECK(r.utilisation() > 0.99);
  // Light load: one item per 100 s on average; each waits the full 5 ms alone, then 11 ms.
  c.rate = 0.01;
  c.requests = 1000;
  r = simulate_batch_serving(c);
  CHECK(r.mean_batch() < 1.01);
  CHECK(r.wait_s.median() == Approx(0.005).margin(1e-9));
  CHECK(r.latency_s.median() == Approx(0.016).margin(1e-9));
}

TEST_CASE("batch-serve: with max-batch 1 the mean wait matches M/D/1 (Pollaczek-Khinchine)",
          "[batchserve]") {
  // One server, Poisson arrivals, deterministic service D = 10 ms, rate 50/s: rho = 0.5.
  // Pollaczek-Khinchine for M/D/1: Wq = rho x D / (2 (1 - rho)) = 0.5 x 10 ms / 1 = 5 ms, and
  // the mean latency is Wq + D = 15 ms.
  BatchServeConfig c;
  c.cost = linear_cost(0.010, 0);
  c.max_batch = 1;
  c.max_delay_s = 0;
  c.rate = 50;
  c.requests = 200000;
  c.seed = 7;
  const BatchServeResult r = simulate_batch_serving(c);
  REQUIRE(r.items == 200000);
  CHECK(simulate_batch_serving(c).wait_s.mean() == r.wait_s.mean());  // same seed, same run

  // The tolerance, from the data: successive waits are correlated, so the standard error of a
  // 200,000-item mean is estimated from 40 independent replications of 5,000 items (different
  // seeds; together 200,000 items): SE = sd(replication means) / sqrt(40). It comes out near
  // 0.05 ms (1% of Wq). The long run must lie within 4 SE of the theory (a 1-in-15,000 chance
  // of failing by luck for a correct simulator), and the run must be long enough that 4 SE is
  // under 8% of Wq.
  constexpr int kReps = 40;
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < kReps; ++i) {
    BatchServeConfig rep = c;
    rep.requests = 5000;
    rep.seed = 1000 + static_cast<std::uint64_t>(i);
    const double m = simulate_batch_serving(rep).wait_s.mean();
    sum += m;
    sum_sq += m * m;
  }
  const double grand = sum / kReps;
  const double sd = std::sqrt((sum_sq - kReps * grand * grand) / (kReps - 1));
  const double se = sd / std::sqrt(static_cast<double>(kReps));
  const double wq = 0.005;
  INFO("long-run mean wait " << r.wait_s.mean() << " s, replications " << grand << " s, SE " << se);
  CHECK(4 * se < 0.08 * wq);
  CHECK(std::fabs(r.wait_s.mean() - wq) <= 4 * se);
  // Each replication starts empty, which biases its mean low by the few waits of the warm-up
  // (a busy period lasts D / (1 - rho) = 20 ms, two items): far below one SE.
  CHECK(std::fabs(grand - wq) <= 4 * se);
  CHECK(r.latency_s.mean() == Approx(wq + 0.010).epsilon(0.02));
  CHECK(r.utilisation() == Approx(0.5).epsilon(0.02));
}
