// expect-error: the policy declares policy_capabilities::mixed_devices but one of
// A policy for mixed clusters whose stage_table is misspelt: refused, not silently placed as one device type.
#include <cstddef>

#include <phaze/place/chain_dp.hpp>

#include "plain_policy.hpp"

struct mixed : plain_policy {
  static constexpr phaze::place::policy_capabilities capabilities{.mixed_devices = true};
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
