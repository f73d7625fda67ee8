// The co-search reports: a summary built from real step estimates (llama2-7b on designs of PHAZE's default
// space, the tpuv4-like and a100-80gb presets) is written out; pareto.svg, timeline.svg and report.html parse
// as XML and show the summary's values; pareto.csv reads back; writing twice gives the same bytes; an
// unwritable directory is an input_error.
#include <phaze/hw/area.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/hw/space.hpp>
#include <phaze/io/search_report.hpp>
#include <phaze/io/svg.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/search/result.hpp>
#include <phaze/train/step.hpp>
#include <phaze/train/timeline.hpp>

#include <fmt/format.h>
#include <tinyxml2.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include "../support/clusters.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../support/input_error_of.hpp"

using namespace phaze;
namespace fs = std::filesystem;

namespace {

bool close(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
}

search::design_result evaluate(const model::model& m, const hw::device& d, std::uint64_t index,
                               const train::parallelism& par, const train::training_knobs& k,
                               sched::schedule_cache& cache) {
  search::design_result r;
  r.index = index;
  r.device = d;
  r.die_area = d.kind == hw::device_kind::systolic ? hw::area_of(d) : hw::area{0.0};
  r.status = search::outcome::evaluated;
  r.parallel = par;
  r.knobs = k;
  r.estimate = train::estimate_step(m, phaze::test::cluster_of(d, par), par, k, cache);
  r.samples_per_s = r.estimate.samples_per_s;
  // A stand-in for the engine's energy model: a fixed energy per model FLOP.
  r.energy_per_sample = hw::energy{model::training_flops_per_iteration(m, k.global_batch).value() /
                                   static_cast<double>(k.global_batch) * 1e-12};
  r.upper_bound_samples_per_s = r.samples_per_s * 1.5;
  return r;
}

search::summary make_summary() {
  const model::model m = zoo::get("llama2-7b");
  train::training_knobs k;
  k.global_batch = 64;
  k.microbatch = 1;
  k.recompute = model::recompute::selective;
  k.sequence_parallel = true;
  const train::parallelism par{2, 4, 4};
  sched::schedule_cache cache;

  search::summary s;
  s.model = "llama2-7b";
  s.devices = static_cast<int>(par.devices());
  s.global_batch = k.global_batch;
  s.sequence = m.config.sequence;
  s.vocab = m.config.vocab;
  s.precision = k.precision;
  s.space = "phaze default space: tensor cores 1..4096, arrays 2..256, GLB 2..128 MiB, HBM 32/64/80 GiB";
  std::vector<search::design_result> all;
  std::uint64_t index = 0;
  for (const hw::device& d : hw::spread_sample(hw::phaze_default_space, 12)) {
    all.push_back(evaluate(m, d, index, par, k, cache));
    index += 1000;
  }
  s.designs = 12000;
  s.evaluated = 10000;
  s.pruned = 1500;
  s.infeasible = 500;
  s.configurations = 123456;
  s.seconds = 12.5;
  s.threads = 2;
  s.processes = 1;
  std::vector<search::design_result> by_rate = all;
  std::stable_sort(by_rate.begin(), by_rate.end(),
                   [](const auto& a, const auto& b) { return a.samples_per_s > b.samples_per_s; });
  s.best = by_rate.front();
  s.top = by_rate;
  std::vector<search::design_result> by_area = all;
  std::stable_sort(by_area.begin(), by_area.end(),
                   [](const auto& a, const auto& b) { return a.die_area < b.die_area; });
  double best_rate = 0.0;
  for (const auto& r : by_area) {
    if (r.samples_per_s > best_rate) {
      s.pareto.push_back(r);
      best_rate = r.samples_per_s;
    }
  }
  s.baselines.push_back({"tpuv4-like", "PHAZE's TPUv4-like design with its best plan",
                         evaluate(m, *hw::find_preset("tpuv4-like"), 0, par, k, cache)});
  s.baselines.push_back({"megatron-uniform", "Megatron-LM's uniform plan on A100-80GB GPUs",
                         evaluate(m, *hw::find_preset("a100-80gb"), 0, par, k, cache)});
  search::baseline none{"spotlight-style", "chosen for single-accelerator layer latency", {}};
  none.result.status = search::outcome::infeasible;
  s.baselines.push_back(none);
  return s;
}

const search::summary& summary() {
  static const search::summary s = make_summary();
  return s;
}

fs::path fresh_dir(std::string_view name) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("phaze_search_report_{}_{}", name, ::getpid());
  fs::remove_all(dir);
  return dir;
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void parse(tinyxml2::XMLDocument& doc, const std::string& text) {
  const auto rc = doc.Parse(text.c_str(), text.size());
  INFO((rc == tinyxml2::XML_SUCCESS ? "" : doc.ErrorStr()));
  REQUIRE(rc == tinyxml2::XML_SUCCESS);
}

// Every element below `e` (depth first) with the given name and class (class "" matches any).
void collect(const tinyxml2::XMLElement* e, std::string_view name, std::string_view cls,
             std::vector<const tinyxml2::XMLElement*>& out) {
  for (auto* c = e->FirstChildElement(); c != nullptr; c = c->NextSiblingElement()) {
    const char* k = c->Attribute("class");
    if (name == c->Name() && (cls.empty() || (k != nullptr && cls == k))) out.push_back(c);
    collect(c, name, cls, out);
  }
}
std::vector<const tinyxml2::XMLElement*> find_all(const tinyxml2::XMLDocument& doc, std::string_view name,
                                                  std::string_view cls = "") {
  std::vector<const tinyxml2::XMLElement*> out;
  collect(doc.RootElement(), name, cls, out);
  return out;
}
const tinyxml2::XMLElement* find_id(const tinyxml2::XMLElement* e, std::string_view id) {
  for (auto* c = e->FirstChildElement(); c != nullptr; c = c->NextSiblingElement()) {
    const char* i = c->Attribute("id");
    if (i != nullptr && id == i) return c;
    if (const auto* found = find_id(c, id)) return found;
  }
  return nullptr;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

}  // namespace

TEST_CASE("svg: text and attributes are escaped, numbers fixed", "[search_report]") {
  CHECK(io::svg::escape("a<b & \"c\" 'd'>") == "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
  CHECK(io::svg::number(-0.001) == "0.00");
  CHECK(io::svg::number(12.345678) == "12.35");
  CHECK_THROWS_AS(io::svg::number(std::nan("")), error);
  io::svg::drawing d(100, 50);
  d.open_group({{"class", "x&y"}}).rect(1, 2, 3, 4, {{"fill", "#fff"}}, "tip <1>").close_group();
  d.text(5, 6, "a < b").circle(1, 1, 1).line(0, 0, 1, 1).polyline({{0, 0}, {1, 2}});
  tinyxml2::XMLDocument doc;
  parse(doc, d.document());
  CHECK(std::string_view{doc.RootElement()->Attribute("viewBox")} == "0 0 100.00 50.00");
  CHECK(std::string_view{doc.RootElement()->FirstChildElement("g")->Attribute("class")} == "x&y");
  CHECK(std::string_view{doc.RootElement()->FirstChildElement("text")->GetText()} == "a < b");
}

TEST_CASE("search report: the files show the summary", "[search_report]") {
  const search::summary& s = summary();
  REQUIRE(s.pareto.size() >= 2);
  const fs::path dir = fresh_dir("files");
  io::write_search_report(dir, s);
  for (const char* f : {"pareto.csv", "pareto.svg", "timeline.svg", "report.md", "report.html"}) {
    CHECK(fs::exists(dir / f));
  }

  SECTION("pareto.csv: a header, one row per Pareto design, values that read back") {
    const auto lines = lines_of(read(dir / "pareto.csv"));
    REQUIRE(lines.size() == s.pareto.size() + 1);
    CHECK(lines[0] ==
          "index,area_mm2,throughput_samples_per_s,energy_per_sample_j,tensor_cores,tc_width,tc_depth,"
          "vector_cores,vc_width,global_buffer_mib,hbm_gib,tp,pp,dp,microbatch,recompute");
    for (std::size_t i = 0; i < s.pareto.size(); ++i) {
      const auto cells = split_csv(lines[i + 1]);
      REQUIRE(cells.size() == 16);
      const auto& p = s.pareto[i];
      CHECK(std::stoull(cells[0]) == p.index);
      CHECK(close(std::stod(cells[1]), p.die_area.value()));
      CHECK(close(std::stod(cells[2]), p.samples_per_s));
      CHECK(close(std::stod(cells[3]), p.energy_per_sample.value()));
      CHECK(std::stoi(cells[4]) == p.device.systolic.num_tc);
      CHECK(close(std::stod(cells[9]) * 1024 * 1024, p.device.systolic.glb.value()));
      CHECK(std::stoi(cells[12]) == p.parallel.pp);
      CHECK(cells[15] == "selective");
    }
  }

  SECTION("pareto.svg: every Pareto point, the top designs, labelled baselines") {
    tinyxml2::XMLDocument doc;
    parse(doc, read(dir / "pareto.svg"));
    CHECK(find_all(doc, "circle", "pareto").size() == s.pareto.size());
    CHECK(find_all(doc, "circle", "top").size() == s.top.size());
    CHECK(find_all(doc, "polyline", "pareto-front").size() == 1);
    std::vector<std::string> labels;
    for (const auto* t : find_all(doc, "text", "baseline-label")) labels.emplace_back(t->GetText());
    CHECK(std::find(labels.begin(), labels.end(), "tpuv4-like") != labels.end());
    CHECK(std::find(labels.begin(), labels.end(), "megatron-uniform (no die area)") != labels.end());
    // Two baselines are placed (one a symbol, one a dashed line); the infeasible one is only in the legend.
    CHECK(find_all(doc, "rect", "baseline").size() + find_all(doc, "line", "baseline").size() == 2);
  }

  SECTION("timeline.svg: one row per stage, ending where the simulated iteration ends") {
    tinyxml2::XMLDocument doc;
    parse(doc, read(dir / "timeline.svg"));
    const auto rows = find_all(doc, "g", "stage");
    REQUIRE(rows.size() == s.best.estimate.stages.size());
    const auto t = train::build_timeline(s.best.estimate, s.best.knobs.schedule);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      CHECK(rows[i]->IntAttribute("data-stage") == static_cast<int>(i));
      const double end = rows[i]->DoubleAttribute("data-end-s");
      CHECK(close(end, t.makespan.value()));
      // The estimate charges every stage the slowest one's time: never earlier than the drawing.
      CHECK(end <= s.best.estimate.time_per_batch.value() * (1 + 1e-9));
      CHECK(rows[i]->FirstChildElement("rect") != nullptr);
    }
    const auto estimate = find_all(doc, "line", "estimate");
    REQUIRE(estimate.size() == 1);
    CHECK(close(estimate[0]->DoubleAttribute("data-time-s"), s.best.estimate.time_per_batch.value()));
    CHECK_FALSE(find_all(doc, "rect", "forward").empty());
    CHECK_FALSE(find_all(doc, "rect", "backward").empty());
  }

  SECTION("report.md and report.html: the best throughput, the baselines, the counts") {
    const std::string throughput = fmt::format("{:.2f} samples/s", s.best.samples_per_s);
    const std::string md = read(dir / "report.md");
    CHECK(md.find("- **Throughput**: " + throughput + "\n") != std::string::npos);
    CHECK(md.find("(pareto.svg)") != std::string::npos);
    CHECK(md.find("(timeline.svg)") != std::string::npos);
    CHECK(md.find("- **Configurations placed**: 123456\n") != std::string::npos);
    // The workload's assumptions.
    CHECK(md.find(fmt::format("- **Sequence length**: {} tokens\n", s.sequence)) != std::string::npos);
    CHECK(md.find(fmt::format("- **Vocabulary**: {} tokens\n", s.vocab)) != std::string::npos);
    CHECK(md.find("- **Precision**: bf16\n") != std::string::npos);
    const std::string ratio =
        fmt::format("{:.2f}×", s.best.samples_per_s / s.baselines[0].result.samples_per_s);
    CHECK(md.find("| " + ratio + " |") != std::string::npos);

    tinyxml2::XMLDocument doc;
    parse(doc, read(dir / "report.html"));
    const auto* cell = find_id(doc.RootElement(), "best-throughput");
    REQUIRE(cell != nullptr);
    CHECK(std::string_view{cell->GetText()} == throughput);
    for (const auto& [id, value] :
         {std::pair<std::string, std::string>{"sequence", fmt::format("{} tokens", s.sequence)},
          {"vocabulary", fmt::format("{} tokens", s.vocab)},
          {"precision", "bf16"}}) {
      const auto* item = find_id(doc.RootElement(), id);
      REQUIRE(item != nullptr);
      CHECK(item->GetText() == value);
    }
    CHECK(find_all(doc, "svg").size() == 2);
    CHECK(find_all(doc, "circle", "pareto").size() == s.pareto.size());
    const auto* baselines = find_id(doc.RootElement(), "baselines");
    REQUIRE(baselines != nullptr);
    std::vector<const tinyxml2::XMLElement*> rows;
    collect(baselines, "tr", "", rows);
    CHECK(rows.size() == s.baselines.size() + 1);
    const auto* last = rows[1]->LastChildElement("td");
    REQUIRE(last != nullptr);
    CHECK(std::string_view{last->GetText()} == ratio);
  }
  fs::remove_all(dir);
}

TEST_CASE("search report: a one-stage plan's timeline ends at the time per batch", "[search_report]") {
  search::summary s = summary();
  const model::model m = zoo::get("llama2-7b");
  train::training_knobs k = s.best.knobs;
  sched::schedule_cache cache;
  s.best.parallel = {4, 1, 8};
  s.best.estimate = train::estimate_step(m, phaze::test::cluster_of(s.best.device, s.best.parallel),
                                         s.best.parallel, k, cache);
  s.best.samples_per_s = s.best.estimate.samples_per_s;
  tinyxml2::XMLDocument doc;
  parse(doc, io::timeline_svg(s));
  const auto rows = find_all(doc, "g", "stage");
  REQUIRE(rows.size() == 1);
  CHECK(close(rows[0]->DoubleAttribute("data-end-s"), s.best.estimate.time_per_batch.value()));
}

TEST_CASE("search report: identical input gives identical bytes, names are escaped", "[search_report]") {
  search::summary s = summary();
  s.model = "my <model> & \"friends\"";
  s.baselines[0].name = "tpu<v4>&";
  const fs::path a = fresh_dir("a");
  const fs::path b = fresh_dir("b");
  io::write_search_report(a, s);
  io::write_search_report(b, s);
  for (const char* f : {"pareto.csv", "pareto.svg", "timeline.svg", "report.md", "report.html"}) {
    INFO(f);
    CHECK(read(a / f) == read(b / f));
  }
  tinyxml2::XMLDocument html;
  parse(html, read(a / "report.html"));
  CHECK(std::string_view{
            html.RootElement()->FirstChildElement("head")->FirstChildElement("title")->GetText()} ==
        "phaze search: my <model> & \"friends\" on 32 devices");
  tinyxml2::XMLDocument pareto;
  parse(pareto, read(a / "pareto.svg"));
  tinyxml2::XMLDocument timeline;
  parse(timeline, read(a / "timeline.svg"));

  // Without run statistics, runs that differ only in time and threads give the same report.
  search::summary other = s;
  other.seconds = 99.0;
  other.threads = 16;
  const io::search_report_options quiet{.run_statistics = false};
  CHECK(io::search_report_markdown(s, quiet) == io::search_report_markdown(other, quiet));
  CHECK(io::search_report_html(s, quiet) == io::search_report_html(other, quiet));
  CHECK(io::search_report_markdown(s) != io::search_report_markdown(other));
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_CASE("search report: nothing feasible still gives readable files", "[search_report]") {
  search::summary s;
  s.model = "llama2-7b";
  s.devices = 8;
  s.best.status = search::outcome::infeasible;
  tinyxml2::XMLDocument doc;
  parse(doc, io::pareto_svg(s));
  CHECK(find_all(doc, "circle", "pareto").empty());
  parse(doc, io::timeline_svg(s));
  CHECK(find_all(doc, "g", "stage").empty());
  parse(doc, io::search_report_html(s));
  CHECK(io::search_report_markdown(s).find("No design of the space") != std::string::npos);
  CHECK(io::pareto_csv(s).find('\n') == io::pareto_csv(s).size() - 1);
}

TEST_CASE("search report: an unwritable directory is an input error", "[search_report]") {
  const fs::path dir = fresh_dir("bad");
  fs::create_directories(dir);
  const fs::path file = dir / "a-file";
  std::ofstream(file) << "x";
  const std::string message =
      testing::input_error_of([&] { io::write_search_report(file / "report", summary()); });
  CHECK(message.find("cannot create the report directory") != std::string::npos);
  CHECK(message.find((file / "report").string()) != std::string::npos);
  fs::remove_all(dir);
}

namespace {

// The rectangles of timeline.svg's stage rows.
std::vector<const tinyxml2::XMLElement*> stage_rects(const tinyxml2::XMLDocument& doc) {
  std::vector<const tinyxml2::XMLElement*> rects;
  for (const auto* row : find_all(doc, "g", "stage")) collect(row, "rect", "", rects);
  return rects;
}

}  // namespace

TEST_CASE("search report: no timeline rectangle is narrower than the merge width, whatever the batch",
          "[search_report]") {
  const model::model m = zoo::get("llama2-7b");
  sched::schedule_cache cache;
  // 16384 microbatches per replica on 4 stages; 32 stages of 256 microbatches.
  for (const auto& [par, batch] : {std::pair{train::parallelism{2, 4, 4}, std::int64_t{65536}},
                                   std::pair{train::parallelism{1, 32, 1}, std::int64_t{256}}}) {
    search::summary s = summary();
    s.best.parallel = par;
    s.best.knobs.global_batch = batch;
    s.global_batch = batch;
    s.best.estimate =
        train::estimate_step(m, phaze::test::cluster_of(s.best.device, par), par, s.best.knobs, cache);
    s.best.samples_per_s = s.best.estimate.samples_per_s;
    const std::string text = io::timeline_svg(s);
    tinyxml2::XMLDocument doc;
    parse(doc, text);
    // The merge width the drawing used: at least a unit, and every rectangle as wide.
    const double min_width = doc.RootElement()->DoubleAttribute("data-min-width");
    CHECK(min_width >= 1.0);
    const auto rects = stage_rects(doc);
    INFO("pp " << par.pp << ", " << s.best.estimate.microbatches << " microbatches, " << rects.size()
               << " rectangles, " << text.size() << " bytes");
    CHECK(s.best.estimate.microbatches >= 256);
    CHECK(rects.size() <= io::timeline_rectangles);
    CHECK(rects.size() >= static_cast<std::size_t>(par.pp));
    for (const auto* r : rects) {
      CHECK(r->DoubleAttribute("width") >= min_width - 0.01);  // written with two decimals
      // Every rectangle keeps a tooltip with its times.
      const auto* title = r->FirstChildElement("title");
      REQUIRE(title != nullptr);
      CHECK(std::string_view{title->GetText()}.find(" s") != std::string_view::npos);
    }
    // docs/search-report.md: at most timeline_rectangles rectangles, under 400 kB.
    CHECK(text.size() < 400'000);
  }
}

TEST_CASE("search report: designs that differ only in HBM share a row of the top list", "[search_report]") {
  search::summary s = summary();
  // The best design with 32, 64 and 80 GiB: the same plan and throughput.
  std::vector<search::design_result> top;
  std::uint64_t index = 900000;
  for (const double gib : {64.0, 32.0, 80.0}) {
    search::design_result r = s.best;
    r.index = index++;
    r.device.hbm = bytes{gib * 1024 * 1024 * 1024};
    r.device.name = hw::design_label(r.device.systolic, r.device.hbm);
    top.push_back(r);
  }
  // The same design with another HBM size and another plan stays apart.
  search::design_result other_plan = s.best;
  other_plan.index = index++;
  other_plan.device.hbm = bytes{16.0 * 1024 * 1024 * 1024};
  other_plan.parallel.tp *= 2;
  top.push_back(other_plan);
  for (std::size_t i = 1; i < s.top.size(); ++i) top.push_back(s.top[i]);
  s.top = top;

  const auto groups = io::group_by_hbm(s.top);
  REQUIRE(groups.size() == s.top.size() - 2);
  CHECK(groups[0].members == std::vector<std::size_t>{0, 1, 2});
  CHECK(io::group_design_text(s.top, groups[0]).ends_with(", HBM 32/64/80 GiB"));
  for (std::size_t g = 1; g < groups.size(); ++g) CHECK(groups[g].members.size() == 1);

  const std::string md = io::search_report_markdown(s);
  const std::string label = hw::design_label(s.best.device.systolic, s.best.device.hbm).str();
  const std::string stem = label.substr(0, label.rfind(' '));
  CHECK(md.find("| 1-3 | 900000, 900001, 900002 | " + stem + ", HBM 32/64/80 GiB |") != std::string::npos);
  CHECK(md.find("| 4 | 900003 |") != std::string::npos);
  CHECK(md.find(fmt::format("{} designs in {} rows: 3 designs that differ only in HBM capacity", s.top.size(),
                            groups.size())) != std::string::npos);

  tinyxml2::XMLDocument doc;
  parse(doc, io::search_report_html(s));
  const auto* table = find_id(doc.RootElement(), "top");
  REQUIRE(table != nullptr);
  std::vector<const tinyxml2::XMLElement*> rows;
  collect(table, "tr", "", rows);
  CHECK(rows.size() == groups.size() + 1);

  // No group: no note.
  CHECK(io::search_report_markdown(summary()).find("differ only in HBM") == std::string::npos);
}

namespace {

struct label_box {
  std::string text;
  double x0, y0, x1, y1;
};
bool meet(const label_box& a, const label_box& b) {
  return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
}

// A text's box from its font size and characters: 0.6 em per character, 0.8 em above the baseline and 0.25
// em below (generous for sans-serif; text-anchor start, end or middle).
label_box text_box_of(const tinyxml2::XMLElement* t) {
  const std::string text = t->GetText();
  const double size = t->DoubleAttribute("font-size");
  std::size_t chars = 0;
  for (const char c : text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  const double w = 0.6 * size * static_cast<double>(chars);
  const char* anchor = t->Attribute("text-anchor");
  double x = t->DoubleAttribute("x");
  if (anchor != nullptr && std::string_view{anchor} == "end") x -= w;
  if (anchor != nullptr && std::string_view{anchor} == "middle") x -= w / 2;
  const double y = t->DoubleAttribute("y");
  return {text, x, y - 0.8 * size, x + w, y + 0.25 * size};
}

// The box of a marker: a circle, a baseline's square or polygon.
label_box marker_box(const tinyxml2::XMLElement* e) {
  const std::string_view name = e->Name();
  if (name == "circle") {
    const double r = e->DoubleAttribute("r");
    return {"circle", e->DoubleAttribute("cx") - r, e->DoubleAttribute("cy") - r,
            e->DoubleAttribute("cx") + r, e->DoubleAttribute("cy") + r};
  }
  if (name == "rect") {
    return {"rect", e->DoubleAttribute("x"), e->DoubleAttribute("y"),
            e->DoubleAttribute("x") + e->DoubleAttribute("width"),
            e->DoubleAttribute("y") + e->DoubleAttribute("height")};
  }
  label_box b{"polygon", 1e9, 1e9, -1e9, -1e9};
  std::istringstream points(e->Attribute("points"));
  for (std::string p; points >> p;) {
    const auto comma = p.find(',');
    const double x = std::stod(p.substr(0, comma));
    const double y = std::stod(p.substr(comma + 1));
    b.x0 = std::min(b.x0, x);
    b.x1 = std::max(b.x1, x);
    b.y0 = std::min(b.y0, y);
    b.y1 = std::max(b.y1, y);
  }
  return b;
}

}  // namespace

TEST_CASE("search report: baseline labels on the Pareto chart overlap neither each other nor the markers",
          "[search_report]") {
  search::summary crowded = summary();
  // Four baselines on the best design's very point, one next to the front's last point, and two datasheet
  // devices (dashed lines) at one throughput: every label's first choice is taken.
  const search::design_result datasheet = crowded.baselines[1].result;
  crowded.baselines.clear();
  for (const char* name : {"same-as-best", "also-the-best", "the-best-again", "best-with-a-long-name"}) {
    crowded.baselines.push_back({name, "on the best design", crowded.best});
  }
  search::design_result near = crowded.pareto.back();
  near.samples_per_s *= 0.97;
  crowded.baselines.push_back({"near-the-front", "next to the front's last point", near});
  crowded.baselines.push_back({"gpu-a", "a datasheet device", datasheet});
  crowded.baselines.push_back({"gpu-b", "another at the same throughput", datasheet});

  for (const search::summary* s : {&summary(), static_cast<const search::summary*>(&crowded)}) {
    tinyxml2::XMLDocument doc;
    parse(doc, io::pareto_svg(*s));
    const auto areas = find_all(doc, "rect", "plot-area");
    REQUIRE(areas.size() == 1);
    const label_box plot = marker_box(areas[0]);
    std::vector<label_box> labels;
    for (const auto* t : find_all(doc, "text", "baseline-label")) labels.push_back(text_box_of(t));
    std::size_t placed_baselines = 0;
    for (const auto& b : s->baselines) placed_baselines += io::placed(b.result) ? 1 : 0;
    REQUIRE(labels.size() == placed_baselines);
    std::vector<label_box> markers;
    for (const char* cls : {"pareto", "top"}) {
      for (const auto* c : find_all(doc, "circle", cls)) markers.push_back(marker_box(c));
    }
    for (const char* name : {"rect", "polygon"}) {
      for (const auto* e : find_all(doc, name, "baseline")) markers.push_back(marker_box(e));
    }
    for (std::size_t i = 0; i < labels.size(); ++i) {
      const label_box& a = labels[i];
      INFO(a.text << " at " << a.x0 << ", " << a.y0 << " - " << a.x1 << ", " << a.y1);
      CHECK(a.x0 >= plot.x0);
      CHECK(a.x1 <= plot.x1);
      CHECK(a.y0 >= plot.y0);
      CHECK(a.y1 <= plot.y1);
      for (std::size_t j = i + 1; j < labels.size(); ++j) {
        INFO("and " << labels[j].text);
        CHECK_FALSE(meet(a, labels[j]));
      }
      for (const auto& m : markers) {
        INFO("and a " << m.text << " at " << m.x0 << ", " << m.y0);
        CHECK_FALSE(meet(a, m));
      }
    }
  }
}
