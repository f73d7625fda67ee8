/// @file
/// Which physical devices play the ranks of a plan {tp, pp, dp}: a search over the cluster's rank order
/// (cluster::cluster::with_order) for the order a caller's cost of the ordered cluster finds cheapest. On
/// heterogeneous or measured clusters the assignment of GPUs to ranks changes the step time (Pipette, Yim
/// et al., DATE 2024; AMP, Li et al., NeurIPS 2022). `exact_ranks` enumerates every order up to proven
/// symmetries (small clusters); `anneal_ranks` is seeded simulated annealing (any size).
/// docs/rank-assignment.md
///
///     auto step_time = [&](const cluster::cluster& ordered) { return ...; };  // e.g. the step model's
///     const auto best = place::anneal_ranks(c, {.tp = 8, .pp = 4, .dp = 2}, step_time).seed(7).run();
///     const cluster::cluster placed = c.with_order(best.order);
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "phaze/cluster/cluster.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/progress.hpp"
#include "phaze/core/quantity.hpp"
#include "phaze/hw/device.hpp"
#include "phaze/train/knobs.hpp"

namespace phaze::place {

/// A cost of a rank order: called on the cluster with a candidate order (cluster::cluster::order), lower
/// is better, +infinity for an order that cannot run (NaN is read as +infinity).
template <class Cost>
concept RankCost =
    std::copy_constructible<Cost> && std::is_invocable_r_v<double, const Cost&, const cluster::cluster&>;

/// What a rank search tells a cost that keeps state derived from the order (anneal_ranks::watch): `start`,
/// the cluster whose order the search then changes in place and asks the cost of; `exchanged(a, b)`, that
/// ranks a and b of it were exchanged (a move made or undone); `finish`, that the cluster `start` gave is
/// about to go (the chain ended, or an exception left it): a cost must not take another cluster at its
/// address for it. Any may be empty.
struct order_watch {
  std::function<void(const cluster::cluster&)> start;
  std::function<void(int, int)> exchanged;
  std::function<void()> finish;
};

/// The order a rank search found: `order[r]` is the device of rank r (give it to cluster::with_order).
struct rank_assignment {
  std::vector<int> order;
  double cost = std::numeric_limits<double>::infinity();
  std::int64_t evaluated = 0;          ///< calls of the cost
  bool exact = false;                  ///< proven optimal (exact_ranks)
  bool stopped_by_time_limit = false;  ///< anneal_ranks ran out of its wall-time limit before its iterations
};

namespace detail::ranks {

[[noreturn]] inline void invalid(const std::string& message) {
  throw input_error(message);
}

/// The shape's ranks, checked against the cluster: tp * pp * dp, at most the cluster's devices.
inline int used_ranks(const cluster::cluster& c, const train::parallelism& shape, const char* solver) {
  if (shape.tp < 1 || shape.pp < 1 || shape.dp < 1)
    invalid(std::string(solver) + ": tp, pp and dp must each be at least 1");
  if (shape.devices() > c.devices())
    invalid(std::string(solver) + ": the plan uses tp * pp * dp = " + std::to_string(shape.devices()) +
            " ranks but the cluster has " + std::to_string(c.devices()) + " devices");
  return static_cast<int>(shape.devices());
}

inline std::vector<std::size_t> sequence(std::size_t n) {
  std::vector<std::size_t> out(n);
  std::iota(out.begin(), out.end(), std::size_t{0});
  return out;
}

inline std::vector<int> identity(int n) {
  std::vector<int> out(static_cast<std::size_t>(n));
  std::iota(out.begin(), out.end(), 0);
  return out;
}

/// NaN (a broken cost) orders last, as an order that cannot run.
inline double sane(double cost) {
  return std::isnan(cost) ? std::numeric_limits<double>::infinity() : cost;
}

/// A uniform integer in [0, n), n >= 1, from the engine's 64-bit outputs by rejection: the same on every
/// platform, unlike std::uniform_int_distribution (whose algorithm the standard leaves to the library).
inline std::uint64_t draw_below(std::mt19937_64& rng, std::uint64_t n) {
  constexpr std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t rest = (top % n + 1) % n;  // 2^64 mod n: the draws above top - rest would bias
  std::uint64_t x = rng();
  if (rest != 0)
    while (x > top - rest) x = rng();
  return x % n;
}

/// A uniform double in [0, 1): the top 53 bits of one draw.
inline double draw_unit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

/// e^-x for 0 <= x, from IEEE-754 additions, multiplications and ldexp only, so that an acceptance test does
/// not depend on the platform's std::exp (which the standard does not require to round correctly). x =
/// k ln 2 + f with 0 <= f < ln 2; e^-f by its Taylor series to the 16th power (error below 1e-17).
inline double exp_neg(double x) {
  if (!(x < 745.0)) return 0.0;
  constexpr double ln2 = 0.6931471805599453094;
  const double k = std::floor(x / ln2);
  const double f = x - k * ln2;
  double term = 1.0;
  double sum = 1.0;
  for (int i = 1; i <= 16; ++i) {
    term = term * -f / static_cast<double>(i);
    sum += term;
  }
  return std::ldexp(sum, -static_cast<int>(k));
}

/// A starting order: the fastest devices first (peak matrix rate), then the devices of the nodes with the
/// most network bandwidth per device and the fastest links inside; devices of one node stay together in
/// their numbering. With a measured device matrix, each run of devices of one speed is chained instead by
/// nearest neighbour (the next device is the one with the most bandwidth both ways from the last).
inline std::vector<int> greedy_order(const cluster::cluster& c) {
  std::vector<int> order = identity(c.devices());
  auto node_of = [&](int d) -> const cluster::node_spec& { return c.groups()[c.group_of_device(d)].node; };
  auto peak = [&](int d) { return hw::peak_matrix_flops(c.groups()[c.group_of_device(d)].device).value(); };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (peak(a) != peak(b)) return peak(a) > peak(b);
    const double na = node_of(a).network_share(1).value();
    const double nb = node_of(b).network_share(1).value();
    if (na != nb) return na > nb;
    return node_of(a).intra.bandwidth > node_of(b).intra.bandwidth;
  });
  const auto& m = c.measured();
  if (!m || m->endpoints != cluster::link_matrix::between::devices) return order;
  auto both_ways = [&](int a, int b) {
    return std::min(m->at(a, b).bandwidth.value(), m->at(b, a).bandwidth.value());
  };
  for (std::size_t first = 0; first < order.size();) {
    std::size_t last = first + 1;
    while (last < order.size() && peak(order[last]) == peak(order[first])) ++last;
    for (std::size_t i = first + 1; i < last; ++i) {
      std::size_t next = i;
      for (std::size_t j = i + 1; j < last; ++j)
        if (both_ways(order[i - 1], order[j]) > both_ways(order[i - 1], order[next])) next = j;
      std::swap(order[i], order[next]);
    }
    first = last;
  }
  return order;
}

