#include "lowering/attrs.h"

#include <stdexcept>

namespace torchtpu::lowering {

const AttrValue* Attrs::find(const std::string& key) const {
  for (const auto& [k, v] : items_) {
    if (k == key) return &v;
  }
  return nullptr;
}

const AttrValue& Attrs::get(const std::string& key) const {
  const AttrValue* v = find(key);
  if (v == nullptr) throw std::out_of_range("torchtpu: op attribute '" + key + "' is missing");
  return *v;
}

void Attrs::fingerprint(hlo::Fingerprint& f) const {
  f.add(static_cast<int64_t>(items_.size()));
  for (const auto& [k, v] : items_) {
    f.add(k);
    f.add(static_cast<int64_t>(v.index()));
    std::visit([&f](const auto& x) { f.add(x); }, v);
  }
}

std::vector<std::pair<std::string, std::string>> Attrs::described() const {
  std::vector<std::pair<std::string, std::string>> result;
  for (const auto& [k, v] : items_) {
    std::string s;
    if (auto* i = std::get_if<int64_t>(&v)) s = std::to_string(*i);
    if (auto* d = std::get_if<double>(&v)) s = std::to_string(*d);
    if (auto* str = std::get_if<std::string>(&v)) s = *str;
    if (auto* l = std::get_if<std::vector<int64_t>>(&v)) {
      s = "[";
      for (size_t j = 0; j < l->size(); ++j) s += (j ? "," : "") + std::to_string((*l)[j]);
      s += "]";
    }
    result.emplace_back(k, std::move(s));
  }
  return result;
}

std::string Attrs::debug_string() const {
  std::string s = "{";
  for (const auto& [k, v] : described()) s += (s.size() > 1 ? ", " : "") + k + "=" + v;
  return s + "}";
}

}  // namespace torchtpu::lowering
