#include "sim/plan/prices.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"

namespace capsim {
namespace {

const char* const kOverrideForm =
    "accepted form: --price CARD=USD_PER_HOUR, e.g. --price h100-sxm=2.49 (US dollars per "
    "GPU-hour, a plain number in (0, 1000]; repeat the flag for several cards)";

bool is_year_month(const std::string& s) {
  if (s.size() != 7 || s[4] != '-') return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i != 4 && !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  const int month = std::stoi(s.substr(5, 2));
  return month >= 1 && month <= 12;
}

// A {value, source, date} entry: YamlDoc checks value and source; the date is ours.
// `max` bounds a plausible value (a unit slip such as a monthly rent given per hour, or a
// per-node price, is refused); `what` names the unit in the message.
SourcedPrice read_price(const YamlDoc& doc, const std::string& field, bool allow_zero, double max,
                        const char* what) {
  SourcedPrice p;
  p.value = doc.quantity(field, std::nullopt);
  if (!allow_zero && p.value <= 0) {
    throw Error(doc.where(field) + ": value must be > 0 (US dollars)");
  }
  if (p.value > max || !std::isfinite(p.value)) {
    char buf[96];
    std::snprintf(buf, sizeof buf, ": %g is outside the accepted range (0, %g] US dollars %s",
                  p.value, max, what);
    throw Error(doc.where(field) + buf);
  }
  p.source = doc.source_of(field);
  const auto date = doc.optional_string(field + ".date");
  if (!date) {
    throw Error(doc.where(field) +
                ": missing date; every price needs date: \"YYYY-MM\" (when "
                "it was observed)");
  }
  if (!is_year_month(*date)) {
    throw Error(doc.where(field + ".date") + ": '" + *date +
                "' is not a month; accepted: \"YYYY-MM\", e.g. \"2026-03\"");
  }
  p.date = *date;
  return p;
}

}  // namespace

PriceOverride parse_price_override(const std::string& text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos) {
    throw Error("--price: '" + text + "' has no '='; " + kOverrideForm);
  }
  PriceOverride o;
  o.card = text.substr(0, eq);
  const std::string value = text.substr(eq + 1);
  if (o.card.empty()) throw Error("--price: '" + text + "' names no card; " + kOverrideForm);
  double v = 0;
  const char* b = value.data();
  const char* e = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(b, e, v);
  if (value.empty() || ec != std::errc() || ptr != e || !std::isfinite(v)) {
    throw Error("--price: '" + value + "' (for " + o.card + ") is not a plain number; " +
                kOverrideForm);
  }
  if (v <= 0 || v > 1000) {
    throw Error("--price: " + o.card + "=" + value + ": a price must be in (0, 1000] US dollars per "
                "card-hour; " + kOverrideForm);
  }
  o.usd_per_hour = v;
  return o;
}

PriceBook PriceBook::load(const std::string& path) {
  const YamlDoc doc = YamlDoc::load(path);
  PriceBook book;
  book.path_ = path;
  book.electricity_ = read_price(doc, "electricity_usd_per_kwh", false, 10, "per kWh");
  const YAML::Node cards = doc.find("cards");
  if (!cards || !cards.IsMap()) {
    throw Error(doc.where("cards") +
                ": missing; expected a mapping card name -> {usd_per_hour: {value, source, "
                "date}, purchase_usd: {...} (optional)}");
  }
  for (const auto& kv : cards) {
    const std::string name = yaml_scalar(kv.first, doc.where("cards"));
    const std::string base = "cards." + name;
    if (!kv.second.IsMap()) {
      throw Error(doc.where(base) +
                  ": expected a mapping with usd_per_hour and optionally "
                  "purchase_usd");
    }
    for (const auto& field : kv.second) {
      const std::string key = yaml_scalar(field.first, doc.where(base));
      if (key != "usd_per_hour" && key != "purchase_usd") {
        throw Error(doc.where(base + "." + key) +
                    ": unknown field; accepted: usd_per_hour, purchase_usd");
      }
    }
    CardPrice price;
    price.card = name;
    price.rent = read_price(doc, base + ".usd_per_hour", false, 1000, "per card-hour");
    if (doc.has(base + ".purchase_usd")) {
      price.purchase = read_price(doc, base + ".purchase_usd", false, 10e6, "per card");
    }
    book.prices_[name] = price;
  }
  return book;
}

PriceBook load_prices(const std::string& path) { return PriceBook::load(path); }

const CardPrice* PriceBook::find(const std::string& card_name) const {
  const auto it = prices_.find(card_name);
  return it == prices_.end() ? nullptr : &it->second;
}

double PriceBook::usd_per_hour(const Card& card) const {
  if (const CardPrice* p = find(card.name)) return p->rent.value;
  throw Error(path_ + ": cards: no price for card '" + card.name + "'; add cards." + card.name +
              ".usd_per_hour there or pass --price " + card.name + "=USD_PER_HOUR");
}

std::optional<double> PriceBook::purchase_usd(const Card& card) const {
  const CardPrice* p = find(card.name);
  if (!p || !p->purchase) return std::nullopt;
  return p->purchase->value;
}

void PriceBook::set_rent(const std::string& card_name, double usd_per_hour) {
  CardPrice& p = prices_[card_name];
  p.card = card_name;
  p.rent = {usd_per_hour, "--price", ""};
}

void PriceBook::check_cards(const CardCatalogue& cards) const {
  const std::vector<std::string> names = cards.names();
  for (const auto& [name, _] : prices_) {
    bool known = false;
    for (const auto& n : names) known = known || n == name;
    if (known) continue;
    std::string msg = path_ + ": cards." + name + ": not a card of the catalogue";
    const auto near = closest_matches(name, names);
    if (!near.empty()) msg += "; did you mean " + near.front() + "?";
    msg += " (capsim list cards; keys are catalogue names, not aliases)";
    throw Error(msg);
  }
}

PriceBook load_prices_with_overrides(const std::string& path, const CardCatalogue& cards,
                                     const std::vector<std::string>& overrides) {
  PriceBook book = PriceBook::load(path);
  book.check_cards(cards);
  for (const auto& text : overrides) {
    const PriceOverride o = parse_price_override(text);
    const Card* card = nullptr;
    try {
      card = &cards.find(o.card);
    } catch (const Error& e) {
      throw Error(std::string("--price: ") + e.what());
    }
    book.set_rent(card->name, o.usd_per_hour);
  }
  return book;
}

std::string price_provenance(const PriceBook& prices, const std::string& card_name) {
  const CardPrice* p = prices.find(card_name);
  if (!p) return "none";
  const std::string& src = p->rent.source;
  if (src == "--price") return "--price";
  if (src.find("DOUBTFUL") != std::string::npos) return "doubtful";
  if (src.find("ASSUMED") != std::string::npos) return "assumed";
  if (src.find("SECONDARY") != std::string::npos) return "secondary";
  return "cited";
}

}  // namespace capsim