/// Whether `c`'s order can be launched node by node (torchrun, whose ranks run node after node): every
/// node's ranks below `used` are consecutive.
inline bool node_blocks(const cluster::cluster& c, int used) {
  std::vector<char> left(static_cast<std::size_t>(c.nodes()), 0);
  int previous = -1;
  for (int r = 0; r < used; ++r) {
    const int n = c.node_at(r);
    if (n == previous) continue;
    if (left[static_cast<std::size_t>(n)] != 0) return false;
    if (previous >= 0) left[static_cast<std::size_t>(previous)] = 1;
    previous = n;
  }
  return true;
}
}  // namespace detail::ranks

/// A cluster whose groups are `c`'s in the sequence `groups` (a permutation of its group indices), without a
/// rank order, and the rank order that lays `c`'s own devices out the same way: order[r] is the device of `c`
/// that plays rank r (the devices of group groups[0] first, then those of groups[1], ...). For a cluster
/// without a measured matrix or an order the two answer alike (routes, device of every rank): the same
/// devices, each node kept whole, in the same sequence (tests/place/plan_ranks_test.cpp holds every
/// sequence of ten seeded clusters equal to its ordered form, route by route). The regrouped one keeps the
/// closed forms of an unordered cluster, which the ordered one gives up: a cost timed on it takes O(groups)
/// per route, not O(devices).
struct regrouped_cluster {
  cluster::cluster cluster;
  std::vector<int> order;
};

inline regrouped_cluster regroup(const cluster::cluster& c, const std::vector<std::size_t>& groups) {
  if (c.measured() || !c.order().empty()) {
    detail::ranks::invalid(
        "regroup: a cluster with a measured link matrix or a rank order cannot be re-listed group by group; "
        "search its order with exact_ranks or anneal_ranks");
  }
  std::vector<std::size_t> sorted = groups;
  std::sort(sorted.begin(), sorted.end());
  if (sorted != detail::ranks::sequence(c.groups().size()))
    detail::ranks::invalid("regrouped group order must list every group of the cluster once");
  std::vector<int> first(c.groups().size() + 1, 0);
  for (std::size_t g = 0; g < c.groups().size(); ++g) first[g + 1] = first[g] + c.groups()[g].count;
  regrouped_cluster out;
  std::vector<cluster::device_group> listed;
  out.order.reserve(static_cast<std::size_t>(c.devices()));
  for (const std::size_t g : groups) {
    listed.push_back(c.groups()[g]);
    for (int d = first[g]; d < first[g + 1]; ++d) out.order.push_back(d);
  }
  out.cluster = cluster::cluster{std::move(listed), c.efficiency()};
  return out;
}

