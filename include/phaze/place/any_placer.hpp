/// @file
/// Any Placer behind one type, for code that chooses its placer at run time: search::options, `phaze plan
/// --placer`, a benchmark comparing placer variants. Made from any value that models Placer for the tables
/// and policy it will see; anything else stops compilation with explain_placer's sentence.
///
///     place::any_placer<cost_table, step_policy> p = my_greedy_placer{};
///     const plan best = p.place(problem, policy, request);
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "phaze/place/concepts.hpp"
#include "phaze/place/cost_table.hpp"
#include "phaze/place/objective.hpp"

namespace phaze::place {

/// A Placer of tables `Table` under policy `Policy`, whatever its type.
template <CostTable Table, class Policy>
class any_placer {
 public:
  /// Keeps a copy of `p`.
  template <class P>
  any_placer(P p) {  // NOLINT(google-explicit-constructor): any Placer converts, as std::function does
    static_cast<void>(explain_placer<P, Table, Policy>());  // reports what is missing, once
    if constexpr (Placer<P, Table, Policy>) {
      name_ = std::string{p.name()};
      capabilities_ = capabilities_of<P>();
      place_ = [p = std::move(p)](const placement_problem<Table>& problem, const Policy& policy,
                                  const placement_request& request) {
        return p.place(problem, policy, request);
      };
    }
  }

  [[nodiscard]] std::string_view name() const { return name_; }
  /// What the placer prices (placer_capabilities; none unless its type declares them).
  [[nodiscard]] placer_capabilities capabilities() const { return capabilities_; }
  [[nodiscard]] plan place(const placement_problem<Table>& problem, const Policy& policy,
                           const placement_request& request) const {
    return place_(problem, policy, request);
  }

 private:
  std::string name_;
  placer_capabilities capabilities_{};
  std::function<plan(const placement_problem<Table>&, const Policy&, const placement_request&)> place_;
};

}  // namespace phaze::place
