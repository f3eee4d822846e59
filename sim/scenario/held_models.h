// Models with no file behind them (a config.json pasted into a server request), resolvable by
// find_model (catalogues.h) by a name while they are held, so a scenario carries only the name
// and nothing is written to disk.
#pragma once

#include <memory>
#include <string>

#include "sim/llm/model_spec.h"

namespace capsim::scenario {

// find_model answers `model` for `name` while a returned handle lives. Holding the same name
// again with the same config text shares the entry; with another text it throws capsim::Error
// (callers name models so that this does not happen: serve names them by a hash of their
// text). Thread-safe.
std::shared_ptr<const void> hold_model(const std::string& name, ModelSpec model, const std::string& config_text);

}  // namespace capsim::scenario
