/// @file
/// Reads the text that NVIDIA nccl-tests prints (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
/// sendrecv_perf, ...) and fits the link one run implies for phaze's alpha-beta model (docs/nccl-tests.md).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "phaze/cluster/links.hpp"
#include "phaze/core/error.hpp"
#include "phaze/core/quantity.hpp"

namespace phaze::io::nccl {

/// The collectives phaze models; every other nccl-tests program (broadcast, reduce, alltoall, gather,
/// scatter, hypercube) reads as `other`.
enum class collective : std::uint8_t { all_reduce, all_gather, reduce_scatter, send_recv, other };

/// phaze's name of a collective: "all_reduce", "all_gather", "reduce_scatter", "send_recv", "other".
constexpr std::string_view collective_name(collective c) {
  switch (c) {
    case collective::all_reduce:
      return "all_reduce";
    case collective::all_gather:
      return "all_gather";
    case collective::reduce_scatter:
      return "reduce_scatter";
    case collective::send_recv:
      return "send_recv";
    case collective::other:
      break;
  }
  return "other";
}

/// The collective a name stands for: phaze's names ("all_reduce", "send_recv"), NCCL's ("allreduce",
/// "sendrecv"), and nccl-tests' program names as the output prints them, with a directory and a build
/// suffix or not ("./build/all_reduce_perf", "all_reduce_perf_mpi"). The other nccl-tests programs give
/// `other`; a name nccl-tests does not use gives nullopt.
constexpr std::optional<collective> collective_from_name(std::string_view name) {
  if (const auto slash = name.find_last_of('/'); slash != std::string_view::npos)
    name.remove_prefix(slash + 1);
  if (const auto perf = name.find("_perf"); perf != std::string_view::npos) name = name.substr(0, perf);
  if (name == "all_reduce" || name == "allreduce") return collective::all_reduce;
  if (name == "all_gather" || name == "allgather") return collective::all_gather;
  if (name == "reduce_scatter" || name == "reducescatter") return collective::reduce_scatter;
  if (name == "send_recv" || name == "sendrecv") return collective::send_recv;
  for (const std::string_view known :
       {"broadcast", "reduce", "alltoall", "alltoallv", "gather", "scatter", "hypercube", "other"}) {
    if (name == known) return collective::other;
  }
  return std::nullopt;
}

/// The largest text parse() reads (16 MiB: a sweep of 8 B to 8 GiB is 31 rows of about 120 characters; a
/// real output with NCCL_DEBUG=INFO lines stays far below it).
inline constexpr std::size_t max_text_bytes = std::size_t{16} << 20;
/// The most result rows parse() reads (a byte-step sweep of -i 1M up to 64 GiB is 65536 rows).
inline constexpr std::size_t max_rows = 100'000;

/// Which columns of a row: nccl-tests times every size twice, with separate send and receive buffers
/// (out-of-place) and with one buffer for both (in-place).
enum class placement : std::uint8_t { out_of_place, in_place };

/// One timing of one row: the average time of the operation and the two bandwidths nccl-tests derives
/// from it (algbw = size / time; busbw = algbw times the collective's factor, see bus_bandwidth_factor).
struct measurement {
  seconds time{0.0};
  bytes_per_second algorithm_bandwidth{0.0};
  bytes_per_second bus_bandwidth{0.0};
  /// "#wrong": elements that failed validation (nccl-tests 2.13 and later); before 2.13 the column is
  /// "error", the largest deviation from the expected value. nullopt where the output prints N/A
  /// (validation off with -c 0, or an in-place send/recv, which nccl-tests does not check).
  std::optional<double> wrong;
  friend bool operator==(const measurement&, const measurement&) = default;
};

/// One result line of a run.
struct row {
  bytes size{0.0};          ///< the message: the whole tensor (for all_gather the gathered output)
  std::uint64_t count = 0;  ///< elements as nccl-tests counts them (per rank for all_gather, reduce_scatter)
  std::string type;         ///< data type ("float", "bfloat16", ...)
  std::string redop;  ///< reduction; empty where the row has none (before 2.13 for all_gather, sendrecv)
  std::optional<int> root;  ///< the root column (2.13 and later; -1 where the operation has no root)
  std::optional<measurement> out_of_place;
  std::optional<measurement> in_place;
  std::size_t line = 0;  ///< line of the text the row was read from (1-based)
  friend bool operator==(const row&, const row&) = default;
};

/// What one nccl-tests output holds.
struct run {
  collective op = collective::other;
  std::string program;  ///< "all_reduce_perf" when the output names it (nccl-tests 2.16.7 and later)
  std::string version;  ///< nccl-tests' version when the output prints it ("2.19.6")
  int ranks = 0;        ///< distinct ranks of the "#  Rank ... on HOST device ..." lines
  std::vector<std::string> hosts;  ///< the hosts of those lines, each once, in order of appearance
  std::vector<row> rows;
  std::optional<bytes_per_second> average_bus_bandwidth;  ///< the "# Avg bus bandwidth" line
  std::string source;                                     ///< where the text came from (a file name)
  friend bool operator==(const run&, const run&) = default;
};

/// nccl-tests' bus bandwidth over its algorithm bandwidth for a collective over `ranks` ranks (nccl-tests'
/// doc/PERFORMANCE.md): 2 (n - 1) / n for all-reduce, (n - 1) / n for all-gather and reduce-scatter, 1 for
/// send/recv. A ring all-reduce moves 2 (n - 1) / n of the message over every rank's link (a reduce-scatter
/// and an all-gather, each n - 1 steps of message / n), so message / time * 2 (n - 1) / n is the rate each
/// link runs at, whatever n is: the bus bandwidth is the link's bandwidth as the collective uses it.
constexpr double bus_bandwidth_factor(collective c, int ranks) {
  const double n = ranks;
  switch (c) {
    case collective::all_reduce:
      return 2.0 * (n - 1.0) / n;
    case collective::all_gather:
    case collective::reduce_scatter:
      return (n - 1.0) / n;
    default:
      return 1.0;
  }
}

/// The message steps phaze's ring formulas charge one latency each (cost/collective.hpp): 2 (n - 1) for
/// all-reduce, n - 1 for all-gather and reduce-scatter, 1 for a point-to-point transfer.
constexpr int message_steps(collective c, int ranks) {
  switch (c) {
    case collective::all_reduce:
      return 2 * (ranks - 1);
    case collective::all_gather:
    case collective::reduce_scatter:
      return ranks - 1;
    default:
      return 1;
  }
}

namespace detail::nccl_text {

/// A field of a line and the column just past it (headers and rows are right-aligned on the same columns).
struct field {
  std::string_view text;
  std::size_t end = 0;
};

inline std::vector<field> split(std::string_view line) {
  std::vector<field> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const std::size_t begin = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > begin) out.push_back({line.substr(begin, i - begin), i});
  }
  return out;
}