/// How a sequence of devices takes a plan's ranks: which of the plan's dimensions runs fastest along the
/// devices, which next, which slowest, and whether the stages go in pipeline order or folded. A rank is
/// (i, d, s): i its place in its tensor- and context-parallel group (tp cp ranks, kept together in
/// Megatron-LM's order), d its replica, s its stage. Megatron-LM's layout runs i fastest, then d, then s
/// (a stage's replicas on consecutive devices, its data-parallel rings inside nodes); putting s before d
/// keeps a replica's neighbouring stages (their pipeline sends) inside a node, putting d or s before i
/// spreads the tensor-parallel groups over nodes and keeps the others in. Folded, stage s sits at place 2s in
/// the first half and 2 (pp - 1 - s) + 1 in the second (0, pp - 1, 1, pp - 2, ...): the first and last
/// stages, which all-reduce a tied embedding's gradients, become neighbours. Unused ranks keep their place.
struct rank_layout {
  enum class dimension : std::uint8_t { group, replica, stage };
  std::array<dimension, 3> fastest_first{dimension::group, dimension::replica, dimension::stage};
  bool folded = false;
  friend bool operator==(const rank_layout&, const rank_layout&) = default;
};

/// Megatron-LM's layout: rank r on the r-th device of the sequence.
inline constexpr rank_layout megatron_layout{};

/// Every layout: the six orders of the three dimensions, each with the stages in order and folded (Megatron-
/// LM's first).
inline std::vector<rank_layout> all_rank_layouts() {
  using d = rank_layout::dimension;
  std::array<d, 3> dims{d::group, d::replica, d::stage};
  std::vector<rank_layout> out;
  do {
    for (const bool folded : {false, true}) out.push_back({dims, folded});
  } while (std::next_permutation(dims.begin(), dims.end()));
  return out;
}

/// The rank order that gives the ranks of plan `p` the devices of `sequence` (sequence[q]: the device at
/// position q) in `layout`: order[r] is the device of rank r.
inline std::vector<int> laid_out(const std::vector<int>& sequence, const train::parallelism& p,
                                 const rank_layout& layout) {
  if (layout == megatron_layout) return sequence;
  const std::int64_t inner = static_cast<std::int64_t>(p.tp) * p.cp;
  const std::int64_t used = p.devices();
  if (used > static_cast<std::int64_t>(sequence.size()))
    detail::ranks::invalid("laid_out: the plan uses more ranks than the sequence has devices");
  std::vector<int> order = sequence;
  for (std::int64_t r = 0; r < used; ++r) {
    std::int64_t s = r / (inner * p.dp);
    if (layout.folded) s = 2 * s < p.pp ? 2 * s : 2 * (p.pp - 1 - s) + 1;
    const auto coordinate = [&](rank_layout::dimension dim) -> std::pair<std::int64_t, std::int64_t> {
      switch (dim) {
        case rank_layout::dimension::group:
          return {r % inner, inner};
        case rank_layout::dimension::replica:
          return {r / inner % p.dp, p.dp};
        case rank_layout::dimension::stage:
          break;
      }
      return {s, p.pp};
    };
    std::int64_t q = 0;
    for (auto it = layout.fastest_first.rbegin(); it != layout.fastest_first.rend(); ++it) {
      const auto [value, extent] = coordinate(*it);
      q = q * extent + value;
    }
    order[static_cast<std::size_t>(r)] = sequence[static_cast<std::size_t>(q)];
  }
  return order;
}

