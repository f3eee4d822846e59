// Measured attention tables (sim/hardware/measured_attention.h), their use by the roofline cost
// model, and the per-engine switch (docs/cost-model.md#measured-kernels). The numbers are worked
// by hand from rows of calibration/kernels/h100-sxm/attention_decode-bf16.csv, -fp8.csv and
// attention_prefill-bf16.csv (AIConfigurator, vLLM 0.24.0, H100 SXM), quoted where used.
#include "sim/hardware/measured_attention.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "sim/core/error.h"
#include "sim/cost/batch_shape.h"
#include "sim/cost/roofline_cost.h"
#include "sim/hardware/card.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/model_spec.h"
#include "tests/cost/breakdown_groups.h"
#include "tests/support/catalogues.h"
#include "tests/support/temp_dir.h"

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace {

using namespace capsim;
using capsim::test::group;
using capsim_test::TempDir;

std::string data_dir() { return CAPSIM_DATA_DIR; }

const MeasuredAttentionTable& h100_decode() {
  static const MeasuredAttentionTable t =
      MeasuredAttentionTable::load(data_dir() + "/calibration/kernels/h100-sxm/attention_decode-bf16.csv");
  return t;
}

// A memory-bound roofline: KV bytes read, in arbitrary units (only its ratios matter), each
// query reaching at most `window` keys. It makes the carried times easy to work by hand.
double kv_read(const AttentionShape& s) {
  const double keys = s.window > 0 ? std::min(s.length, s.window) : s.length;
  return s.batch * keys * s.kv_heads * s.head_dim;
}

AttentionShape shape(double batch, double length, double heads, double kv_heads, double head_dim,
                     double window = 0) {
  AttentionShape s;
  s.batch = batch;
  s.length = length;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.window = window;
  return s;
}

// The process override off, so that the engine's field decides (the environment variable is
// read only when no override is set: this keeps CAPSIM_MEASURED_KERNELS in a developer's shell
// out of the tests); restored to "never set" after.
struct Override {
  explicit Override(bool on) { MeasuredKernels::set_enabled(on); }
  ~Override() { MeasuredKernels::clear_override(); }
};

Deployment llama_8b_h100(Precision kv = Precision::kBf16, bool engine_measured = false) {
  Deployment d;
  d.model = capsim_test::model_catalogue().find("llama-3.1-8b");
  d.card = capsim_test::card_catalogue().find("h100-sxm");
  d.engine = capsim_test::engine_catalogue().find("vllm");
  d.engine.measured_kernels = engine_measured;
  d.tp = 1;
  d.weights = Precision::kBf16;
  d.kv_cache = kv;
  d.limits = default_limits(d.card, d.engine);
  d.validate();
  return d;
}

}  // namespace

TEST_CASE("a measured attention shape's time is its table row", "[kernels][attention]") {
  // Row "8,1024,32,8,128,0,18.23": Llama-3.1-8B's layout at TP 1, batch 8, context 1024.
  CHECK(h100_decode().seconds(shape(8, 1024, 32, 8, 128), kv_read) == Approx(18.23e-6).epsilon(1e-9));
  CHECK(h100_decode().covers(shape(8, 1024, 32, 8, 128)));
  CHECK(h100_decode().decode());
  CHECK(h100_decode().info().dtype == "bf16");
  CHECK(h100_decode().info().kernel == "vllm_flash_attn_fa3");
  // A sliding-window layout measured as such: row "8,8192,32,8,128,128,14.2".
  CHECK(h100_decode().seconds(shape(8, 8192, 32, 8, 128, 128), kv_read) == Approx(14.2e-6).epsilon(1e-9));
}

TEST_CASE("between measured batches and contexts attention time is interpolated log-log", "[kernels][attention]") {
  // Rows 8,1024 -> 18.23 us and 8,2048 -> 40.44 us; at the log midpoint sqrt(1024 x 2048) the
  // time is the geometric mean sqrt(18.23 x 40.44) = 27.1518 us.
  CHECK(h100_decode().seconds(shape(8, std::sqrt(1024.0 * 2048.0), 32, 8, 128), kv_read) ==
        Approx(27.1518e-6).epsilon(1e-5));
  // Rows 8,1024 -> 18.23 and 16,1024 -> 36.1 us; at batch sqrt(8 x 16): sqrt(18.23 x 36.1) = 25.6535 us.
  CHECK(h100_decode().seconds(shape(std::sqrt(8.0 * 16.0), 1024, 32, 8, 128), kv_read) ==
        Approx(25.6535e-6).epsilon(1e-5));
  CHECK(h100_decode().covers(shape(std::sqrt(8.0 * 16.0), 1024, 32, 8, 128)));
}

