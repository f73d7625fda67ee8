// `phaze search [MODEL] [--spec FILE] [--devices N] [--global-batch B] [--seq S] [--vocab V]
// [--microbatches LIST] [--recompute LIST] [--tp LIST] [--hbm LIST] [--threads N]
// [--exhaustive] [--out DIR] [--resume] [--no-baselines] [--top K] [--quiet] [--format table|json]`:
// the accelerator x training-plan co-search (docs/search.md). Threads with oneTBB;
// processes with Open MPI when started by mpirun.
// `phaze search MODEL --cluster-space FILE --global-batch B [--seq S] [--vocab V] [--microbatches LIST]
// [--recompute LIST] [--tp LIST] [--exhaustive] [--solver ilp|list] [--out DIR] [--format table|json]`:
// which cluster to build, the Pareto fronts of throughput vs cost and vs power over the device mixes of a
// cluster space (docs/cluster-search.md).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <mpi.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "option_words.hpp"
#include "phaze/core/error.hpp"
#include "phaze/io/bounded_file.hpp"
#include "phaze/io/cluster_front_svg.hpp"
#include "phaze/io/cluster_space_json.hpp"
#include "phaze/io/model_source.hpp"
#include "phaze/io/results_file.hpp"
#include "phaze/io/search_json.hpp"
#include "phaze/io/search_report.hpp"
#include "phaze/io/table.hpp"
#include "phaze/search/cluster_space.hpp"
#include "phaze/search/engine.hpp"

namespace phaze::cli {

namespace {
/// The model a search runs when none is given: the headline of the README's first command.
constexpr const char* default_model = "gpt3-175b";

struct search_options {
  std::string model;
  std::string spec;
  int devices = 0;
  std::int64_t global_batch = 0;
  std::int64_t sequence = 0;
  std::int64_t vocab = 0;
  std::vector<std::int64_t> microbatches;
  std::vector<std::string> recompute;
  std::vector<int> tp;
  std::vector<double> hbm_gib;
  int threads = 0;
  bool exhaustive = false;
  std::string out = "phaze-search";
  bool resume = false;
  bool no_baselines = false;
  std::size_t top = 10;
  bool quiet = false;
  bool progress = false;  // --progress: progress lines also when stderr is not a terminal
  std::string solver = "ilp";
  std::string placer = "chain";
  std::string format = "table";
  step_options step;
  std::string cluster_space;  ///< set: the cluster search (which cluster to build) instead of the co-search
};

/// MPI when the program was started by mpirun (Open MPI sets OMPI_COMM_WORLD_SIZE; other launchers PMI_*).
class mpi_session {
 public:
  mpi_session() {
    if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMI_SIZE") == nullptr) return;
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    active_ = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~mpi_session() {
    if (active_) MPI_Finalize();
  }
  mpi_session(const mpi_session&) = delete;
  mpi_session& operator=(const mpi_session&) = delete;
  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int size() const { return size_; }
  [[nodiscard]] bool active() const { return active_; }

  /// Every rank's strings, concatenated in rank order.
  [[nodiscard]] std::vector<std::string> all_gather(const std::vector<std::string>& mine) const {
    std::string packed;
    for (const auto& s : mine) packed += s + '\n';
    int length = static_cast<int>(packed.size());
    std::vector<int> lengths(static_cast<std::size_t>(size_));
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<int> offsets(lengths.size(), 0);
    for (std::size_t i = 1; i < lengths.size(); ++i) offsets[i] = offsets[i - 1] + lengths[i - 1];
    std::string all(static_cast<std::size_t>(offsets.back() + lengths.back()), '\0');
    MPI_Allgatherv(packed.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR,
                   MPI_COMM_WORLD);
    std::vector<std::string> out;
    std::istringstream lines(all);
    for (std::string line; std::getline(lines, line);) out.push_back(line);
    return out;
  }

 private:
  bool active_ = false;
  int rank_ = 0;
  int size_ = 1;
};

search::spec make_spec(const search_options& o) {
  search::spec s;
  if (!o.spec.empty()) {
    s = io::read_search_spec(o.spec, o.model, default_model);
  } else {
    s.model = io::load_model(o.model.empty() ? default_model : o.model);
  }
  if (o.vocab > 0) s.model = model::with_vocab(s.model, o.vocab);
  if (o.devices > 0) s.devices = o.devices;
  if (o.global_batch > 0) s.global_batch = o.global_batch;
  if (o.sequence > 0) s.sequence = o.sequence;
  if (!o.microbatches.empty()) s.knobs.microbatches = o.microbatches;
  if (!o.recompute.empty()) {
    s.knobs.recompute.clear();
    for (const auto& r : o.recompute) s.knobs.recompute.push_back(train::parse_recompute(r));
  }
  if (!o.tp.empty()) s.knobs.tensor_parallel = o.tp;
  if (!o.hbm_gib.empty()) {
    if (o.hbm_gib.size() > hw::space::max_values)
      throw input_error(
          fmt::format("--hbm: {} sizes given; a dimension of the space takes at most {} "
                      "(docs/limits.md): give fewer",
                      o.hbm_gib.size(), hw::space::max_values));
    hw::space::values_type values;
    for (const double g : o.hbm_gib) values.push_back(g * 1024.0 * 1024.0 * 1024.0);
    s.space.set_values(hw::axis::hbm, values);
  }
  search::validate(s);
  return s;
}

/// SIGINT and SIGTERM during a search: the records written so far stay in results.jsonl (each line is
/// flushed as it is finished; a line cut in the middle is dropped on resume), and the program says how many
/// there are and the command that continues, then exits with 128 + the signal's number.
namespace interruption {
inline std::atomic<std::size_t> finished{0};  ///< records in results.jsonl, counted as they are written
inline std::string before_count;              // "\nphaze: interrupted; "
inline std::string
    after_count;  // " designs finished are kept in ...; continue with:\n  phaze ... --resume\n"

inline void write_all(const char* text, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0) return;
    text += n;
    size -= static_cast<std::size_t>(n);
  }
}

inline void on_signal(int signal_number) {
  // Only async-signal-safe calls here: write(2) and _exit(2).
  write_all(before_count.data(), before_count.size());
  char digits[24];
  std::size_t n = finished.load();
  std::size_t length = 0;
  do {
    digits[sizeof digits - 1 - length++] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n > 0 && length < sizeof digits);
  write_all(digits + sizeof digits - length, length);
  write_all(after_count.data(), after_count.size());
  ::_exit(128 + signal_number);
}

/// Installs the handlers for a search writing `results`, `done` records already in it.
inline void arm(const std::filesystem::path& results, std::size_t done) {
  finished.store(done);
  std::string command = "phaze";
  bool resuming = false;
  const auto& args = command_line();
  for (std::size_t i = 1; i < args.size(); ++i) {
    command += " " + shell_quoted(args[i]);
    resuming = resuming || args[i] == "--resume";
  }
  if (!resuming) command += " --resume";
  before_count = "\nphaze: interrupted; ";
  after_count = " designs finished are kept in " + results.string() + "; continue with:\n  " + command + "\n";
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}
}  // namespace interruption

/// SIGINT and SIGTERM during a cluster-space search in one process: the first asks the search to stop
/// after the compositions being planned (search::cluster_search::stop_when), so that the fronts of those
/// searched are printed and written; a second one ends the program at once.
namespace stop_request {
/// The signal that asked to stop; 0: none. Atomic, since the signal may land on any of the search's threads
/// while the main thread reads it; lock-free, so the handler may write it.
inline std::atomic<int> caught{0};
static_assert(std::atomic<int>::is_always_lock_free);

inline void on_signal(int signal_number) {
  // Only async-signal-safe calls here: write(2), _exit(2) and a lock-free atomic.
  if (caught.load() != 0) ::_exit(128 + signal_number);
  caught.store(signal_number);
  static constexpr char said[] =
      "\nphaze: stopping after the compositions being planned; the fronts of those searched follow "
      "(again to quit at once)\n";
  interruption::write_all(said, sizeof said - 1);
}

inline void arm() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;  // a write the signal lands in goes on
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

/// Once the search has returned: a signal ends the program again, as it would any other.
inline void disarm() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}
}  // namespace stop_request