/// The exact rank search: evaluates one order of every class of orders the cost cannot tell apart, and
/// returns the cheapest (the first found on ties; the identity, Megatron-LM's order, is the first
/// evaluated). For small clusters: at most max_arrangements(...) orders of device classes (default
/// 10! = 3,628,800) are enumerated, or it throws input_error.
///
/// Which orders the cost cannot tell apart. Write a used rank r < u = tp pp dp as (t, d, s), r = t + tp (d +
/// dp s). exact_ranks relies on two properties of the cost (anneal_ranks on neither):
///  (A) it reads a rank's device only through what the cluster says of it (device_at, group_at,
///      group_index, node_at, ring, pairs), never through order() or device_of_rank();
///  (B) it is unchanged by the rotations g(a, b): the device of (t, d, s) moves to ((t + a) mod tp,
///      (d + b) mod dp, s) for every used rank at once; ranks from u on keep their devices.
/// (A) makes two devices of one node interchangeable when the cluster has no device matrix: they share a
/// group (device, node spec) and a node, so swapping them leaves device_at, group_at and node_at of every
/// rank as they were, every hop's link (the node's intra link, a node-matrix entry, or network_share of the
/// ring's members per node, which count nodes only) and so every route. The search therefore orders device
/// classes (one class per node; one per device with a device matrix): std::next_permutation over the class
/// of each rank visits every distinct sequence once, and the k-th rank of a class gets the class's k-th
/// device.
/// (B) holds for every cost built from ring({tp, 1}, n) and ring({dp, tp}, n) with n >= u, pairs(tp dp, u)
/// and symmetric functions of each stage's devices (its slowest, its mean) or of the replicas (the
/// slowest), which is what train::step_model reads when each stage's devices are of one type. Proof:
///  - ring({tp, 1}, n): an instance is a block of tp consecutive ranks. For a used block (d, s), the
///    instance at block (d + b, s) of the rotated order visits the devices of block (d, s), each shifted by a
///    positions along the cycle: the same cyclic sequence of devices, hence the same directed hops and the
///    same members per node, hence the same slowest hop. (d, s) -> (d + b, s) is a bijection of the used
///    blocks; u is a multiple of tp, so no block straddles u, and blocks above u are unchanged.
///  - ring({dp, tp}, n): an instance (s, t) runs through (t, 0, s), (t, 1, s), ..., a cycle over d; the
///    rotated order's instance (s, t + a) visits the same devices cyclically shifted by b. Same argument;
///    instances above u (n > u) are unchanged.
///  - pairs(tp dp, u): the pairs {(t, d, s), (t, d, s + 1)}, s + 1 < pp, both directions, are mapped onto
///    each other with their devices. (Not pairs(tp dp, n) for n > u: a pair from the last stage to an
///    unused rank would change.)
///  - a stage's ranks stay in the stage, a replica's ranks move to replica d + b as a whole.
/// So the cost is a function of the orbits of class sequences under the group Z_tp x Z_dp of rotations
/// (acting on the first u positions; (A) and (B) commute because the classes are attached to devices and the
/// rotations to ranks). The search evaluates the lexicographically least sequence of each orbit, skipping a
/// sequence when some rotation of it is less: with distinct classes (a device matrix) that is one order in
/// tp dp. Rotations are all it uses: a ring's slowest hop depends on the cyclic order of its members (with
/// an asymmetric matrix also on the direction), so neither reflections nor other orders inside a
/// tensor-parallel group are safe; stages are not interchangeable (their layers, and 1F1B's microbatches
/// in flight, differ); and ranks from u on are enumerated too, because the step model's tensor-parallel
/// route reads the groups of unused devices (ring over all devices).
///
///     const auto best = exact_ranks(c, {.tp = 2, .pp = 2, .dp = 2}, cost).run();  // 8! / 4 orders
template <RankCost Cost>
class exact_ranks {
 public:
  /// The search over orders of `c`'s devices (the caller keeps `c` alive until run() returns).
  exact_ranks(const cluster::cluster& c, train::parallelism shape, Cost cost)
      : cluster_(&c), shape_(shape), cost_(std::move(cost)) {}

  /// Most sequences of device classes to enumerate before the rotations (default 10!).
  exact_ranks& max_arrangements(std::int64_t n) {
    max_arrangements_ = n;
    return *this;
  }

  /// The cheapest order, proven: exact is set. Throws input_error for a shape that does not fit or a
  /// cluster with more arrangements than the limit.
  [[nodiscard]] rank_assignment run() const {
    const cluster::cluster& c = *cluster_;
    const int used = detail::ranks::used_ranks(c, shape_, "exact_ranks");
    const int n = c.devices();
    const auto& m = c.measured();
    const bool device_matrix = m && m->endpoints == cluster::link_matrix::between::devices;
    // The class of each device: its node, or itself with a device matrix. Nodes hold consecutive devices,
    // so the classes of devices 0, 1, ... never decrease: the identity is the first sequence.
    std::vector<int> class_of(static_cast<std::size_t>(n));
    std::vector<std::vector<int>> members;
    for (int d = 0; d < n; ++d) {
      const int k = device_matrix ? d : c.node_of_device(d);
      if (static_cast<std::size_t>(k) >= members.size()) members.resize(static_cast<std::size_t>(k) + 1);
      members[static_cast<std::size_t>(k)].push_back(d);
      class_of[static_cast<std::size_t>(d)] = k;
    }
    check_size(members, n);

    const std::vector<std::vector<int>> sources = rotations(used);
    std::vector<int> sequence = class_of;
    std::vector<int> order(static_cast<std::size_t>(n));
    std::vector<std::size_t> next(members.size());
    rank_assignment best;
    best.exact = true;
    do {
      if (!least_in_orbit(sequence, sources)) continue;
      std::fill(next.begin(), next.end(), std::size_t{0});
      for (std::size_t r = 0; r < order.size(); ++r) {
        const auto k = static_cast<std::size_t>(sequence[r]);
        order[r] = members[k][next[k]++];
      }
      const double cost = detail::ranks::sane(cost_(c.with_order(order)));
      ++best.evaluated;
      if (best.order.empty() || cost < best.cost) {
        best.cost = cost;
        best.order = order;
      }
    } while (std::next_permutation(sequence.begin(), sequence.end()));
    return best;
  }