TEST_CASE("outside the measured attention range the nearest measurement is carried by the roofline",
          "[kernels][attention]") {
  // Batch 4096 > 2048, the largest measured: row 2048,128 -> 486 us x kv_read(4096) /
  // kv_read(2048) = 972 us.
  CHECK_FALSE(h100_decode().covers(shape(4096, 128, 32, 8, 128)));
  CHECK(h100_decode().seconds(shape(4096, 128, 32, 8, 128), kv_read) == Approx(972e-6).epsilon(1e-9));
  // Context 131072 > 65536, batch 1's longest: row 1,65536 -> 117.1 us x 2 = 234.2 us.
  CHECK(h100_decode().seconds(shape(1, 131072, 32, 8, 128), kv_read) == Approx(234.2e-6).epsilon(1e-9));
  // 32 heads / 6 KV heads x 128 is not measured: the nearest head_dim-128 full-attention layout
  // in |ln heads ratio| + |ln kv ratio| is 32/8 (ln 8/6 = 0.288 beats 32/4's ln 6/4 = 0.405);
  // row 8,1024 -> 18.23 us x 6/8 = 13.6725 us.
  const AttentionShape gqa6 = shape(8, 1024, 32, 6, 128);
  const auto& l = h100_decode().layout(h100_decode().nearest_layout(gqa6));
  CHECK(l.heads == 32);
  CHECK(l.kv_heads == 8);
  CHECK_FALSE(h100_decode().covers(gqa6));
  CHECK(h100_decode().seconds(gqa6, kv_read) == Approx(13.6725e-6).epsilon(1e-9));
  // A window of 4096 is not measured for 32/8 x 128: the full-attention rows, carried by the
  // roofline's window: row 8,8192 -> 100.5 us x 4096/8192 = 50.25 us.
  CHECK(h100_decode().seconds(shape(8, 8192, 32, 8, 128, 4096), kv_read) == Approx(50.25e-6).epsilon(1e-9));
}

TEST_CASE("a bad attention table is refused with its file, line and what is accepted", "[kernels][attention]") {
  TempDir dir;
  const std::string header =
      "# capsim measured-kernel table: 1\n# op: attention_decode\n# dtype: bf16\n# card: h100-sxm\n"
      "# framework: vllm 0.24.0\n# source: test\n# unit: us\n";
  const auto write = [&](const std::string& name, const std::string& text) {
    const std::string path = dir.path() + "/" + name;
    std::ofstream(path) << text;
    return path;
  };
  const std::string wrong_length = write("a.csv", header + "batch,tokens,heads,kv_heads,head_dim,us\n1,2,2,1,128,10\n");
  CHECK_THROWS_WITH(MeasuredAttentionTable::load(wrong_length),
                    wrong_length + ":8: unknown column 'tokens'; an attention_decode table has batch, context, "
                                   "heads, kv_heads, head_dim, window (optional), us");
  const std::string negative = write("b.csv", header + "batch,context,heads,kv_heads,head_dim,window,us\n1,2,2,1,128,-1,10\n");
  CHECK_THROWS_WITH(MeasuredAttentionTable::load(negative), negative + ":9: window '-1' is not a non-negative number");
  const std::string kv_int8 = write("c.csv", "# capsim measured-kernel table: 1\n# op: attention_prefill\n# dtype: int8\n"
                                             "# card: h100-sxm\n# framework: vllm 0.24.0\n# source: test\n# unit: us\n"
                                             "batch,tokens,heads,kv_heads,head_dim,us\n1,2,2,1,128,10\n");
  CHECK_THROWS_WITH(MeasuredAttentionTable::load(kv_int8),
                    kv_int8 + ": dtype 'int8' is not supported for attention (the KV cache's); accepted: bf16, fp8");
}

TEST_CASE("an attention shape measured twice is read as the geometric mean of its times", "[kernels][attention]") {
  // AIConfigurator's A100 prefill database times some MHA shapes twice and records no window:
  // rows "1,1,2,2,128,NaN,10.9" and "1,1,2,2,128,NaN,10.63" -> sqrt(10.9 x 10.63) = 10.7641 us,
  // full attention.
  const MeasuredAttentionTable a100 =
      MeasuredAttentionTable::load(data_dir() + "/calibration/kernels/a100-80gb-sxm/attention_prefill-bf16.csv");
  CHECK(a100.seconds(shape(1, 1, 2, 2, 128), kv_read) == Approx(10.7641e-6).epsilon(1e-5));
  CHECK(a100.covers(shape(1, 1, 2, 2, 128)));
}