/// The plan choices of a cluster search: uneven stages, the microbatch sizes, recomputation modes and
/// tensor-parallel widths the options list; list schedules unless --solver ilp is given.
place::plan_choices cluster_search_choices(const search_options& o, bool ilp_given) {
  place::plan_choices choices;
  choices.placement = place::stage_placement::uneven;
  for (const std::int64_t mb : o.microbatches) {
    if (mb < 1) throw input_error("--microbatches: every size must be a positive whole number");
  }
  choices.microbatches = o.microbatches;
  for (const auto& r : o.recompute) choices.recompute.push_back(train::parse_recompute(r));
  for (const int tp : o.tp) {
    if (tp < 1) throw input_error("--tp: every width must be a positive whole number");
  }
  choices.tensor_parallel = o.tp;
  // List schedules by default (optimal on GPUs: one kernel at a time); with --solver ilp each composition's
  // best plan is exact under ILP schedules (place::search_plans' refinement).
  if (ilp_given && o.solver == "ilp") choices.refine = scheduler_for("ilp");

  return choices;
}

/// Exit 3 with the reason when no composition of the space has a plan that fits; `limits` says the budget
/// and the power cap.
void refuse_empty_front(const search::cluster_search_result& found, const search_options& o,
                        const std::string& limits) {
  if (found.compositions.empty()) {
    throw infeasible_error(fmt::format(
        "no composition of '{}' fits {}: each needs at least one device, and the types' min counts; raise "
        "budget_usd (or power_cap_w) or lower min",
        o.cluster_space, limits));
  }
  if (found.cost_front.empty()) {
    bytes leanest{0.0};
    for (const auto& p : found.compositions) {
      if (p.smallest_memory_need.value() > 0.0 &&
          (leanest.value() == 0.0 || p.smallest_memory_need < leanest))
        leanest = p.smallest_memory_need;
    }
    throw infeasible_error(fmt::format(
        "none of the {} compositions within {} has a plan that fits{}; raise the budget or the counts, or "
        "allow recomputation and smaller microbatches",
        found.compositions.size(), limits,
        leanest.value() > 0.0
            ? fmt::format(" (the leanest plan needs {} per device)", io::format_bytes(leanest))
            : std::string{" (no tensor-parallel width, depth and microbatch divide the "
                          "model, the devices and the batch)"}));
  }
}

