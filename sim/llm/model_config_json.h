// A Hugging Face config.json already in memory (a server's request body), read as
// load_model_config (model_spec.h) reads one from a file.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "sim/llm/model_spec.h"

namespace capsim {

// `label` names the config in messages and becomes the model's name; config_path stays empty
// (no file behind it). Throws capsim::Error as load_model_config does.
ModelSpec model_config_from_json(const nlohmann::json& config, const std::string& label);

}  // namespace capsim