 private:
  const cluster::cluster* cluster_;
  train::parallelism shape_;
  Cost cost_;
  std::int64_t max_arrangements_ = 3'628'800;

  /// Throws unless n! / prod(|class|!) <= the limit (a product of binomials, each computed exactly and
  /// stopped as soon as the count passes the limit: C(m + j, j) grows with j).
  void check_size(const std::vector<std::vector<int>>& members, int n) const {
    std::int64_t count = 1;
    std::int64_t placed = 0;
    bool over = false;
    for (const auto& k : members) {
      std::int64_t binomial = 1;  // C(placed + |k|, |k|), built up as C(placed + j, j)
      for (std::int64_t j = 1; j <= static_cast<std::int64_t>(k.size()) && !over; ++j) {
        const std::int64_t factor = placed + j;
        if (binomial > std::numeric_limits<std::int64_t>::max() / factor) over = true;
        if (!over) binomial = binomial * factor / j;
        if (binomial > max_arrangements_) over = true;
      }
      placed += static_cast<std::int64_t>(k.size());
      if (!over && count > max_arrangements_ / binomial) over = true;
      if (over) break;
      count *= binomial;
    }
    if (over)
      detail::ranks::invalid("exact_ranks: the " + std::to_string(n) +
                             " devices of this cluster have more than " + std::to_string(max_arrangements_) +
                             " orders (devices of one node count as one when there is no device matrix); "
                             "use anneal_ranks, or raise max_arrangements");
  }

  /// For every rotation g(a, b) but the identity: source[q] = the position whose class the rotated
  /// sequence has at q (g^-1(q)) for the used positions q < used.
  [[nodiscard]] std::vector<std::vector<int>> rotations(int used) const {
    const int tp = shape_.tp;
    const int dp = shape_.dp;
    std::vector<std::vector<int>> out;
    for (int a = 0; a < tp; ++a) {
      for (int b = 0; b < dp; ++b) {
        if (a == 0 && b == 0) continue;
        std::vector<int> source(static_cast<std::size_t>(used));
        for (int q = 0; q < used; ++q) {
          const int t = q % tp;
          const int d = (q / tp) % dp;
          const int s = q / (tp * dp);
          source[static_cast<std::size_t>(q)] = (t + tp - a) % tp + tp * ((d + dp - b) % dp + dp * s);
        }
        out.push_back(std::move(source));
      }
    }
    return out;
  }

  /// Whether no rotation makes `sequence` lexicographically smaller (positions from used on are fixed).
  [[nodiscard]] static bool least_in_orbit(const std::vector<int>& sequence,
                                           const std::vector<std::vector<int>>& sources) {
    for (const auto& source : sources) {
      for (std::size_t q = 0; q < source.size(); ++q) {
        const int rotated = sequence[static_cast<std::size_t>(source[q])];
        if (rotated != sequence[q]) {
          if (rotated < sequence[q]) return false;
          break;
        }
      }
    }
    return true;
  }
};