/// The cluster search's text report: the two Pareto fronts and where their layer times come from.
void print_cluster_fronts(const io::cluster_space_description& space,
                          const search::cluster_search_result& found, const model::model& m,
                          const train::training_knobs& base, const std::string& limits) {
  const search::cluster_space& s = space.value;
  double worst = 0.0;
  for (const auto& p : found.cost_front) worst = std::max(worst, p.plan->schedule_gap);
  print_text(fmt::format(
      "{}, global batch {}, cluster space {} ({}, at most {} device type{} per cluster): {} compositions, {} "
      "planned ({} without a plan that fits), {} pruned by the bound; {} plans in {:.1f} s\n",
      m.config.name.view(), base.global_batch, space.name, limits, s.max_types, s.max_types == 1 ? "" : "s",
      found.compositions.size(), found.evaluated, found.infeasible, found.pruned, found.plans_evaluated,
      found.seconds));
  print_text(
      fmt::format("layer times: {}\n", schedules_text(found.cost_front.back().plan->scheduler, worst)));
  print_text("\nPareto front, throughput vs cost (increasing cost):\n" +
             io::cluster_front_table(s, found.cost_front));
  print_text("\nPareto front, throughput vs power (increasing power):\n" +
             io::cluster_front_table(s, found.power_front));
}

/// Compositions per round of a cluster search: the pruning test of a round sees the points of the rounds
/// before it only, so the round is fixed, and the counts (compositions planned, pruned, plans timed) are
/// the same for any number of threads; under mpirun at least cluster_round_per_process to each process, so
/// that the all-gather after a round does not keep them waiting long (the counts then depend on the
/// processes above two). The fronts are the same for any round.
inline constexpr std::size_t cluster_round = 16;
inline constexpr std::size_t cluster_round_per_process = 8;

/// The map of a cluster search: process q (0 in one process) plans the round's compositions q, q + size, ...
/// on its thread pool (each composition's plan search on one thread); under mpirun every process then has
/// every point's status, throughput, plans timed and memory need (one JSON line each, an all-gather), the
/// plans staying where they were made (cluster_search::complete plans the fronts' again).
search::cluster_map cluster_map_of(mpi_session& mpi) {
  return [&mpi](const std::vector<std::size_t>& todo,
                const std::function<search::cluster_point(std::size_t)>& plan) {
    std::vector<search::cluster_point> out(todo.size());
    std::vector<std::size_t> mine;
    for (std::size_t j = static_cast<std::size_t>(mpi.rank()); j < todo.size();
         j += static_cast<std::size_t>(mpi.size()))
      mine.push_back(j);
    oneapi::tbb::parallel_for(std::size_t{0}, mine.size(),
                              [&](std::size_t t) { out[mine[t]] = plan(todo[mine[t]]); });
    if (!mpi.active()) return out;
    std::vector<std::string> lines;
    for (const std::size_t j : mine) {
      const search::cluster_point& p = out[j];
      lines.push_back(nlohmann::json{{"status", static_cast<int>(p.status)},
                                     {"samples_per_s", p.samples_per_s},
                                     {"plans_evaluated", p.plans_evaluated},
                                     {"memory_need", p.smallest_memory_need.value()}}
                          .dump());
    }
    const auto all = mpi.all_gather(lines);
    // `all` lists rank 0's points, then rank 1's, ...; rank q's are the round's q, q + size, ...
    std::size_t k = 0;
    for (int q = 0; q < mpi.size(); ++q) {
      for (std::size_t j = static_cast<std::size_t>(q); j < todo.size();
           j += static_cast<std::size_t>(mpi.size()), ++k) {
        if (q == mpi.rank()) continue;
        const nlohmann::json line = nlohmann::json::parse(all.at(k));
        search::cluster_point& p = out[j];
        p.status = static_cast<search::outcome>(line.at("status").get<int>());
        p.samples_per_s = line.at("samples_per_s").get<double>();
        p.plans_evaluated = line.at("plans_evaluated").get<std::size_t>();
        p.smallest_memory_need = bytes{line.at("memory_need").get<double>()};
      }
    }
    return out;
  };
}