struct where {
  std::string_view source;
  std::size_t line = 0;
};

[[noreturn]] inline void fail(const where& at, const std::string& what) {
  throw input_error(std::string{at.source} + ":" + std::to_string(at.line) + ": " + what);
}

inline bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
inline bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/// A number at least 0 (above 0 when `positive`), finite, written in full; anything else throws naming the
/// column and what is wrong with it.
inline double read_number(const where& at, const std::string& column, std::string_view text,
                          bool positive = false) {
  double v = 0.0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  const std::string quoted = "'" + std::string{text} + "'";
  if (ec == std::errc::result_out_of_range) {
    fail(at, "the " + column + " is " + quoted +
                 ", out of the range of a double; nccl-tests never prints such "
                 "a number: check that the line was not edited or corrupted");
  }
  if (ec != std::errc{} || end != text.data() + text.size()) {
    fail(at, "the " + column + " is " + quoted +
                 ", not a number; nccl-tests prints plain decimal numbers in "
                 "this column: check that the line was not cut or edited, or remove it");
  }
  if (!std::isfinite(v)) {
    fail(at, "the " + column + " is " + quoted +
                 ", not a finite number; a row of a run that completed has "
                 "finite times and bandwidths: rerun the test, or remove the row");
  }
  if (v < 0.0) {
    fail(at, "the " + column + " is " + quoted +
                 ", negative; sizes, counts, times and bandwidths are at "
                 "least 0: check the row");
  }
  if (positive && v == 0.0) {
    fail(at, "the " + column + " is " + quoted + "; a measured time is above 0: check the row");
  }
  return v;
}

inline std::uint64_t read_whole(const where& at, const std::string& column, std::string_view text) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc{} && end == text.data() + text.size()) return v;
  (void)read_number(at, column, text);  // letters, nan, inf and negatives get their own message
  fail(at, "the " + column + " is '" + std::string{text} +
               "', not a whole number; nccl-tests prints sizes "
               "and counts as integers: check the row");
}

