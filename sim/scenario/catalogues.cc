#include "sim/scenario/catalogues.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "sim/core/error.h"
#include "sim/scenario/held_models.h"

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

namespace {

// The whole card catalogue once cards() has read it (nullptr before): find_card then looks
// there rather than reading a card's file, and its measured-kernel tables, a second time.
std::atomic<const CardCatalogue*> whole_card_catalogue{nullptr};

}  // namespace

const CardCatalogue& cards() {
  static const CardCatalogue c = CardCatalogue::load_dir(data_dir() + "/calibration/cards");
  whole_card_catalogue.store(&c, std::memory_order_release);
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

namespace {

// A catalogue name that can also name a file in the catalogue directory: lower-case letters,
// digits, '.', '-', '_', not starting with '.' (so never a path).
bool file_name_key(const std::string& key) {
  if (key.empty() || key.front() == '.') return false;
  return std::all_of(key.begin(), key.end(), [](unsigned char c) {
    return std::islower(c) || std::isdigit(c) || c == '.' || c == '-' || c == '_';
  });
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::mutex& lazy_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

const Card& find_card(const std::string& name) {
  if (const CardCatalogue* all = whole_card_catalogue.load(std::memory_order_acquire)) return all->find(name);
  const std::string key = lower(name);
  if (file_name_key(key)) {
    static std::map<std::string, std::unique_ptr<const Card>> loaded;  // by key
    std::lock_guard<std::mutex> lock(lazy_mutex());
    if (const auto it = loaded.find(key); it != loaded.end()) return *it->second;
    const std::string dir = data_dir() + "/calibration/cards";
    const std::string file = dir + "/" + key + ".yaml";
    std::error_code ec;
    if (std::filesystem::is_regular_file(file, ec)) {
      auto c = std::make_unique<const Card>(CardCatalogue::load_catalogue_file(dir, file));
      if (lower(c->name) == key) return *loaded.emplace(key, std::move(c)).first->second;
    }
  }
  return cards().find(name);
}

namespace {

struct HeldModel {
  ModelSpec model;
  std::string config_text;
  int holders = 0;
};

std::map<std::string, HeldModel>& held_models() {
  static std::map<std::string, HeldModel> held;  // by name; guarded by lazy_mutex()
  return held;
}

}  // namespace

std::shared_ptr<const void> hold_model(const std::string& name, ModelSpec model, const std::string& config_text) {
  std::lock_guard<std::mutex> lock(lazy_mutex());
  HeldModel& h = held_models()[name];
  if (h.holders > 0 && h.config_text != config_text) {
    throw Error(name + ": another model is held under this name");
  }
  if (h.holders == 0) {
    h.model = std::move(model);
    h.config_text = config_text;
  }
  ++h.holders;
  return std::shared_ptr<const void>(nullptr, [name](const void*) {
    std::lock_guard<std::mutex> release(lazy_mutex());
    const auto it = held_models().find(name);
    if (it != held_models().end() && --it->second.holders == 0) held_models().erase(it);
  });
}

ModelSpec find_model(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(lazy_mutex());
    if (const auto it = held_models().find(name); it != held_models().end()) return it->second.model;
  }
  const std::string key = lower(name);
  if (file_name_key(key)) {
    static std::map<std::string, ModelEntry> loaded;  // by key
    std::optional<ModelEntry> entry;
    {
      std::lock_guard<std::mutex> lock(lazy_mutex());
      if (const auto it = loaded.find(key); it != loaded.end()) {
        entry = it->second;
      } else {
        const std::string dir = data_dir() + "/models/" + key;
        std::error_code ec;
        if (std::filesystem::is_regular_file(dir + "/model.yaml", ec)) {
          ModelEntry e = ModelCatalogue::load_entry(dir);
          if (lower(e.name) == key) entry = loaded.emplace(key, std::move(e)).first->second;
        }
      }
    }
    if (entry) return ModelCatalogue::spec_of(*entry);
  }
  return models().find(name);
}

const EngineProfile& find_engine(const std::string& name) {
  if (file_name_key(name)) {
    static std::map<std::string, std::unique_ptr<const EngineProfile>> loaded;  // by name
    std::lock_guard<std::mutex> lock(lazy_mutex());
    if (const auto it = loaded.find(name); it != loaded.end()) return *it->second;
    const std::string file = data_dir() + "/calibration/engines/" + name + ".yaml";
    std::error_code ec;
    if (std::filesystem::is_regular_file(file, ec)) {
      auto e = std::make_unique<const EngineProfile>(EngineCatalogue::load_file(file));
      if (e->name == name) return *loaded.emplace(name, std::move(e)).first->second;
    }
  }
  return engines().find(name);
}

const KvLinkCatalogue& kv_links() {
  static const KvLinkCatalogue l = KvLinkCatalogue::load_file(data_dir() + "/calibration/links.yaml");
  return l;
}

}  // namespace capsim::scenario