/// `phaze search MODEL --cluster-space FILE --global-batch B ...`: the device mixes of a cluster space on the
/// Pareto fronts of throughput vs cost and vs power, each with its best plan (search::cluster_search).
/// `parser` tells which options were given: those of the design search are refused, and the layer times
/// are list schedules unless --solver ilp is given.
int run_cluster_search(const search_options& o, const CLI::App& parser, mpi_session& mpi) {
  auto given = [&](const char* name) { return parser.get_option(name)->count() > 0; };
  for (const char* name :
       {"--spec", "--devices", "--hbm", "--resume", "--no-baselines", "--top", "--placer"}) {
    if (given(name)) {
      throw input_error(
          fmt::format("{} is an option of the design search; it does not apply with --cluster-space", name));
    }
  }
  if (o.model.empty())
    throw input_error("phaze search --cluster-space needs MODEL (a zoo name or a HuggingFace config.json)");
  if (!given("--global-batch")) throw input_error("phaze search --cluster-space needs --global-batch B");
  io::cluster_space_description space = io::read_cluster_space_file(o.cluster_space);
  if (!o.step.calibration.empty()) {
    const train::calibration cal = calibration_of(o.step);
    for (auto& offer : space.value.devices) offer.device = train::calibrated(offer.device, cal);
    space.value.efficiency.calibrated = cal.collective;
  }
  model::model m = io::load_model(o.model);
  if (o.sequence > 0) m = model::with_sequence(m, o.sequence);
  if (o.vocab > 0) m = model::with_vocab(m, o.vocab);
  train::training_knobs base;
  base.global_batch = o.global_batch;
  base.sequence = o.sequence;
  std::vector<hw::device> offered;
  for (const auto& offer : space.value.devices) offered.push_back(offer.device);
  apply_step_options(o.step, base, offered);
  m = apply_model_options(o.step, std::move(m), base);
  const place::plan_choices choices = cluster_search_choices(o, given("--solver"));
  const bool root = mpi.rank() == 0;
  // The output folder is made and locked before the work that fills it: a folder that cannot be made, or
  // that another phaze is writing, is refused before the search, not after it.
  std::optional<folder_lock> lock;
  if (given("--out") && root) lock.emplace(made_and_locked(o.out));
  progress_line line(o.progress && root);
  search::cluster_search search = search::cluster_search(space.value, m, base)
                                      .choices(choices)
                                      .exhaustive(o.exhaustive)
                                      .progress(o.quiet || !root ? progress_hook{} : line.hook());
  // Each round's compositions are dealt to the processes and planned on their threads (cluster_map_of);
  // in one process a signal stops the search between rounds, keeping what it planned (stop_request).
  std::optional<oneapi::tbb::global_control> limit;
  if (o.threads > 0) limit.emplace(oneapi::tbb::global_control::max_allowed_parallelism, o.threads);
  search.map(cluster_map_of(mpi),
             std::max(cluster_round, cluster_round_per_process * static_cast<std::size_t>(mpi.size())));
  if (!mpi.active()) {
    stop_request::arm();
    search.stop_when([] { return stop_request::caught.load() != 0; });
  }
  search::cluster_search_result found = search.run();
  if (!mpi.active()) stop_request::disarm();
  line.finish();
  if (!root) return 0;
  if (mpi.active()) search.complete(found);  // the fronts' points other processes planned
  const int stopped_by = found.unsearched > 0 ? stop_request::caught.load() : 0;
  if (stopped_by != 0) {
    fmt::print(stderr,
               "phaze: interrupted: {} of {} compositions searched (the cheapest, in cost order), {} left",
               found.compositions.size(), found.compositions.size() + found.unsearched, found.unsearched);
    if (found.cost_front.empty()) {
      fmt::print(stderr, "; none of them has a plan that fits yet, so there is no front to print or write\n");
      return 128 + stopped_by;
    }
    fmt::print(stderr, "; the fronts below are those of the compositions searched\n");
  }
  const search::cluster_space& s = space.value;
  const std::string limits =
      fmt::format("the budget of {:.0f} USD{}", s.budget_usd,
                  s.power_cap ? fmt::format(" and the power cap of {:.0f} W", s.power_cap->value()) : "");
  refuse_empty_front(found, o, limits);
  const nlohmann::ordered_json json = io::cluster_front_json(space, found, m, base);
  std::string written;
  if (given("--out")) {
    const std::filesystem::path dir = o.out;
    const std::string title =
        fmt::format("{}, global batch {}: throughput vs cost", m.config.name.view(), base.global_batch);
    io::report_files files{dir};
    files.add("front.json", io::dump_json(json) + '\n');
    files.add("front.svg", io::cluster_front_svg(s, found, title));
    files.commit();
    written = fmt::format("\nfront.json and front.svg in {}/\n", dir.string());
  }
  if (parse_format(o.format) == output_format::json) {
    print_json(io::schemas::cluster_front, json);
    return stopped_by != 0 ? 128 + stopped_by : 0;
  }
  print_cluster_fronts(space, found, m, base, limits);
  print_text(written);
  return stopped_by != 0 ? 128 + stopped_by : 0;
}