/// The columns of a row. Every version prints size, count and type; 2.13 and later add root and print a
/// redop for every collective (all_gather and sendrecv print "none" or "sum" and root -1; 2.13.0 to 2.13.5
/// left all_gather's redop blank); before 2.13 only the reductions have a redop. Then come the
/// out-of-place and in-place timings (nccl-tests 1.x printed only the out-of-place ones for broadcast and
/// reduce), each time, algbw, busbw, #wrong, followed by i_min, i_max, i_p99, i_cv% when per-iteration
/// timing is on (-I 1); a timestamp (-S 1) closes the row.
struct layout {
  bool redop = false;
  bool root = false;
  int groups = 2;              ///< timings in the row: 2, or 1 (one placement)
  int per_group = 4;           ///< fields per timing: 4, or 8 with per-iteration statistics
  bool only_in_place = false;  ///< one timing, under the in-place columns of the header
  bool timestamp = false;      ///< a date and a time close the row
  friend bool operator==(const layout&, const layout&) = default;
};

inline std::string describe(const layout& l) {
  std::string out = "size, count, type";
  if (l.redop) out += ", redop";
  if (l.root) out += ", root";
  const std::string timing = l.per_group == 8 ? "time, algbw, busbw, #wrong, i_min, i_max, i_p99, i_cv%"
                                              : "time, algbw, busbw, #wrong";
  if (l.groups == 2) {
    out += ", out-of-place and in-place " + timing;
  } else {
    out += std::string{l.only_in_place ? ", in-place " : ", out-of-place "} + timing;
  }
  if (l.timestamp) out += ", timestamp";
  return out;
}

/// The column header ("#  size  count  type ... time  algbw  busbw  #wrong ..."), when the output has one.
struct column_header {
  std::size_t line = 0;  ///< 0: none seen
  int groups = 0;
  int per_group = 4;
  std::vector<std::size_t> time_ends;  ///< the column where each timing's time label ends
  double time_unit = 1e-6;             ///< us; ms in nccl-tests 1.x, whose header names the size "bytes"
};

inline bool is_column_header(const std::vector<field>& f) {
  return f.size() >= 4 && f[0].text == "#" && (f[1].text == "size" || f[1].text == "bytes") &&
         (f[2].text == "count" || f[2].text == "N");
}

inline column_header read_column_header(const std::vector<field>& f, std::size_t line) {
  column_header h;
  h.line = line;
  if (f[1].text == "bytes") h.time_unit = 1e-3;
  std::vector<std::size_t> time_index;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i].text == "time" || f[i].text == "cputime") {
      time_index.push_back(i);
      h.time_ends.push_back(f[i].end);
    }
  }
  h.groups = static_cast<int>(time_index.size());
  if (time_index.size() >= 2) h.per_group = static_cast<int>(time_index[1] - time_index[0]);
  return h;
}

[[noreturn]] inline void not_a_row(const where& at, std::size_t fields) {
  fail(at, "a result row with " + std::to_string(fields) +
               " fields; nccl-tests rows hold size, count, type, "
               "[redop], [root], then time, algbw, busbw and #wrong for the out-of-place and the in-place "
               "run: the "
               "row looks cut or edited; rerun the test or remove the row");
}

/// The layout of a row of `f` (timestamp fields excluded by the caller), checked against the column header.
inline layout layout_of(const std::vector<field>& f, std::size_t n, const column_header& header,
                        const where& at) {
  if (n < 4) not_a_row(at, n);
  layout l;
  l.redop = is_letter(f[3].text.front());
  const std::size_t rest = n - (l.redop ? 4 : 3);
  // Before 2.13 there is no root; from 2.13 on every row has one, and the timings are an even number of
  // fields, so an odd rest means a root.
  l.root = rest % 2 == 1;
  const std::size_t timings = rest - (l.root ? 1 : 0);
  const std::size_t per_group =
      header.line != 0 ? static_cast<std::size_t>(header.per_group) : (timings == 16 ? 8 : 4);
  // A timing is 4 fields, or 8 with per-iteration statistics: a header whose time labels stand another
  // distance apart (an edited or torn header) fits no row.
  if ((per_group != 4 && per_group != 8) || timings == 0 || timings % per_group != 0 ||
      timings / per_group > 2)
    not_a_row(at, n);
  l.per_group = static_cast<int>(per_group);
  l.groups = static_cast<int>(timings / per_group);
  if (header.line != 0 && l.groups > header.groups) not_a_row(at, n);
  if (l.groups == 1 && header.time_ends.size() == 2) {
    // nccl-tests leaves blanks where it skips a timing; the fields stay under their own header columns.
    const std::size_t first = f[n - timings].end;
    const auto distance = [&](std::size_t column) {
      return first > column ? first - column : column - first;
    };
    l.only_in_place = distance(header.time_ends[1]) < distance(header.time_ends[0]);
  }
  return l;
}

