// expect-error: the policy declares policy_capabilities::mixed_devices but one of
// A policy for mixed clusters whose stage_table is misspelt: refused, not silently placed as one device type.
#include <cstddef>

#include <phaze/place/chain_dp.hpp>

struct mixed {
  static constexpr bool allreduce_of_largest_stage = false;
  static constexpr phaze::place::policy_capabilities capabilities{.mixed_devices = true};
  template <class Node>
  double work_s(const phaze::place::placement_settings&, const Node& n) const {
    return n.forward.value() + n.backward.value();
  }
  double stage_time_s(const phaze::place::placement_settings&, const phaze::place::stage_load& l,
                      const phaze::place::stage_context&) const {
    return l.work_s;
  }
  double stage_cost_s(const phaze::place::placement_settings&, const phaze::place::stage_load& l,
                      const phaze::place::stage_context&) const {
    return l.work_s;
  }
  double allreduce_s(const phaze::place::placement_settings&, double,
                     const phaze::place::stage_context&) const {
    return 0.0;
  }
  double batch_time_s(const phaze::place::placement_settings&, double cost, double,
                      const phaze::place::stage_context&) const {
    return cost;
  }
  double stage_memory(const phaze::place::placement_settings&, const phaze::place::stage_load& l, int,
                      const phaze::place::stage_context&) const {
    return l.parameter_bytes;
  }
  double microbatches_in_flight(const phaze::place::placement_settings&, int,
                                const phaze::place::stage_context&) const {
    return 1.0;
  }
  std::size_t stage_tabel(std::size_t ti, int, const phaze::place::stage_context&) const { return ti; }
  double stage_capacity(const phaze::place::placement_settings& s, int,
                        const phaze::place::stage_context&) const {
    return s.memory_per_device.value();
  }
  bool configures(std::size_t) const { return true; }
};

phaze::place::plan place(const phaze::place::placement_problem<>& problem) {
  return phaze::place::chain_dp(problem, mixed{}).run();
}