int search_with(const search_options& o, mpi_session& mpi);

/// One progress line on stderr, rewritten in place (docs/search-report.md). The ETA is the designs still to
/// evaluate at most (progress::open: those the pruning test does not rule out yet) at the mean time of the
/// designs this run evaluated so far; pruned designs take no time and do not count.
void print_progress(const search::progress& p, bool terminal) {
  if (p.refining && p.total == 0) return;  // nothing to refine
  const double rate = p.seconds > 0 ? static_cast<double>(p.placed) / p.seconds : 0.0;
  const std::string eta =
      rate > 0 ? fmt::format("{:.0f} s", static_cast<double>(p.open) / rate) : std::string{"unknown"};
  const std::string line =
      p.refining
          ? fmt::format("[refining: {}/{} placed again] {:.1f} designs/s, ETA {}", p.done, p.total, rate, eta)
          : fmt::format("[{}/{} designs] {} evaluated, at most {} to go, {:.1f} designs/s, ETA {}", p.done,
                        p.total, p.placed, p.open, rate, eta);
  if (!terminal) {
    std::fprintf(stderr, "%s\n", line.c_str());  // --progress into a log: one line per report
    return;
  }
  std::fprintf(stderr, "\r%s\x1b[K", line.c_str());  // on a terminal: erase what a longer line left
  if (p.open == 0 && (p.refining || p.done == p.total)) std::fprintf(stderr, "\n");
}

