// expect-error: phaze::place::Placer: 'p.name\(\)' is missing
// A user's placer without a name cannot run through the search (search::options::placer names it in reports).
#include <phaze/place/any_placer.hpp>
#include <phaze/place/model_placement.hpp>

struct greedy {
  template <class Table, class Policy>
  phaze::place::plan place(const phaze::place::placement_problem<Table>&, const Policy&,
                           const phaze::place::placement_request&) const {
    return {};
  }
};

phaze::place::model_placer use_it() {
  return greedy{};
}
