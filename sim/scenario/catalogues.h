// Where capsim's data lives and the catalogues read from it (cards, models, engines), shared by
// every front end. Each catalogue is read once, on first use, from the data root in force then.
#pragma once

#include <string>

#include "sim/hardware/card.h"
#include "sim/hardware/kv_link.h"
#include "sim/llm/engine_profile.h"
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

// The same answers as cards().find, models().find and engines().find, but a catalogue name
// that is also its file's name (calibration/cards/NAME.yaml, models/NAME/model.yaml,
// calibration/engines/NAME.yaml) reads that one file only, once, instead of the whole
// catalogue: yaml-cpp reads a card file in ~5 M instructions, so a simulate that loaded all of
// them spent 17% of a 10k-request run starting up. Anything else (an alias, a Hugging Face id,
// a path, an unknown name) goes to the whole catalogue, with its "did you mean" errors. The
// other files' names are not checked against this one's (load_dir does that; `capsim list`
// and the catalogue tests read every file). Once cards() has read the whole catalogue,
// find_card answers from it (plan reads every card: the measured-kernel tables are ~16 MB of
// CSV, and reading them twice was ~9% of `capsim plan`'s CPU time). Thread-safe.
const Card& find_card(const std::string& name);
ModelSpec find_model(const std::string& name);
const EngineProfile& find_engine(const std::string& name);

}  // namespace capsim::scenario