/// Runs `body(mpi)` in an MPI session (active under mpirun).
template <class Body>
int with_mpi(Body body) {
  mpi_session mpi;
  if (!mpi.active()) return body(mpi);
  // Under mpirun an error on one rank would leave the others waiting in a collective forever: report it and
  // end the whole job with the error's exit code.
  try {
    return body(mpi);
  } catch (const error& e) {
    std::fprintf(stderr, "phaze: error: %s\n", cli::in_option_words(e.what()).c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, static_cast<int>(e.code()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "phaze: error: %s\n", e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, static_cast<int>(exit_code::internal_error));
  }
  return static_cast<int>(exit_code::internal_error);
}

/// The co-search's options from the command line's.
search::options engine_options_of(const search_options& o) {
  search::options opt;
  opt.exhaustive = o.exhaustive;
  opt.top = o.top;
  opt.baselines = !o.no_baselines;
  // Designs are ordered and pruned on list schedules; with the ILP (the default) every design that could be
  // reported is placed again on ILP schedules, so the top list, the front and the baselines are exact under
  // the ILP (search::refine).
  if (o.solver == "ilp") opt.refine = scheduler_for("ilp");
  opt.placer = model_placer_for(o.placer);
  return opt;
}

/// What spec.json records of a search: its spec, and what a resume must repeat (pruning, solver, placer).
nlohmann::ordered_json spec_record(const search_options& o, const search::spec& s) {
  nlohmann::ordered_json spec_json = io::with_schema(io::schemas::search_run, io::spec_to_json(s));
  spec_json["exhaustive"] = o.exhaustive;  // a resume must prune and refine as the run it continues
  spec_json["solver"] = o.solver;
  if (o.placer != "chain") spec_json["placer"] = o.placer;
  return spec_json;
}

/// The records of an earlier run of the same search (--resume), read back and checked, and their lines.
struct resumed_records {
  std::vector<search::design_result> results;
  std::vector<std::string> lines;
  std::optional<folder_lock> lock;  ///< on rank 0: the folder is this search's until it ends
};

/// Prepares the output folder on rank 0: with --resume, reads back the records of the same search (its
/// spec.json equal to this run's) and rewrites results.jsonl without a line torn by a kill; without, starts
/// spec.json and an empty results.jsonl.
resumed_records open_search_folder(const search_options& o, const search::spec& s, const search::options& opt,
                                   const nlohmann::ordered_json& spec_json) {
  const std::filesystem::path dir = o.out;
  const auto results_file = dir / "results.jsonl";
  const auto spec_file = dir / "spec.json";
  resumed_records out;
  auto& resumed = out.results;
  auto& resumed_lines = out.lines;
  out.lock.emplace(made_and_locked(dir));
  if (o.resume) {
    // Resume only the same search: its spec.json, read whole and equal to this run's.
    nlohmann::json before;
    try {
      before = io::read_json_file(spec_file, io::file_rules::search_run);
    } catch (const input_error& e) {
      throw input_error("--resume: '" + dir.string() + "' holds no readable spec.json (" + e.what() +
                        "), so phaze cannot tell which search its results belong to; run without --resume "
                        "to start afresh (it overwrites the folder), or give the --out of the search to "
                        "continue");
    }
    if (before != nlohmann::json(spec_json)) {
      throw input_error("--resume: '" + dir.string() +
                        "' holds results of a different search (spec.json differs); give another --out or "
                        "drop --resume");
    }
    std::error_code lookup;  // an unreadable path is a missing file here; read_results_file names errors
    if (std::filesystem::exists(results_file, lookup))
      resumed = io::read_results_file(results_file, s, opt, resumed_lines);
    // Rewrite the file with the lines read, dropping a line torn by the kill.
    std::string kept;
    for (const auto& line : resumed_lines) kept += line + '\n';
    write_atomically(results_file, kept);
  } else {
    write_atomically(spec_file, io::dump_json(spec_json) + '\n');
    std::ofstream(results_file, std::ios::trunc);
  }
  return out;
}

/// results.jsonl as the search writes it on rank 0: a line per finished design, flushed at once. A line that
/// cannot be written stops the search: the records before it are on disk, and a resume continues from them.
class results_writer {
 public:
  results_writer(std::filesystem::path file, bool root, std::size_t resumed)
      : file_(std::move(file)), root_(root) {
    if (!root_) return;
    out_.open(file_, std::ios::app);
    interruption::arm(file_, resumed);
  }
  /// A design's record as one line of results.jsonl.
  static std::string line_of(const search::design_result& r) {
    return io::dump_json(io::with_schema(io::schemas::search_result, io::result_json(r)), -1);
  }
  void write_line(const std::string& line) {
    if (!root_) return;
    const std::lock_guard lock(writing_);
    out_ << line << '\n' << std::flush;
    if (!out_) {
      throw input_error(
          fmt::format("cannot write '{}' (disk full or not writable?); the {} designs finished "
                      "before are kept in it: free space and run the same command with --resume",
                      file_.string(), interruption::finished.load()));
    }
    ++interruption::finished;
  }
  /// Flushes the file; an error when it could not be written.
  void finish() {
    out_.flush();
    if (!out_) throw input_error("cannot write '" + file_.string() + "' (disk full or not writable?)");
  }

 private:
  std::filesystem::path file_;
  bool root_ = false;
  std::mutex writing_;
  std::ofstream out_;
};

/// The hooks of a search: each round on this rank's share, on the thread pool, then (under MPI) every
/// rank's results; records written as designs finish; progress on a terminal.
search::hooks search_hooks(mpi_session& mpi, const search::spec& s, results_writer& writer, bool show,
                           bool terminal, bool forced) {
  search::hooks h;
  h.finished = [&writer](const search::design_result& r) { writer.write_line(results_writer::line_of(r)); };
  // The map of a round. With `record`, rank 0 also writes the other ranks' results to results.jsonl (its own
  // are written as they finish, by `finished`).
  auto make_map = [&mpi, &s, &writer](bool record) {
    return [&mpi, &s, &writer, record](std::size_t n,
                                       const std::function<search::design_result(std::size_t)>& f) {
      std::vector<search::design_result> out(n);
      std::vector<std::size_t> mine;
      for (std::size_t i = static_cast<std::size_t>(mpi.rank()); i < n;
           i += static_cast<std::size_t>(mpi.size()))
        mine.push_back(i);
      oneapi::tbb::parallel_for(std::size_t{0}, mine.size(),
                                [&](std::size_t t) { out[mine[t]] = f(mine[t]); });
      if (!mpi.active()) return out;
      std::vector<std::string> lines;
      for (const std::size_t i : mine) lines.push_back(results_writer::line_of(out[i]));
      const auto all = mpi.all_gather(lines);
      // Positions of rank q's results: q, q + size, ... in order; `all` lists rank 0's, then rank 1's, ...
      std::size_t k = 0;
      const hw::space::design_table designs = s.space.designs();
      for (int q = 0; q < mpi.size(); ++q) {
        for (std::size_t i = static_cast<std::size_t>(q); i < n;
             i += static_cast<std::size_t>(mpi.size()), ++k) {
          if (q == mpi.rank()) continue;
          // The estimate is recomputed only for the designs the summary reports (search::run).
          out[i] = io::result_from_json(nlohmann::json::parse(all[k]), s, designs);
          if (record) writer.write_line(all[k]);
        }
      }
      return out;
    };
  };
  h.map = make_map(true);
  h.exchange = make_map(false);
  // Into a log with --progress: a line a second, and each pass's last; without --progress, a line every
  // log_progress_every_s once the search has run that long (a quick search prints nothing).
  h.report = [show, terminal, forced, started = std::chrono::steady_clock::now(),
              last = std::chrono::steady_clock::time_point{}](const search::progress& p) mutable {
    if (!show) return;
    const auto now = std::chrono::steady_clock::now();
    const std::chrono::duration<double> every{forced ? 1.0 : log_progress_every_s};
    if (!terminal && !forced && now - started < every) return;
    const bool ends = p.open == 0 && (p.refining || p.done == p.total);
    if (!terminal && !ends && now - last < every) return;
    last = now;
    print_progress(p, terminal);
  };
  return h;
}

/// The search's text report: the top designs and the baselines against the TPUv4-like reference, where the
/// layer times come from, and how to run the best plan again.
void print_search_text(const search::spec& s, const search::summary& sum, const std::filesystem::path& dir) {
  io::text_table t{{"#", "design", "area mm2", "plan", "samples/s", "MFU", "vs tpuv4-like"},
                   {io::align::right, io::align::left, io::align::right, io::align::left, io::align::right,
                    io::align::right, io::align::right}};
  double reference = 0.0;
  for (const auto& b : sum.baselines)
    if (b.name == "tpuv4-like") reference = b.result.samples_per_s;
  auto ratio = [&](double x) {
    return reference > 0 ? fmt::format("{:.2f}x", x / reference) : std::string{"-"};
  };
  for (std::size_t i = 0; i < sum.top.size(); ++i) {
    const auto& r = sum.top[i];
    t.add_row({std::to_string(i + 1), io::design_text(r.device), fmt::format("{:.0f}", r.die_area.value()),
               io::plan_text(r), fmt::format("{:.2f}", r.samples_per_s),
               fmt::format("{:.1f}%", 100.0 * r.estimate.mfu), ratio(r.samples_per_s)});
  }
  for (const auto& b : sum.baselines) {
    const auto& r = b.result;
    const bool placed = io::placed(r);
    t.add_row({b.name, io::design_text(r.device), fmt::format("{:.0f}", r.die_area.value()), io::plan_text(r),
               placed ? fmt::format("{:.2f}", r.samples_per_s) : "-",
               placed ? fmt::format("{:.1f}%", 100.0 * r.estimate.mfu) : "-", ratio(r.samples_per_s)});
  }
  print_text(
      fmt::format("{} on {} accelerators, global batch {}: {} designs, {} evaluated, {} pruned by the "
                  "bound, {} do not fit; {} configurations in {:.1f} s ({} threads, {} processes)\n",
                  sum.model, sum.devices, sum.global_batch, sum.designs, sum.evaluated, sum.pruned,
                  sum.infeasible, sum.configurations, sum.seconds, sum.threads, sum.processes));
  double worst = 0.0;
  for (const auto& r : sum.top) worst = std::max(worst, r.schedule_gap);
  print_text(
      sum.scheduler == "ilp"
          ? fmt::format("layer times: list schedules order and prune; the {} designs that could be reported "
                        "were placed again on ILP schedules (top designs: {})\n",
                        sum.refined, schedules_text("ilp", worst))
          : fmt::format("layer times: {}\n", schedules_text(sum.scheduler, worst)));
  print_text(t.render());
  print_text(fmt::format("\nthe best plan again, on the best design as a device file:\n  {}\n",
                         io::best_estimate_command(s, sum, (dir / "best-device.json").string())));
  print_text(fmt::format(
      "\nreports in {}/ (best.json, best-device.json, results.jsonl, pareto.csv, report.md, report.html, "
      "pareto.svg, timeline.svg)\n",
      dir.string()));
}

int search_with(const search_options& o, mpi_session& mpi) {
  const bool root = mpi.rank() == 0;
  search::spec s = make_spec(o);
  const std::filesystem::path dir = o.out;
  const search::options opt = engine_options_of(o);
  resumed_records resumed;
  if (root) resumed = open_search_folder(o, s, opt, spec_record(o, s));
  if (mpi.active()) {
    // Every rank resumes from the same records.
    const auto all = mpi.all_gather(root ? resumed.lines : std::vector<std::string>{});
    if (!root) {
      const hw::space::design_table designs = s.space.designs();
      for (const auto& line : all)
        resumed.results.push_back(io::result_from_json(nlohmann::json::parse(line), s, designs));
    }
  }

  std::optional<oneapi::tbb::global_control> limit;
  if (o.threads > 0) limit.emplace(oneapi::tbb::global_control::max_allowed_parallelism, o.threads);
  const int threads = o.threads > 0 ? o.threads : oneapi::tbb::this_task_arena::max_concurrency();
  results_writer writer(dir / "results.jsonl", root, resumed.lines.size());
  const bool terminal = isatty(STDERR_FILENO) != 0;
  const bool show = root && !o.quiet;
  search::summary sum =
      search::run(s, opt, search_hooks(mpi, s, writer, show, terminal, o.progress), resumed.results);
  sum.threads = threads;
  sum.processes = mpi.size();
  if (!root) return 0;

  writer.finish();
  // The search's files as one set: a failure leaves the previous ones whole (results.jsonl stays).
  io::report_files files{dir};
  files.add("best.json", io::dump_json(io::best_json(s, sum)) + '\n');
  files.add("best-device.json", io::dump_json(io::best_device_json(s, sum)) + '\n');
  io::add_search_report(files, sum);
  files.commit();
  if (parse_format(o.format) == output_format::json) {
    print_json(io::schemas::search_best, io::best_json(s, sum));
    return 0;
  }
  print_search_text(s, sum, dir);
  return 0;
}
}  // namespace

