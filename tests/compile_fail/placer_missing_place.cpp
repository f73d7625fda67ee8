// expect-error: phaze::place::Placer: 'p.place\(problem, policy, request\)' returning place::plan is missing
// A placer whose place() takes the wrong arguments (here: no request) is not a Placer.
#include <phaze/place/any_placer.hpp>
#include <phaze/place/model_placement.hpp>

#include <string_view>

struct greedy {
  std::string_view name() const { return "greedy"; }
  template <class Table, class Policy>
  phaze::place::plan place(const phaze::place::placement_problem<Table>&, const Policy&) const {
    return {};
  }
};

phaze::place::model_placer use_it() {
  return greedy{};
}