inline measurement read_timing(const std::vector<field>& f, std::size_t i, const layout& l, bool in_place,
                               double time_unit, const where& at) {
  const std::string side = in_place ? "in-place " : "out-of-place ";
  measurement m;
  m.time = seconds{read_number(at, side + "time", f[i].text, true) * time_unit};
  m.algorithm_bandwidth = bytes_per_second{read_number(at, side + "algbw", f[i + 1].text) * 1e9};
  m.bus_bandwidth = bytes_per_second{read_number(at, side + "busbw", f[i + 2].text) * 1e9};
  if (f[i + 3].text != "N/A") m.wrong = read_number(at, side + "#wrong", f[i + 3].text);
  if (l.per_group == 8) {
    constexpr std::string_view statistics[] = {"i_min", "i_max", "i_p99", "i_cv%"};
    for (std::size_t k = 0; k < 4; ++k)
      (void)read_number(at, side + std::string{statistics[k]}, f[i + 4 + k].text);
  }
  return m;
}

/// What the text after "#" and blanks says, or an empty view.
inline std::string_view comment_body(std::string_view line) {
  const auto start = line.find_first_not_of("# \t");
  return start == std::string_view::npos ? std::string_view{} : line.substr(start);
}

/// A row starts with its size: a digit, or a sign and a digit (a negative size is a row, and an error).
inline bool starts_a_row(std::string_view line) {
  const auto start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos) return false;
  const char c = line[start];
  if (is_digit(c)) return true;
  return (c == '-' || c == '+') && start + 1 < line.size() && is_digit(line[start + 1]);
}

inline void read_rank_line(std::string_view body, run& r, std::vector<long long>& ranks) {
  // "Rank  3 [Group  0] [Pid 1234] on HOST device  3 [...] NAME" (1.x has neither Group nor Pid).
  const auto f = split(body);
  if (f.size() < 2) return;
  long long id = 0;
  const auto [end, ec] = std::from_chars(f[1].text.data(), f[1].text.data() + f[1].text.size(), id);
  if (ec == std::errc{} && end == f[1].text.data() + f[1].text.size()) ranks.push_back(id);
  for (std::size_t i = 2; i + 1 < f.size(); ++i) {
    if (f[i].text != "on") continue;
    const std::string host{f[i + 1].text};
    if (std::find(r.hosts.begin(), r.hosts.end(), host) == r.hosts.end()) r.hosts.push_back(host);
    break;
  }
}

inline void read_average(std::string_view body, run& r, const where& at) {
  const auto colon = body.find(':');
  if (colon == std::string_view::npos) return;
  const auto f = split(body.substr(colon + 1));
  if (f.empty()) return;
  double v = 0.0;
  const auto [end, ec] = std::from_chars(f[0].text.data(), f[0].text.data() + f[0].text.size(), v);
  // nccl-tests prints nan when no row ran; that is no average, not an error.
  if (ec == std::errc{} && end == f[0].text.data() + f[0].text.size() && !std::isfinite(v)) return;
  r.average_bus_bandwidth = bytes_per_second{read_number(at, "average bus bandwidth", f[0].text) * 1e9};
}

inline void read_program(std::string_view program, run& r, std::optional<collective> given, const where& at) {
  const auto op = collective_from_name(program).value_or(collective::other);
  if (!r.program.empty() && r.program != program) {
    fail(at, "the output holds runs of two programs, '" + r.program + "' and '" + std::string{program} +
                 "'; give each run's output on its own");
  }
  if (given && *given != op) {
    fail(at, "the output is from '" + std::string{program} + "' (" + std::string{collective_name(op)} +
                 "), but it was read as " + std::string{collective_name(*given)} +
                 ": pass the collective the file holds, or none to take the program's");
  }
  r.program = std::string{program};
  r.op = op;
}

}  // namespace detail::nccl_text

