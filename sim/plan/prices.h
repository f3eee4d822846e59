// What cards cost, as data: calibration/prices.yaml (format: docs/prices.md) read into a
// PriceBook, with command-line overrides (--price CARD=USD_PER_HOUR) on top.
//
// Contract: every price is in US dollars, rent per GPU-hour (per server-hour for a CPU card),
// purchase per card, electricity per kWh. Lookups are by catalogue card name (Card::name), so
// callers resolve aliases through the card catalogue first. Every user-facing failure throws
// capsim::Error naming the file and field or the flag, what is wrong and what is accepted.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/hardware/card.h"

namespace capsim {

// A dated, cited price: value, the citation text of its source and "YYYY-MM".
struct SourcedPrice {
  double value = 0;
  std::string source;  // citation text (the references entry), or "--price" for an override
  std::string date;    // "YYYY-MM" when observed; empty for an override
};

struct CardPrice {
  std::string card;                      // catalogue name
  SourcedPrice rent;                     // usd_per_hour, per GPU
  std::optional<SourcedPrice> purchase;  // purchase_usd, per card
};

// One command-line override: --price h100-sxm=2.49.
struct PriceOverride {
  std::string card;  // as written; resolve through the card catalogue before apply()
  double usd_per_hour = 0;
};

// Parses "CARD=USD_PER_HOUR" ("h100-sxm=2.49"). Throws capsim::Error starting "--price: " for a
// missing '=', an empty card, a value that is not a plain number, or a price <= 0, with the
// accepted form in the message.
PriceOverride parse_price_override(const std::string& text);

class PriceBook {
 public:
  // Throws capsim::Error for an unreadable or malformed file, naming file: field.
  static PriceBook load(const std::string& path);

  const std::string& path() const { return path_; }

  // Rent per GPU-hour of `card`. Throws capsim::Error when the card has no price, naming the
  // file and suggesting --price CARD=USD_PER_HOUR.
  double usd_per_hour(const Card& card) const;
  // The price entry, or nullptr when the card has none (neither in the file nor overridden).
  const CardPrice* find(const std::string& card_name) const;
  std::optional<double> purchase_usd(const Card& card) const;

  double electricity_usd_per_kwh() const { return electricity_.value; }
  const SourcedPrice& electricity() const { return electricity_; }

  // Replaces (or adds) the rent of `card_name` (a catalogue name).
  void set_rent(const std::string& card_name, double usd_per_hour);

  // Throws capsim::Error "<path>: cards.<name>: not a card of the catalogue; did you mean ...?"
  // for an entry whose name is not a catalogue card (a misspelt key would otherwise be silent).
  void check_cards(const CardCatalogue& cards) const;

  const std::map<std::string, CardPrice>& entries() const { return prices_; }

 private:
  std::string path_;
  std::map<std::string, CardPrice> prices_;
  SourcedPrice electricity_;
};

// How far to trust a card's rent, read from its citation: "--price" (the user's override),
// "doubtful" (the citation says DOUBTFUL), "assumed" (ASSUMED), "secondary" (SECONDARY: a
// third-party page quoting the provider), "cited"; "none" when the card has no price.
std::string price_provenance(const PriceBook& prices, const std::string& card_name);

// PriceBook::load(path).
PriceBook load_prices(const std::string& path);

// Loads `path`, checks its card names against `cards` and applies each --price override (card
// names resolved through `cards`, so aliases work). Throws capsim::Error as the parts above.
PriceBook load_prices_with_overrides(const std::string& path, const CardCatalogue& cards,
                                     const std::vector<std::string>& overrides);

}  // namespace capsim
