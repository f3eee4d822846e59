// calibration/prices.yaml and its loader: every catalogue GPU has a dated, cited rent; a card
// without one, a malformed entry or a bad --price says where, what and what is accepted.
#include "sim/plan/prices.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "sim/core/error.h"
#include "sim/hardware/card.h"
#include "tests/support/error_message.h"
#include "tests/support/catalogues.h"
#include "tests/support/temp_dir.h"

using namespace capsim;
using capsim_test::message_of;

namespace {

const std::string kData = CAPSIM_DATA_DIR;
const std::string kPrices = kData + "/calibration/prices.yaml";

constexpr auto& catalogue = capsim_test::card_catalogue;

// A price file in a fresh temporary folder, removed at the end of the test.
class TempPrices {
 public:
  explicit TempPrices(const std::string& body) : path_(dir_.write("prices.yaml", body)) {}
  const std::string& path() const { return path_; }

 private:
  capsim_test::TempDir dir_{"prices_test"};
  std::string path_;
};

const char* const kHeader =
    "references:\n"
    "  r: \"a citation\"\n"
    "electricity_usd_per_kwh: {value: 0.10, source: r, date: \"2024-01\"}\n";

}  // namespace

// Issue 32's b300, gb200, mi325x, mi355x and rtx-pro-6000 have no price: no dated on-demand
// per-GPU list price from a named provider was found, or only one that does not name the edition
// (calibration/prices.yaml's header). Like the CPU server
// they are left out, and a command that needs their rent says how to give one.
TEST_CASE("prices: every catalogue GPU but the five unpriced ones has a dated, cited rent, the CPU server has none",
          "[plan][prices]") {
  const PriceBook book = load_prices(kPrices);
  REQUIRE_NOTHROW(book.check_cards(catalogue()));
  for (const Card& c : catalogue().cards()) {
    const CardPrice* p = book.find(c.name);
    if (c.is_cpu) {
      CHECK(p == nullptr);
      continue;
    }
    if (c.name == "b300" || c.name == "gb200" || c.name == "mi325x" || c.name == "mi355x" ||
        c.name == "rtx-pro-6000") {
      CHECK(p == nullptr);
      CHECK_THROWS_WITH(book.usd_per_hour(c), kPrices + ": cards: no price for card '" + c.name + "'; add cards." +
                                                  c.name + ".usd_per_hour there or pass --price " + c.name +
                                                  "=USD_PER_HOUR");
      continue;
    }
    INFO(c.name);
    REQUIRE(p != nullptr);
    CHECK(p->rent.value > 0);
    CHECK(p->rent.value < 20);  // per GPU-hour, not per 8-GPU instance
    CHECK_FALSE(p->rent.source.empty());
    CHECK(p->rent.date.size() == 7);
    if (p->purchase) {
      CHECK(p->purchase->value > 100 * p->rent.value);
      CHECK_FALSE(p->purchase->source.empty());
    }
  }
  CHECK(book.electricity_usd_per_kwh() == Approx(0.0895));
  CHECK_FALSE(book.electricity().source.empty());
  CHECK(book.usd_per_hour(catalogue().find("h100-sxm")) == Approx(2.69));
  CHECK(book.purchase_usd(catalogue().find("rtx-4090")) == Approx(1599));
  CHECK_FALSE(book.purchase_usd(catalogue().find("t4")).has_value());
}

TEST_CASE("prices: a card without a price names the file and the --price flag", "[plan][prices]") {
  const PriceBook book = load_prices(kPrices);
  CHECK(message_of([&] { book.usd_per_hour(catalogue().find("cpu-server-ddr5")); }) ==
        kPrices +
            ": cards: no price for card 'cpu-server-ddr5'; add cards.cpu-server-ddr5.usd_per_hour "
            "there or pass --price cpu-server-ddr5=USD_PER_HOUR");
}

TEST_CASE("prices: --price overrides replace the file's rent, aliases resolve", "[plan][prices]") {
  const PriceBook book =
      load_prices_with_overrides(kPrices, catalogue(), {"h100=1.5", "cpu-server-ddr5=4.2"});
  CHECK(book.usd_per_hour(catalogue().find("h100-sxm")) == Approx(1.5));
  CHECK(book.find("h100-sxm")->rent.source == "--price");
  CHECK(book.usd_per_hour(catalogue().find("cpu-server-ddr5")) == Approx(4.2));
  // The override changes the rent only; the purchase price stays.
  CHECK(book.purchase_usd(catalogue().find("h100-sxm")) == Approx(27500));
}

