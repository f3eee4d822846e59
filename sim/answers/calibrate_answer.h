// `calibrate`'s answers as every front end gives them (docs/calibration.md): `fit` fits a card's
// cost-model constants to a measured profile, `compare` sets measured model step times against
// the cost model, `show` lists the constants each card uses and where they come from.
// calibrate_fit_json and calibrate_compare_json are exactly what `capsim calibrate fit|compare
// --json -` print (docs/json-output.md#capsim-calibrate-fitcompare---json). The library writes
// no file: the fitted card profile is card_profile_yaml(answer.fit), for the caller to keep.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/calibration/card_profile.h"
#include "sim/calibration/profile.h"
#include "sim/calibration/step_compare.h"
#include "sim/calibration/vidur.h"
#include "sim/hardware/card.h"
#include "sim/llm/deployment.h"
#include "sim/scenario/deployment_spec.h"

namespace capsim::answers {

// One source of measurements, exactly: a profile file, the profile itself, or a Vidur folder.
struct CalibrateFitRequest {
  std::string profile;                         // capsim-calibrate's JSON, a path
  // Or the profile already read (parse_profile: the server's body, never a path); its `path`
  // names it in messages and the answer.
  std::optional<calibration::Profile> measured;
  std::string vidur;                           // or a folder of Vidur per-operator CSVs
  std::string sku;                             // Vidur's GPU SKU; empty: from the card name
  std::string card = "h100-sxm";
  bool force = false;           // accept a profile measured on a GPU that does not match the card
  std::string command_line;     // recorded in the fitted profile
  // Called with the card once it resolves, before any measurement is read (the CLI checks its
  // output files there, so a bad --out fails before a long read).
  std::function<void(const Card&)> before_profile;
};

struct CalibrateFitAnswer {
  Card card;  // the card file's own constants (not an earlier calibration): the priors
  calibration::Profile profile;
  calibration::VidurReport vidur_report;  // what a Vidur folder gave (empty for a profile)
  calibration::CardFit fit;
};

// Throws capsim::Error for bad input: no or two sources, an unknown card, a malformed profile
// (naming its file and the field), a GPU that does not match the card.
CalibrateFitAnswer answer_calibrate_fit(const CalibrateFitRequest& request);

// `out`: where the fitted profile went, as the JSON's "out" says it; nullopt writes null.
nlohmann::json calibrate_fit_json(const CalibrateFitAnswer& a, const std::optional<std::string>& out);
// The readable report of `capsim calibrate fit`, up to its notes (not where the profile went).
void print_calibrate_fit(std::ostream& os, const CalibrateFitAnswer& a);

struct CalibrateCompareRequest {
  std::string file;  // STEPS.csv as scripts/model_step_bench.py writes it
  scenario::DeploymentSpec deployment;
  // Not given: the file's one model (card); a file holding several is refused.
  bool model_given = false, card_given = false;
};

struct StepComparison {
  calibration::StepRow row;
  std::string kind;   // prefill or decode
  std::string bound;  // compute or memory
  double predicted_s = 0;
  double ape = 0;  // |predicted / measured - 1|
};

struct CalibrateCompareAnswer {
  std::string file;
  Deployment deployment;
  std::vector<StepComparison> rows;  // the rows of the deployment's model and card
  int skipped = 0;                   // rows for other models or cards
};

// Throws capsim::Error naming the file (and line) for bad input.
CalibrateCompareAnswer answer_calibrate_compare(const CalibrateCompareRequest& request);
nlohmann::json calibrate_compare_json(const CalibrateCompareAnswer& a);
void print_calibrate_compare(std::ostream& os, const CalibrateCompareAnswer& a);

struct CalibrateShowAnswer {
  std::vector<Card> cards;   // as the catalogue applies them
  bool calibration_on = true;
};

// `card` empty: every card. Throws capsim::Error for an unknown card.
CalibrateShowAnswer answer_calibrate_show(const std::string& card);
void print_calibrate_show(std::ostream& os, const CalibrateShowAnswer& a);

}  // namespace capsim::answers