/// Seeded simulated annealing over rank orders, for clusters of any size; the result is never worse than
/// the identity (Megatron-LM's order) and, with the same seed, iterations and cost, the same on every
/// platform (the engine is std::mt19937_64, whose outputs the standard fixes, and the draws and the
/// acceptance test use IEEE-754 arithmetic only; a wall-time limit, when it stops the run, breaks this).
///
/// The iterations are split over chains (4 by default): the first starts from the identity, the second from
/// a greedy order (fastest devices and best-connected nodes first, detail::ranks::greedy_order), the others
/// from the best order seen so far. A move, drawn from ten equally likely cases: exchange the devices of two
/// ranks (four in ten), of two whole tensor-parallel groups (one), of two whole pipeline stages (one),
/// reverse a run of used ranks (two), or move one used rank's device to another used position, shifting
/// those between (two); a case the shape does not allow becomes a rank exchange. An exchange takes one
/// used rank (below tp pp dp) and one of any, so unused devices come into use. A worse order (cost up by
/// delta) is accepted with probability e^(-delta / (T c0)), c0 the chain's starting cost (1 when it is 0 or
/// infinite); equal or better ones always. The schedule is geometric: T starts at initial_temperature (1.0)
/// and is multiplied by cooling (0.95) after every max(1, floor(steps / 100)) of a chain's steps, so it ends
/// near 0.006 of the start. Every step evaluates the cost once; the best order seen is returned.
///
///     const auto r = anneal_ranks(c, {.tp = 8, .pp = 8, .dp = 8}, cost).seed(7).iterations(20000).run();
template <RankCost Cost>
class anneal_ranks {
 public:
  /// The search over orders of `c`'s devices (the caller keeps `c` alive until run() returns).
  anneal_ranks(const cluster::cluster& c, train::parallelism shape, Cost cost)
      : cluster_(&c), shape_(shape), cost_(std::move(cost)) {}

  anneal_ranks& seed(std::uint64_t s) {
    seed_ = s;
    return *this;
  }
  /// Steps over all chains (default 20000): one cost evaluation each.
  anneal_ranks& iterations(std::int64_t n) {
    iterations_ = n;
    return *this;
  }
  /// Stop after this wall time (checked every 64 iterations) and report it; default none.
  anneal_ranks& time_limit(seconds t) {
    time_limit_s_ = t.value();
    return *this;
  }
  /// The starting temperature as a share of the chain's starting cost (default 1.0).
  anneal_ranks& initial_temperature(double share) {
    initial_temperature_ = share;
    return *this;
  }
  /// The factor the temperature is multiplied by a hundred times per chain (default 0.95).
  anneal_ranks& cooling(double factor) {
    cooling_ = factor;
    return *this;
  }
  /// Chains the iterations are split over (default 4): the first from the identity, the second from the
  /// greedy order, the others from the best order seen so far.
  anneal_ranks& chains(int n) {
    chains_ = n;
    return *this;
  }
  /// Only orders a node-by-node launcher can start (detail::ranks::node_blocks: every node's used ranks
  /// consecutive, as torchrun numbers them): the moves then exchange two ranks of one node's block, or two
  /// whole blocks (of any sizes: those between shift), and chains start from launchable orders only.
  anneal_ranks& node_blocks(bool on) {
    node_blocks_ = on;
    return *this;
  }
  /// Tells `w` of each chain's cluster and of every exchange of its ranks, so that the cost can keep what
  /// it derives from the order up to date (place::order_ranks keeps the routes: cluster::route_tracker)
  /// instead of deriving it again for every order; default none. The cost must stay what it would be
  /// without: the search is then the same.
  anneal_ranks& watch(order_watch w) {
    watch_ = std::move(w);
    return *this;
  }
  /// Reports the steps done ("rank orders", of the iterations) every 256 steps; default none.
  anneal_ranks& progress(progress_hook hook) {
    progress_ = std::move(hook);
    return *this;
  }

  /// The best order seen (exact is not set). Throws input_error for a shape that does not fit or bad
  /// settings.
  [[nodiscard]] rank_assignment run() const {
    const cluster::cluster& c = *cluster_;
    const int used = detail::ranks::used_ranks(c, shape_, "anneal_ranks");
    if (iterations_ < 0) detail::ranks::invalid("anneal_ranks: iterations must be at least 0");
    if (chains_ < 1) detail::ranks::invalid("anneal_ranks: give at least 1 chain");
    if (!(initial_temperature_ >= 0.0) || !(cooling_ > 0.0 && cooling_ <= 1.0))
      detail::ranks::invalid(
          "anneal_ranks: the initial temperature must be at least 0 and the cooling factor in (0, 1]");
    const auto started = std::chrono::steady_clock::now();
    std::mt19937_64 rng(seed_);
    const std::vector<int> identity = detail::ranks::identity(c.devices());
    const std::vector<int> greedy = detail::ranks::greedy_order(c);
    rank_assignment best;
    best.order = identity;
    best.cost = detail::ranks::sane(cost_(c.with_order(identity)));
    best.evaluated = 1;
    const double identity_cost = best.cost;
    std::int64_t done = 0;  // steps over every chain, for the progress reports
    // The greedy start only where it keeps the search's orders (node_blocks).
    const bool greedy_allowed = !node_blocks_ || detail::ranks::node_blocks(c.with_order(greedy), used);
    for (int k = 0; k < chains_; ++k) {
      const std::vector<int>& start = k == 0   ? identity
                                      : k == 1 ? (greedy_allowed ? greedy : identity)
                                               : best.order;
      cluster::cluster work = c.with_order(start);
      struct watching {  // tells the watch when `work` goes, however the chain ends
        const order_watch& watch;
        explicit watching(const order_watch& w) : watch(w) {}
        watching(const watching&) = delete;
        watching& operator=(const watching&) = delete;
        ~watching() {
          if (watch.finish) watch.finish();
        }
      };
      const watching watched{watch_};
      if (watch_.start) watch_.start(work);
      double current = k == 0 ? identity_cost : best.cost;
      if (k == 1 && greedy_allowed && greedy != identity) {
        current = detail::ranks::sane(cost_(work));
        ++best.evaluated;
        if (current < best.cost) {
          best.cost = current;
          best.order = greedy;
        }
      } else if (k == 1) {
        current = identity_cost;
      }
      const std::int64_t steps = iterations_ / chains_ + (k < iterations_ % chains_ ? 1 : 0);
      if (!anneal(work, current, used, steps, rng, started, best, done)) {
        best.stopped_by_time_limit = true;
        break;
      }
    }
    return best;
  }