/// Runs `phaze search`: the design search, or with --cluster-space the cluster search; the options that do
/// not apply to the one asked for are refused by name.
int run_search_command(const search_options& o, const CLI::App& parser) {
  for (const char* name :
       {"--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"}) {
    if (parser.get_option(name)->count() > 0) {
      throw input_error(fmt::format(
          "{} sets Megatron-Core's even split, and `phaze search` places stages its own way; give it "
          "to `phaze plan` or `phaze estimate`",
          name));
    }
  }
  if (parser.get_option("--shard-gradients")->count() > 0) {
    throw input_error(
        "--shard-gradients shards the distributed optimizer's gradients, and `phaze search` plans "
        "without the distributed optimizer; plan a cluster with ZeRO-2 through `phaze plan "
        "--distributed-optimizer --shard-gradients`");
  }
  if (o.cluster_space.empty()) {
    for (const char* name :
         {"--attention", "--attention-kernel", "--cross-entropy", "--vector-kernels", "--overlap",
          "--memory-headroom", "--host-overhead", "--vocab-padding", "--grad-reduce-in-bf16",
          "--fp8-param-gather", "--fsdp", "--fsdp-shard", "--fsdp-reshard-after-forward", "--optimizer-dtype",
          "--bf16-blocks", "--calibration"}) {
      if (parser.get_option(name)->count() > 0) {
        throw input_error(
            fmt::format("{} applies to GPU clusters (--cluster-space); a design search's training step is "
                        "its spec's (docs/dsl.md)",
                        name));
      }
    }
    return with_mpi([&](mpi_session& mpi) { return search_with(o, mpi); });
  }
  return with_mpi([&](mpi_session& mpi) { return run_cluster_search(o, parser, mpi); });
}