/// Reads one nccl-tests output. `source` names it in errors (a file name); `op` is the collective when the
/// output does not name its program (before nccl-tests 2.16.7), and must agree with it when it does.
///
/// Lines starting with "#" are nccl-tests' banner, device list, column header and footer; parse reads the
/// program, version, rank lines, column header and average bus bandwidth from them and skips the rest. A
/// line that starts with a number (or a sign and a digit) is a result row and must be a whole one; other
/// lines (NCCL_DEBUG output, launcher messages, blank lines) are skipped. Every row must have the layout of
/// the first (see detail::nccl_text::layout). Throws input_error naming `source:line` for a malformed row,
/// a value that is not a finite number at least 0 (a time above 0), rows of two layouts, a second table, a
/// text over max_text_bytes, more than max_rows rows, and a text without rows.
inline constexpr auto parse = [](std::string_view text, std::string_view source,
                                 std::optional<collective> op = std::nullopt) -> run {
  namespace t = detail::nccl_text;
  if (text.size() > max_text_bytes) {
    t::fail({source, 1}, "the text is " + std::to_string(text.size()) + " bytes, above the " +
                             std::to_string(max_text_bytes) +
                             " bytes (16 MiB) an nccl-tests output may have; "
                             "give the output of one run, without NCCL_DEBUG=TRACE lines");
  }
  run r;
  r.source = std::string{source};
  if (op) r.op = *op;
  t::column_header header;
  std::optional<t::layout> first_layout;
  std::size_t first_row_line = 0;
  std::vector<long long> rank_ids;
  std::size_t line_number = 0;
  std::size_t begin = 0;
  while (begin < text.size()) {
    auto end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const t::where at{source, line_number};
    const auto body = t::comment_body(line);
    if (body.starts_with("Avg bus bandwidth")) {  // 1.x prints the footer without "#"
      t::read_average(body, r, at);
      continue;
    }
    if (line.starts_with("#")) {
      if (const auto fields = t::split(line); t::is_column_header(fields)) {
        if (header.line != 0) {
          t::fail(at, "a second table starts here (the first at line " + std::to_string(header.line) +
                          "): the text holds more than one run, or several processes each printed their own "
                          "(nccl-tests built without MPI=1 under mpirun); give one run's output, built with "
                          "MPI=1 for several processes");
        }
        header = t::read_column_header(fields, line_number);
      } else if (body.starts_with("Rank ")) {
        t::read_rank_line(body, r, rank_ids);
      } else if (constexpr std::string_view starting = "Collective test starting:";
                 body.starts_with(starting)) {
        const auto f = t::split(body.substr(starting.size()));
        if (!f.empty()) t::read_program(f[0].text, r, op, at);
      } else if (body.starts_with("nccl-tests version ")) {
        const auto f = t::split(body);
        if (f.size() > 2) r.version = std::string{f[2].text};
      }
      continue;
    }
    if (!t::starts_a_row(line) || line.find("] NCCL ") != std::string_view::npos) continue;
    if (r.rows.size() == max_rows) {
      t::fail(at, "more than " + std::to_string(max_rows) +
                      " result rows; phaze reads at most that many from "
                      "one run: sweep fewer sizes (-f 2 from 8 B to 8 GiB is 31 rows)");
    }
    const auto f = t::split(line);
    const bool timestamp = f.size() >= 6 && f.back().text.find(':') != std::string_view::npos;
    const std::size_t n = f.size() - (timestamp ? 2 : 0);
    auto l = t::layout_of(f, n, header, at);
    l.timestamp = timestamp;
    if (!first_layout) {
      first_layout = l;
      first_row_line = line_number;
    } else if (l != *first_layout) {
      t::fail(at,
              "this row holds " + t::describe(l) + ", but the rows from line " +
                  std::to_string(first_row_line) + " hold " + t::describe(*first_layout) +
                  ": a cut row, or the outputs of two nccl-tests versions or options mixed; give one run's "
                  "output, whole");
    }
    row x;
    x.line = line_number;
    x.size = bytes{static_cast<double>(t::read_whole(at, "size", f[0].text))};
    x.count = t::read_whole(at, "count", f[1].text);
    x.type = std::string{f[2].text};
    std::size_t i = 3;
    if (l.redop) x.redop = std::string{f[i++].text};
    if (l.root) {
      int root = 0;
      const auto text_root = f[i++].text;
      const auto [root_end, ec] =
          std::from_chars(text_root.data(), text_root.data() + text_root.size(), root);
      if (ec != std::errc{} || root_end != text_root.data() + text_root.size() || root < -1) {
        t::fail(at, "the root is '" + std::string{text_root} +
                        "'; nccl-tests prints a rank, or -1 for none: "
                        "check the row");
      }
      x.root = root;
    }
    const auto per_group = static_cast<std::size_t>(l.per_group);
    if (l.groups == 2 || !l.only_in_place) {
      x.out_of_place = t::read_timing(f, i, l, false, header.time_unit, at);
      i += per_group;
    }
    if (l.groups == 2 || l.only_in_place) x.in_place = t::read_timing(f, i, l, true, header.time_unit, at);
    r.rows.push_back(std::move(x));
  }
  if (r.rows.empty()) {
    t::fail(
        {source, std::max<std::size_t>(line_number, 1)},
        std::string{text.empty() ? "the output is empty" : "the output has no result rows"} +
            ": did the run fail? nccl-tests prints rows only after a successful run; look for the error in "
            "its output and stderr, fix it and run again");
  }
  std::sort(rank_ids.begin(), rank_ids.end());
  r.ranks = static_cast<int>(std::unique(rank_ids.begin(), rank_ids.end()) - rank_ids.begin());
  return r;
};