 private:
  const cluster::cluster* cluster_;
  train::parallelism shape_;
  Cost cost_;
  std::uint64_t seed_ = 0;
  std::int64_t iterations_ = 20000;
  double time_limit_s_ = std::numeric_limits<double>::infinity();
  double initial_temperature_ = 1.0;
  double cooling_ = 0.95;
  int chains_ = 4;
  bool node_blocks_ = false;
  order_watch watch_;
  progress_hook progress_;

  static constexpr std::int64_t levels = 100;  ///< temperatures per chain

  /// A move that keeps every node's used ranks consecutive (node_blocks): six in ten exchange two ranks of
  /// one node's block, four in ten exchange two whole blocks; the rank exchanges that realise it, in order.
  void draw_block_move(std::mt19937_64& rng, const cluster::cluster& work, int used,
                       std::vector<std::pair<int, int>>& swaps) const {
    using detail::ranks::draw_below;
    swaps.clear();
    // The blocks of consecutive used ranks on one node: (first rank, length).
    std::vector<std::pair<int, int>> blocks;
    for (int r = 0; r < used; ++r) {
      if (r == 0 || work.node_at(r) != work.node_at(r - 1)) {
        blocks.emplace_back(r, 1);
      } else {
        ++blocks.back().second;
      }
    }
    const std::uint64_t kind = draw_below(rng, 10);
    if (kind >= 6 && blocks.size() >= 2) {
      const auto a = static_cast<std::size_t>(draw_below(rng, blocks.size()));
      auto b = static_cast<std::size_t>(draw_below(rng, blocks.size() - 1));
      if (b >= a) ++b;
      // The target order of the used ranks: the blocks with a and b exchanged.
      std::vector<int> target;
      target.reserve(static_cast<std::size_t>(used));
      for (std::size_t k = 0; k < blocks.size(); ++k) {
        const auto& [first, length] = blocks[k == a ? b : k == b ? a : k];
        for (int i = 0; i < length; ++i) target.push_back(work.device_of_rank(first + i));
      }
      // Exchanges that turn the current order into it (each puts one rank's device in place).
      std::vector<int> current(static_cast<std::size_t>(used));
      std::vector<int> rank_of(static_cast<std::size_t>(work.devices()), -1);
      for (int r = 0; r < used; ++r) {
        current[static_cast<std::size_t>(r)] = work.device_of_rank(r);
        rank_of[static_cast<std::size_t>(current[static_cast<std::size_t>(r)])] = r;
      }
      for (int r = 0; r < used; ++r) {
        const int want = target[static_cast<std::size_t>(r)];
        const int at = rank_of[static_cast<std::size_t>(want)];
        if (at == r) continue;
        swaps.emplace_back(r, at);
        const int moved = current[static_cast<std::size_t>(r)];
        current[static_cast<std::size_t>(at)] = moved;
        rank_of[static_cast<std::size_t>(moved)] = at;
        current[static_cast<std::size_t>(r)] = want;
        rank_of[static_cast<std::size_t>(want)] = r;
      }
      return;
    }
    const auto& [first, length] = blocks[static_cast<std::size_t>(draw_below(rng, blocks.size()))];
    if (length < 2) return;  // nothing to exchange: the step evaluates the order as it is
    const int x = first + static_cast<int>(draw_below(rng, static_cast<std::uint64_t>(length)));
    int y = first + static_cast<int>(draw_below(rng, static_cast<std::uint64_t>(length - 1)));
    if (y >= x) ++y;
    swaps.emplace_back(x, y);
  }

