// The attributes of one op: named scalars, strings and integer lists, in a fixed order.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "hlo/fingerprint.h"
#include "hlo/types.h"

namespace torchtpu::lowering {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

class Attrs {
 public:
  // On a temporary (`Attrs().set(...).set(...)`) these return it as a temporary, so passing the
  // chain by value moves it instead of copying every item.
  Attrs& set(std::string key, AttrValue value) & {
    // Room for the usual few at once: growing one by one reallocates and moves them 3 times.
    if (items_.empty()) items_.reserve(6);
    items_.emplace_back(std::move(key), std::move(value));
    return *this;
  }
  Attrs&& set(std::string key, AttrValue value) && {
    return std::move(set(std::move(key), std::move(value)));
  }
  Attrs& set_type(std::string key, hlo::ElementType type) & {
    return set(std::move(key), static_cast<int64_t>(type));
  }
  Attrs&& set_type(std::string key, hlo::ElementType type) && {
    return std::move(set_type(std::move(key), type));
  }

  bool has(const std::string& key) const { return find(key) != nullptr; }
  int64_t i(const std::string& key) const { return std::get<int64_t>(get(key)); }
  double f(const std::string& key) const { return std::get<double>(get(key)); }
  const std::string& s(const std::string& key) const { return std::get<std::string>(get(key)); }
  const std::vector<int64_t>& ints(const std::string& key) const {
    return std::get<std::vector<int64_t>>(get(key));
  }
  hlo::ElementType type(const std::string& key) const {
    return static_cast<hlo::ElementType>(i(key));
  }

  void fingerprint(hlo::Fingerprint& f) const;
  // Each attribute as (name, value written out); debug_string() joins them.
  std::vector<std::pair<std::string, std::string>> described() const;
  std::string debug_string() const;

 private:
  const AttrValue* find(const std::string& key) const;
  const AttrValue& get(const std::string& key) const;

  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace torchtpu::lowering