namespace detail::nccl_text {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace detail::nccl_text

/// The link a run implies for phaze's alpha-beta model, from the `columns` timings of its rows of size
/// above 0.
///
/// Bandwidth. phaze's ring formulas (cost/collective.hpp) charge the collective's factor themselves: an
/// all-reduce of M bytes takes 2 (n - 1) / n * M / B + 2 (n - 1) * alpha. nccl-tests' bus bandwidth is
/// M / t times the same factor (bus_bandwidth_factor), so for a bandwidth-bound message it is B itself:
/// the link's bandwidth is the bus bandwidth, not the algorithm bandwidth, which would charge the factor
/// twice. Every printed busbw still holds latency (t = steps * alpha + factor * M / B), so the bandwidth is
/// not a busbw of any row but the slope of a least-squares line t = a + M * (factor / B) over the large
/// rows: the rows at or above the smallest size where the bus bandwidth (factor * M / t, from the time,
/// which keeps more digits than the printed busbw) reaches 95% of the run's largest; unweighted, so the
/// largest messages, whose times are the least disturbed by latency and noise, weigh most. Where those
/// rows hold one size only, or the slope is not positive (noise), the bandwidth is the median bus
/// bandwidth of the large rows.
///
/// Latency. The median time of the rows of the smallest size, less their bandwidth term, over the message
/// steps phaze charges (message_steps): the alpha that makes phaze's formula give the smallest message
/// its measured time.
///
/// Throws input_error for a run of another collective, without the rank count its factor needs, of one
/// rank, without rows of size above 0 in `columns`, or whose largest message takes less than twice the
/// time of its smallest (latency still dominates: the run stopped before the bandwidth shows).
inline constexpr auto fit_link = [](const run& r,
                                    placement columns = placement::out_of_place) -> cluster::link {
  namespace t = detail::nccl_text;
  const std::string who = r.source + ": ";
  if (r.op == collective::other) {
    throw input_error(who +
                      "a link is fitted from all_reduce, all_gather, reduce_scatter or sendrecv runs, the "
                      "collectives phaze models; this run is " +
                      (r.program.empty() ? std::string{"of no named collective"} : "'" + r.program + "'") +
                      ": pass the collective to parse, or measure with one of those four programs");
  }
  const int n = r.ranks;
  if (r.op != collective::send_recv && n == 0) {
    throw input_error(who +
                      "the output has no '#  Rank ... on HOST device ...' lines, so the rank count that "
                      "the bus bandwidth factor needs is unknown: keep the whole output, or set run::ranks");
  }
  if (r.op != collective::send_recv && n == 1) {
    throw input_error(who +
                      "one rank moves no data over any link: run one process per GPU (mpirun -np N) over "
                      "the GPUs whose link you want to measure");
  }
  const bool in_place = columns == placement::in_place;
  std::vector<std::pair<double, double>> points;  // (size in bytes, time in seconds)
  for (const auto& x : r.rows) {
    const auto& m = in_place ? x.in_place : x.out_of_place;
    if (m && x.size.value() > 0.0) points.emplace_back(x.size.value(), m->time.value());
  }
  if (points.empty()) {
    throw input_error(who + "no row of size above 0 has " + (in_place ? "in-place" : "out-of-place") +
                      " columns: fit the other columns, or sweep sizes from 8 B (-b 8)");
  }
  // time = latency + size / bandwidth: where the largest message takes less than twice the smallest, the
  // latency term is still the larger one and the sweep shows no bandwidth to fit.
  double smallest = points.front().first;
  double largest = points.front().first;
  for (const auto& p : points) {
    smallest = std::min(smallest, p.first);
    largest = std::max(largest, p.first);
  }
  const auto median_time_at = [&](double size) {
    std::vector<double> times;
    for (const auto& p : points) {
      if (p.first == size) times.push_back(p.second);
    }
    return t::median(std::move(times));
  };
  const double smallest_time = median_time_at(smallest);
  if (median_time_at(largest) < 2.0 * smallest_time) {
    throw input_error(
        who + "the largest message, " + std::to_string(static_cast<std::uint64_t>(largest)) +
        " bytes, takes less than twice the time of the smallest: latency still dominates, so the "
        "run shows no bandwidth to fit; sweep up to 1 GiB or more (-e 1G, or -e 8G)");
  }
  const double factor = bus_bandwidth_factor(r.op, n);
  const double steps = message_steps(r.op, n);
  const auto bus = [&](const std::pair<double, double>& p) { return factor * p.first / p.second; };
  double best = 0.0;
  for (const auto& p : points) best = std::max(best, bus(p));
  double knee = largest;  // the smallest size reaching 95% of the best bus bandwidth
  for (const auto& p : points) {
    if (bus(p) >= 0.95 * best) knee = std::min(knee, p.first);
  }
  std::vector<std::pair<double, double>> large;
  for (const auto& p : points) {
    if (p.first >= knee) large.push_back(p);
  }
  double mean_size = 0.0;
  double mean_time = 0.0;
  for (const auto& p : large) {
    mean_size += p.first;
    mean_time += p.second;
  }
  mean_size /= static_cast<double>(large.size());
  mean_time /= static_cast<double>(large.size());
  double covariance = 0.0;
  double variance = 0.0;
  for (const auto& p : large) {
    covariance += (p.first - mean_size) * (p.second - mean_time);
    variance += (p.first - mean_size) * (p.first - mean_size);
  }
  double bandwidth = 0.0;
  if (variance > 0.0 && covariance > 0.0) {
    bandwidth = factor * variance / covariance;
  } else {
    std::vector<double> rates;
    for (const auto& p : large) rates.push_back(bus(p));
    bandwidth = t::median(std::move(rates));
  }
  // A fit outside a device file's physical range of links is a broken output, not a network (docs/limits.md).
  if (!(bandwidth >= 1e3 && bandwidth <= 1e15)) {
    throw input_error(who + "the fitted bandwidth, " + std::to_string(bandwidth) +
                      " bytes/s, lies outside 1e3 to 1e15 bytes/s: check the output's size and time columns");
  }
  const double latency = std::max(0.0, (smallest_time - factor * smallest / bandwidth) / steps);
  cluster::link fitted{bytes_per_second{bandwidth}, seconds{latency}};
  cluster::validate(fitted);
  return fitted;
};

namespace detail::nccl_text {

/// "8 B", "64 KiB", "8 GiB", "1.5 MiB".
inline std::string size_text(double b) {
  constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  std::size_t u = 0;
  while (u + 1 < std::size(units) && b >= 1024.0) {
    b /= 1024.0;
    ++u;
  }
  char out[32];
  std::snprintf(out, sizeof out, b == std::floor(b) ? "%.0f %s" : "%.1f %s", b, units[u]);
  return out;
}

/// A number in `width` characters, with as many decimals as fit up to two (nccl-tests' own rule).
inline std::string fixed_width(double value, int width) {
  char out[64];
  for (const int decimals : {2, 1, 0}) {
    if (std::snprintf(out, sizeof out, "%*.*f", width, decimals, value) <= width) return out;
  }
  std::snprintf(out, sizeof out, "%*.*e", width, width >= 7 ? 1 : 0, value);
  return out;
}

}  // namespace detail::nccl_text

/// One line: the collective, ranks and hosts, the sizes covered and the fitted link (or why none fits).
inline constexpr auto describe = [](const run& r) -> std::string {
  namespace t = detail::nccl_text;
  std::string out{collective_name(r.op)};
  if (!r.program.empty()) out += " (" + r.program + ")";
  out += ", " + std::to_string(r.ranks) + (r.ranks == 1 ? " rank" : " ranks") + " on " +
         std::to_string(r.hosts.size()) + (r.hosts.size() == 1 ? " host" : " hosts");
  if (!r.rows.empty()) {
    double smallest = r.rows.front().size.value();
    double largest = smallest;
    for (const auto& x : r.rows) {
      smallest = std::min(smallest, x.size.value());
      largest = std::max(largest, x.size.value());
    }
    out += ", " + t::size_text(smallest) + " to " + t::size_text(largest) + " in " +
           std::to_string(r.rows.size()) + " rows";
  }
  try {
    const auto l = fit_link(r);
    char fitted[96];
    std::snprintf(fitted, sizeof fitted, ": %.1f GB/s, %.2f us per message step", in_gb_per_s(l.bandwidth),
                  in_us(l.latency));
    out += fitted;
  } catch (const input_error&) {
    out += ": no link fits (fit_link says why)";
  }
  if (!r.source.empty()) out += " [" + r.source + "]";
  return out;
};

/// The run as nccl-tests 2.19 prints it (program line when `program` is set, rank lines spreading the ranks
/// over the hosts in blocks, the column header with root and redop, rows, footer), so that parse reads the
/// same run back; a row without a root prints -1 and one without a redop "none".
inline constexpr auto format = [](const run& r) -> std::string {
  namespace t = detail::nccl_text;
  std::string out;
  char buffer[256];
  if (!r.version.empty()) out += "# nccl-tests version " + r.version + "\n";
  if (!r.program.empty()) out += "# Collective test starting: " + r.program + "\n";
  out += "#\n# Using devices\n";
  const std::size_t hosts = std::max<std::size_t>(r.hosts.size(), 1);
  const std::size_t per_host = (static_cast<std::size_t>(std::max(r.ranks, 0)) + hosts - 1) / hosts;
  for (int rank = 0; rank < r.ranks; ++rank) {
    const std::size_t h = per_host == 0 ? 0 : static_cast<std::size_t>(rank) / per_host;
    const std::string host =
        r.hosts.empty() ? std::string{"localhost"} : r.hosts[std::min(h, r.hosts.size() - 1)];
    const std::size_t device = per_host == 0 ? 0 : static_cast<std::size_t>(rank) % per_host;
    std::snprintf(buffer, sizeof buffer,
                  "#  Rank %2d Group %2d Pid %6d on %10s device %2zu [0000:00:00] GPU\n", rank, 0,
                  1000 + rank, host.c_str(), device);
    out += buffer;
  }
  std::snprintf(
      buffer, sizeof buffer,
      "#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n"
      "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n",
      "", "", "", "", "", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
      "time", "algbw", "busbw", "#wrong");
  out += buffer;
  std::snprintf(buffer, sizeof buffer,
                "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)",
                "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
  out += buffer;
  for (const auto& x : r.rows) {
    std::snprintf(buffer, sizeof buffer, "%12.0f  %12llu  %8s  %6s  %6d", x.size.value(),
                  static_cast<unsigned long long>(x.count), x.type.c_str(),
                  x.redop.empty() ? "none" : x.redop.c_str(), x.root.value_or(-1));
    out += buffer;
    for (const auto& m : {x.out_of_place, x.in_place}) {
      if (!m) {
        out += std::string(33, ' ');
        continue;
      }
      out += "  " + t::fixed_width(in_us(m->time), 7) + "  " +
             t::fixed_width(in_gb_per_s(m->algorithm_bandwidth), 6) + "  " +
             t::fixed_width(in_gb_per_s(m->bus_bandwidth), 6);
      if (m->wrong) {
        std::snprintf(buffer, sizeof buffer, "  %6g", *m->wrong);
        out += buffer;
      } else {
        out += "     N/A";
      }
    }
    out += "\n";
  }
  out += "# Out of bounds values : 0 OK\n";
  if (r.average_bus_bandwidth) {
    std::snprintf(buffer, sizeof buffer, "# Avg bus bandwidth    : %g \n",
                  in_gb_per_s(*r.average_bus_bandwidth));
    out += buffer;
  }
  out += "#\n";
  if (!r.program.empty()) out += "# Collective test concluded: " + r.program + "\n";
  return out;
};

}  // namespace phaze::io::nccl
