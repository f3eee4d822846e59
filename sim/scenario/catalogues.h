// Where capsim's data lives and the catalogues read from it (cards, models, engines), shared by
// every front end. Each catalogue is read once, on first use, from the data root in force then.
#pragma once

#include <string>

#include "sim/cost/engine_profile.h"
#include "sim/hardware/card.h"
#include "sim/hardware/kv_link.h"
#include "sim/llm/model_spec.h"

namespace capsim::scenario {

// The data root holds calibration/cards, calibration/engines, models, workloads. Chosen by
// set_data_dir (the CLI's --data-dir), else $CAPSIM_DATA_DIR, else the source tree capsim was
// built from. REQUIRES: set_data_dir is called before the first catalogue is read.
std::string data_dir();
void set_data_dir(const std::string& dir);

// Thread-safe: the first call reads the catalogue (C++ static initialisation), later ones share it.
const CardCatalogue& cards();
const ModelCatalogue& models();
const EngineCatalogue& engines();
const KvLinkCatalogue& kv_links();  // calibration/links.yaml

}  // namespace capsim::scenario
