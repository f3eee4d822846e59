#include "sim/scenario/catalogues.h"

#include <cstdlib>

namespace capsim::scenario {
namespace {

std::string& data_dir_storage() {
  static std::string dir;
  return dir;
}

}  // namespace

std::string data_dir() {
  if (!data_dir_storage().empty()) return data_dir_storage();
  if (const char* env = std::getenv("CAPSIM_DATA_DIR"); env && *env) return env;
  return CAPSIM_DATA_DIR;
}

void set_data_dir(const std::string& dir) { data_dir_storage() = dir; }

const CardCatalogue& cards() {
  static const CardCatalogue c = CardCatalogue::load_dir(data_dir() + "/calibration/cards");
  return c;
}

const ModelCatalogue& models() {
  static const ModelCatalogue m = ModelCatalogue::load_dir(data_dir() + "/models");
  return m;
}

const EngineCatalogue& engines() {
  static const EngineCatalogue e = EngineCatalogue::load_dir(data_dir() + "/calibration/engines");
  return e;
}

const KvLinkCatalogue& kv_links() {
  static const KvLinkCatalogue l = KvLinkCatalogue::load_file(data_dir() + "/calibration/links.yaml");
  return l;
}

}  // namespace capsim::scenario