TEST_CASE("prices: malformed --price values are pinned", "[plan][prices]") {
  const std::string form =
      "accepted form: --price CARD=USD_PER_HOUR, e.g. --price h100-sxm=2.49 (US dollars per "
      "GPU-hour, a plain number in (0, 1000]; repeat the flag for several cards)";
  CHECK(message_of([] { parse_price_override("h100-sxm"); }) ==
        "--price: 'h100-sxm' has no '='; " + form);
  CHECK(message_of([] { parse_price_override("=2.49"); }) ==
        "--price: '=2.49' names no card; " + form);
  CHECK(message_of([] { parse_price_override("h100-sxm=abc"); }) ==
        "--price: 'abc' (for h100-sxm) is not a plain number; " + form);
  CHECK(message_of([] { parse_price_override("h100-sxm=$2"); }) ==
        "--price: '$2' (for h100-sxm) is not a plain number; " + form);
  CHECK(message_of([] { parse_price_override("h100-sxm=0"); }) ==
        "--price: h100-sxm=0: a price must be in (0, 1000] US dollars per card-hour; " + form);
  CHECK(message_of([] { parse_price_override("h100-sxm=-1"); }) ==
        "--price: h100-sxm=-1: a price must be in (0, 1000] US dollars per card-hour; " + form);
  // A monthly rent typed as hourly (2.49 x 730 h) is refused rather than planned with.
  CHECK(message_of([] { parse_price_override("h100-sxm=1817.7"); }) ==
        "--price: h100-sxm=1817.7: a price must be in (0, 1000] US dollars per card-hour; " + form);
  const PriceOverride ok = parse_price_override("h100-sxm=2.49");
  CHECK(ok.card == "h100-sxm");
  CHECK(ok.usd_per_hour == 2.49);
  const std::string unknown =
      message_of([] { load_prices_with_overrides(kPrices, catalogue(), {"h100x=2"}); });
  CHECK(unknown.rfind("--price: unknown card 'h100x'; did you mean: ", 0) == 0);
}

TEST_CASE("prices: malformed files name file: field, what is wrong and what is accepted",
          "[plan][prices]") {
  {
    TempPrices f(std::string(kHeader) +
                 "cards:\n  t4:\n    usd_per_hour: {value: 0.5, source: r}\n");
    CHECK(message_of([&] { load_prices(f.path()); }) ==
          f.path() +
              ": cards.t4.usd_per_hour: missing date; every price needs date: \"YYYY-MM\" "
              "(when it was observed)");
  }
  {
    TempPrices f(std::string(kHeader) +
                 "cards:\n  t4:\n    usd_per_hour: {value: 0.5, source: r, date: \"2026-13\"}\n");
    CHECK(message_of([&] { load_prices(f.path()); }) ==
          f.path() +
              ": cards.t4.usd_per_hour.date: '2026-13' is not a month; accepted: "
              "\"YYYY-MM\", e.g. \"2026-03\"");
  }
  {
    TempPrices f(std::string(kHeader) +
                 "cards:\n  t4:\n    usd_per_hour: {value: 0, source: r, date: \"2026-03\"}\n");
    CHECK(message_of([&] { load_prices(f.path()); }) ==
          f.path() + ": cards.t4.usd_per_hour: value must be > 0 (US dollars)");
  }
  {
    TempPrices f(std::string(kHeader) +
                 "cards:\n  t4:\n    usd_per_hour: {value: 350, source: r, date: \"2026-03\"}\n"
                 "    purchase_usd: {value: 2e7, source: r, date: \"2026-03\"}\n");
    // A 350 $/h rent is within the (0, 1000] rent bound; a purchase price of
    // 20 million dollars per card does not pass (0, 1e7].
    CHECK(message_of([&] { load_prices(f.path()); }) ==
          f.path() + ": cards.t4.purchase_usd: 2e+07 is outside the accepted range (0, 1e+07] US "
                     "dollars per card");
  }
  {
    TempPrices f(std::string(kHeader) +
                 "cards:\n  t4:\n    usd_per_hour: {value: 1500, source: r, date: \"2026-03\"}\n");
    CHECK(message_of([&] { load_prices(f.path()); }) ==
          f.path() + ": cards.t4.usd_per_hour: 1500 is outside the accepted range (0, 1000] US "
                     "dollars per card-hour");
  }
  {
    TempPrices f(
        std::string(kHeader) +
        "cards:\n  t4:\n    usd_per_hour: {value: 0.5, source: nope, date: \"2026-03\"}\n");
    CHECK(message_of([&] { load_prices(f.path()); }) ==
          f.path() + ": cards.t4.usd_per_hour: source 'nope' is not a key of references (have: r)");
  }
  {
    TempPrices f(std::string(kHeader) +
                 "cards:\n  t4:\n    usd_per_hr: {value: 0.5, source: r, date: \"2026-03\"}\n");
    CHECK(message_of([&] { load_prices(f.path()); }) ==
          f.path() + ": cards.t4.usd_per_hr: unknown field; accepted: usd_per_hour, purchase_usd");
  }
  {
    TempPrices f(
        std::string(kHeader) +
        "cards:\n  h100-sxn:\n    usd_per_hour: {value: 2, source: r, date: \"2026-03\"}\n");
    const PriceBook book = load_prices(f.path());
    CHECK(message_of([&] { book.check_cards(catalogue()); }) ==
          f.path() +
              ": cards.h100-sxn: not a card of the catalogue; did you mean h100-sxm? "
              "(capsim list cards; keys are catalogue names, not aliases)");
  }
  {
    TempPrices f("references:\n  r: \"x\"\ncards: {}\n");
    CHECK(message_of([&] { load_prices(f.path()); }) ==
          f.path() + ": electricity_usd_per_kwh: missing (required)");
  }
}