command add_search_command(CLI::App& root) {
  auto o = std::make_shared<search_options>();
  CLI::App* parser = root.add_subcommand(
      "search", "Co-search accelerator designs and training plans (PHAZE's setting by default)");
  parser->add_option("MODEL", o->model, "a zoo name or a HuggingFace config.json (default: gpt3-175b)");
  parser->add_option("--spec", o->spec, "a JSON search spec (docs/search.md); options given here override it")
      ->check(non_empty_path);
  parser->add_option("--devices", o->devices, "accelerators in the cluster (default 1024)")
      ->check(device_count);
  parser->add_option("--global-batch", o->global_batch, "sequences per iteration (default 4096)")
      ->check(batch_size);
  parser->add_option("--seq", o->sequence, "sequence length (default: the model's)")->check(sequence_length);
  parser->add_option("--vocab", o->vocab, "vocabulary size (default: the model's)")->check(vocabulary_size);
  parser
      ->add_option("--microbatches", o->microbatches,
                   "microbatch sizes to try (default 1,2,4,8; with --cluster-space 1,2,4,8,16)")
      ->delimiter(',')
      ->check(batch_size);
  parser->add_option("--recompute", o->recompute, "recomputation modes to try (default none,selective,full)")
      ->delimiter(',')
      ->check(CLI::IsMember({"none", "selective", "full"}));
  parser->add_option("--tp", o->tp, "tensor-parallel widths to try (default: all that fit a node)")
      ->delimiter(',')
      ->check(device_count);
  parser->add_option("--hbm", o->hbm_gib, "HBM sizes in GiB (default 32,64,80)")
      ->delimiter(',')
      ->check(number_up_to(65536.0, "GiB, as a spec's hbm_gib; docs/limits.md"));
  parser->add_option("--threads", o->threads, "worker threads (default: all cores)")->check(positive_integer);
  parser->add_flag("--exhaustive", o->exhaustive, "evaluate every design (no pruning by the sound bound)");
  parser->add_option("--out", o->out, "output folder (default phaze-search)")->check(non_empty_path);
  parser->add_flag("--resume", o->resume, "continue the search whose results are in --out");
  parser->add_flag("--no-baselines", o->no_baselines, "skip the baselines");
  parser->add_option("--top", o->top, "designs listed (default 10)")->check(positive_integer);
  parser->add_flag("--quiet", o->quiet, "no progress on stderr");
  add_progress_option(*parser, o->progress);
  add_solver_option(*parser, o->solver, "ilp");
  parser
      ->add_option("--placer", o->placer,
                   "placer of each knob setting: chain (exact, default), downset (exact, slower), brute (at "
                   "most 16 layer nodes)")
      ->check(CLI::IsMember({"chain", "downset", "brute"}))
      ->default_str("chain");
  parser
      ->add_option(
          "--cluster-space", o->cluster_space,
          "search which cluster to build instead: the device mixes of this cluster-space file on the "
          "fronts of throughput vs cost and vs power (docs/cluster-search.md)")
      ->check(non_empty_path);
  add_step_options(*parser, o->step);
  add_format_option(*parser, o->format);
  return {parser, [o, parser] { return run_search_command(*o, *parser); }};
}

}  // namespace phaze::cli