  /// The rank exchanges of one move, applied in order (undone in reverse order).
  void draw_move(std::mt19937_64& rng, int used, int devices, std::vector<std::pair<int, int>>& swaps) const {
    using detail::ranks::draw_below;
    swaps.clear();
    const int tp = shape_.tp;
    const int stage = shape_.tp * shape_.dp;
    const std::uint64_t kind = draw_below(rng, 10);
    // A block move: block x (a used one) and block y of `size` ranks among the blocks below `devices`.
    auto blocks = [&](int size, int used_blocks) {
      const int all = devices / size;
      const int x = static_cast<int>(draw_below(rng, static_cast<std::uint64_t>(used_blocks)));
      int y = static_cast<int>(draw_below(rng, static_cast<std::uint64_t>(all - 1)));
      if (y >= x) ++y;
      for (int i = 0; i < size; ++i) swaps.emplace_back(x * size + i, y * size + i);
    };
    if (kind == 4 && tp > 1 && devices / tp >= 2) {
      blocks(tp, used / tp);
    } else if (kind == 5 && stage > 1 && devices / stage >= 2) {
      blocks(stage, shape_.pp);
    } else if (kind >= 8 && used >= 3) {
      // Move one used rank's device to another position of the used ranks, shifting those between.
      const int x = static_cast<int>(draw_below(rng, static_cast<std::uint64_t>(used)));
      int y = static_cast<int>(draw_below(rng, static_cast<std::uint64_t>(used - 1)));
      if (y >= x) ++y;
      const int step = y > x ? 1 : -1;
      for (int i = x; i != y; i += step) swaps.emplace_back(i, i + step);
    } else if (kind >= 6 && used >= 3) {
      // Reverse a run of used ranks: a pipeline (or ring) keeps its links inside the run, turned around.
      int x = static_cast<int>(draw_below(rng, static_cast<std::uint64_t>(used)));
      int y = static_cast<int>(draw_below(rng, static_cast<std::uint64_t>(used - 1)));
      if (y >= x) ++y;
      if (x > y) std::swap(x, y);
      for (; x < y; ++x, --y) swaps.emplace_back(x, y);
    } else {
      const int x = static_cast<int>(draw_below(rng, static_cast<std::uint64_t>(used)));
      int y = static_cast<int>(draw_below(rng, static_cast<std::uint64_t>(devices - 1)));
      if (y >= x) ++y;
      swaps.emplace_back(x, y);
    }
  }

  /// One chain of `steps` moves from `work` at cost `current`; updates `best`. False when the time limit
  /// stopped it.
  bool anneal(cluster::cluster& work, double current, int used, std::int64_t steps, std::mt19937_64& rng,
              std::chrono::steady_clock::time_point started, rank_assignment& best,
              std::int64_t& done) const {
    const int devices = work.devices();
    if (devices < 2 || steps == 0) return true;
    const double scale = current > 0.0 && current < std::numeric_limits<double>::infinity() ? current : 1.0;
    const std::int64_t per_level = std::max<std::int64_t>(1, steps / levels);
    double temperature = initial_temperature_ * scale;
    std::vector<std::pair<int, int>> swaps;
    for (std::int64_t i = 0; i < steps; ++i, ++done) {
      if (progress_ && done % 256 == 0) {
        progress_({"rank orders", static_cast<std::uint64_t>(done), static_cast<std::uint64_t>(iterations_),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()});
      }
      if (i % 64 == 63 &&
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() > time_limit_s_)
        return false;
      if (i > 0 && i % per_level == 0) temperature *= cooling_;
      if (node_blocks_) {
        draw_block_move(rng, work, used, swaps);
      } else {
        draw_move(rng, used, devices, swaps);
      }
      for (const auto& [x, y] : swaps) {
        work.swap_ranks(x, y);
        if (watch_.exchanged) watch_.exchanged(x, y);
      }
      const double next = detail::ranks::sane(cost_(work));
      ++best.evaluated;
      const double u =
          detail::ranks::draw_unit(rng);  // drawn every step: the stream does not depend on costs
      const bool accept =
          next <= current || (next < std::numeric_limits<double>::infinity() && temperature > 0.0 &&
                              u < detail::ranks::exp_neg((next - current) / temperature));
      if (!accept) {
        for (auto it = swaps.rbegin(); it != swaps.rend(); ++it) {
          work.swap_ranks(it->first, it->second);
          if (watch_.exchanged) watch_.exchanged(it->first, it->second);
        }
        continue;
      }
      current = next;
      if (current < best.cost) {
        best.cost = current;
        best.order = work.order();
      }
    }
    return true;
  }
};

}  // namespace phaze::place