TEST_CASE("a decode step's attention is the table's time per layer times the layers", "[kernels][attention]") {
  // Llama-3.1-8B on one H100, 8 decodes at context 1024: 32 layers x row 8,1024 (18.23 us)
  // = 583.36 us; with an fp8 KV cache the fp8 table's row 8,1024,32,8,128,0 (19.62 us) x 32 =
  // 627.84 us.
  BatchShape b;
  for (int i = 0; i < 8; ++i) b.add_decode(1024);
  const Override on(true);
  {
    const RooflineCost cost(llama_8b_h100());
    const auto breakdown = cost.breakdown(b);  // kept alive: `attention` refers into it
    const OperatorCost& attention = group(breakdown, "attention_decode");
    CHECK(attention.seconds == Approx(583.36e-6).epsilon(1e-9));
    CHECK(attention.measured);
    CHECK(cost.attention_source() == "measured: h100-sxm vllm 0.24.0 attention tables (bf16 KV; decode, prefill)");
  }
  {
    const RooflineCost cost(llama_8b_h100(Precision::kFp8));
    CHECK(group(cost.breakdown(b), "attention_decode").seconds == Approx(627.84e-6).epsilon(1e-9));
    CHECK(cost.attention_source() == "measured: h100-sxm vllm 0.24.0 attention tables (fp8 KV; decode, prefill)");
  }
}

TEST_CASE("a prefill chunk's attention is the prefill table's time per layer times the layers",
          "[kernels][attention]") {
  // One 1024-token prompt, no cached prefix: 32 layers x row 1,1024,32,8,128,0 (35.52 us) =
  // 1136.64 us. With the same chunk after 1024 cached tokens the table's time is carried by the
  // roofline's ratio (the cached keys add pairs and KV reads), so it grows.
  const Override on(true);
  const RooflineCost cost(llama_8b_h100());
  BatchShape fresh;
  fresh.add_prefill_chunk(0, 1024, true);
  CHECK(group(cost.breakdown(fresh), "attention_prefill").seconds == Approx(1136.64e-6).epsilon(1e-9));
  BatchShape cached;
  cached.add_prefill_chunk(1024, 1024, true);
  CHECK(group(cost.breakdown(cached), "attention_prefill").seconds > 1.5 * 1136.64e-6);
}

TEST_CASE("the engine profile's measured_kernels turns the tables on, the process override wins",
          "[kernels][attention]") {
  BatchShape b;
  for (int i = 0; i < 8; ++i) b.add_decode(1024);
  {
    // No override (the environment variable aside): the engine's field decides.
    MeasuredKernels::clear_override();
    const char* env = std::getenv("CAPSIM_MEASURED_KERNELS");
    if (!env) {
      const RooflineCost on(llama_8b_h100(Precision::kBf16, true));
      CHECK(on.measured_kernels_on());
      CHECK(group(on.breakdown(b), "attention_decode").seconds == Approx(583.36e-6).epsilon(1e-9));
      const RooflineCost off(llama_8b_h100(Precision::kBf16, false));
      CHECK_FALSE(off.measured_kernels_on());
      CHECK_FALSE(group(off.breakdown(b), "attention_decode").measured);
      CHECK(off.attention_source() ==
            "roofline (h100-sxm datasheet peak x card-file efficiencies): h100-sxm has measured attention tables, "
            "off (engine vllm kernels.measured_kernels false; capsim --measured-kernels or CAPSIM_MEASURED_KERNELS=1)");
    }
  }
  {
    const Override off(false);
    const RooflineCost cost(llama_8b_h100(Precision::kBf16, true));
    CHECK_FALSE(cost.measured_kernels_on());
    CHECK_FALSE(group(cost.breakdown(b), "attention_decode").measured);
  }
}

TEST_CASE("kernels.measured_kernels is read from the engine file and checked", "[kernels][attention]") {
  std::ifstream in(data_dir() + "/calibration/engines/vllm.yaml");
  std::stringstream text;
  text << in.rdbuf();
  const std::string vllm = text.str();
  const std::string field = "measured_kernels: {value: false";
  REQUIRE(vllm.find(field) != std::string::npos);
  CHECK_FALSE(capsim_test::engine_catalogue().find("vllm").measured_kernels);
  TempDir dir;
  const auto with = [&](const std::string& value) {
    std::string t = vllm;
    t.replace(t.find(field), field.size(), "measured_kernels: {value: " + value);
    const std::string path = dir.path() + "/vllm-" + value + ".yaml";
    std::ofstream(path) << t;
    return path;
  };
  CHECK(EngineCatalogue::load_file(with("true")).measured_kernels);
  const std::string bad = with("yes");
  CHECK_THROWS_WITH(EngineCatalogue::load_file(bad),
                    bad + ": kernels.measured_kernels: 'yes' is not a boolean; accepted: true, false");
}
