// The plan report (io/plan_report.hpp): report.html is well-formed XHTML whose numbers are the best plan's
// estimate; the timeline has a row per stage; memory.svg has a bar per stage whose length and capacity mark
// are the stage's memory and capacity on the axis, red only where a stage does not fit; the runner-up table
// lists the plans in order; the files are written, and an unwritable folder is a clear input error.
#include <phaze/cluster/cluster.hpp>
#include <phaze/hw/presets.hpp>
#include <phaze/io/plan_report.hpp>
#include <phaze/model/zoo.hpp>
#include <phaze/place/plan_search.hpp>
#include <phaze/sched/scheduler.hpp>

#include <tinyxml2.h>
#include <catch2/catch.hpp>

#include "../support/clusters.hpp"
#include "../support/input_error_of.hpp"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

using namespace phaze;

namespace {

/// The plans of GPT-3 175B on 64 A100s with a batch of 64, uneven stages (the tutorial's example).
io::plan_report_input gpt3_plans() {
  static const model::model m = model::with_vocab(zoo::get("gpt3-175b"), 51200);
  const hw::device a100 = *hw::find_preset("a100-80gb");
  const cluster::cluster c = test::cluster_of(a100, 64);
  train::training_knobs base;
  base.global_batch = 64;
  base.fused_attention = true;
  base.memory_headroom = 0.1;
  place::plan_choices fixed;
  fixed.placement = place::stage_placement::uneven;
  const sched::schedule_cache cache{sched::list_scheduler{}};
  const auto found = place::search_plans(m, c, base, fixed, cache);
  REQUIRE(found.feasible.size() >= 3);
  io::plan_report_input in;
  in.model = &m;
  in.cluster = "64 x a100-80gb";
  in.placement = "uneven (chain placer)";
  in.evaluated = found.evaluated;
  in.plans = found.feasible;
  in.best = found.feasible.front().estimate;
  in.shown = 5;
  in.layer_times = "list schedules";
  return in;
}

/// Every element named `name` under `e`, depth first.
void collect(const tinyxml2::XMLElement* e, const std::string& name,
             std::vector<const tinyxml2::XMLElement*>& out) {
  for (const auto* c = e->FirstChildElement(); c != nullptr; c = c->NextSiblingElement()) {
    if (name == c->Name()) out.push_back(c);
    collect(c, name, out);
  }
}

std::vector<const tinyxml2::XMLElement*> all(const tinyxml2::XMLDocument& doc, const std::string& name) {
  std::vector<const tinyxml2::XMLElement*> out;
  collect(doc.RootElement(), name, out);
  return out;
}

bool has_class(const tinyxml2::XMLElement* e, const std::string& cls) {
  const char* c = e->Attribute("class");
  return c != nullptr && std::string{c} == cls;
}

}  // namespace

TEST_CASE("plan report: the best plan's numbers, a timeline row and a memory bar per stage, the runners-up",
          "[plan_report]") {
  const io::plan_report_input in = gpt3_plans();
  const train::step_estimate& e = in.best;
  const std::size_t stages = e.stages.size();
  REQUIRE(stages >= 2);

  tinyxml2::XMLDocument html;
  REQUIRE(html.Parse(io::plan_report_html(in).c_str()) == tinyxml2::XML_SUCCESS);
  auto cell = [&](const std::string& id) -> std::string {
    for (const auto* td : all(html, "td")) {
      const char* i = td->Attribute("id");
      if (i != nullptr && id == i) return td->GetText() != nullptr ? td->GetText() : "";
    }
    FAIL("no cell with id " << id);
    return "";
  };
  CHECK(cell("best-time") == io::detail::report::duration(e.time_per_batch));
  CHECK(cell("best-throughput") == io::detail::report::throughput(e.samples_per_s));
  CHECK(cell("best-plan").find(fmt::format("pp {}", in.plans.front().parallel.pp)) != std::string::npos);
  CHECK(cell("step").find("vocabulary 51200") != std::string::npos);

  // Two charts inline: the timeline with one row per stage, the memory chart with one bar per stage.
  std::vector<const tinyxml2::XMLElement*> stage_rows, bars, marks;
  for (const auto* g : all(html, "g"))
    if (has_class(g, "stage")) stage_rows.push_back(g);
  for (const auto* r : all(html, "rect"))
    if (has_class(r, "memory")) bars.push_back(r);
  for (const auto* l : all(html, "line"))
    if (has_class(l, "capacity")) marks.push_back(l);
  CHECK(stage_rows.size() == stages);
  REQUIRE(bars.size() == stages);
  REQUIRE(marks.size() == stages);
  // Bars and marks on one axis: bar length over the mark's distance from the axis is memory over capacity.
  const double x0 = bars.front()->DoubleAttribute("x");
  for (std::size_t i = 0; i < stages; ++i) {
    const auto& s = e.stages[i];
    const double bar = bars[i]->DoubleAttribute("width");
    const double mark = marks[i]->DoubleAttribute("x1") - x0;
    CHECK(bar / mark == Approx(s.memory.value() / s.capacity.value()).epsilon(1e-3));
    const std::string fill = bars[i]->Attribute("fill");
    CHECK((fill == "#d62728") == (s.memory.value() > s.capacity.value()));
  }

  // The runner-up table: the best first, then the others in order, as many as asked for.
  const tinyxml2::XMLElement* top = nullptr;
  for (const auto* t : all(html, "table")) {
    const char* id = t->Attribute("id");
    if (id != nullptr && std::string{id} == "top") top = t;
  }
  REQUIRE(top != nullptr);
  std::vector<std::string> times;
  for (const auto* tr = top->FirstChildElement("tr")->NextSiblingElement("tr"); tr != nullptr;
       tr = tr->NextSiblingElement("tr")) {
    const auto* td = tr->FirstChildElement("td");
    for (int k = 0; k < 6; ++k) td = td->NextSiblingElement("td");
    times.emplace_back(td->GetText());
  }
  REQUIRE(times.size() == std::min(in.shown, in.plans.size()));
  for (std::size_t i = 0; i < times.size(); ++i)
    CHECK(times[i] == io::detail::report::duration(in.plans[i].estimate.time_per_batch));
}

TEST_CASE("plan report: the files are written, a folder that cannot be made is an input error naming it",
          "[plan_report]") {
  const io::plan_report_input in = gpt3_plans();
  const auto dir =
      std::filesystem::temp_directory_path() / ("phaze_plan_report_" + std::to_string(::getpid()));
  io::write_plan_report(dir, in);
  for (const char* f : {"report.html", "report.md", "timeline.svg", "memory.svg"})
    CHECK(std::filesystem::file_size(dir / f) > 0);
  tinyxml2::XMLDocument memory;
  CHECK(memory.LoadFile((dir / "memory.svg").c_str()) == tinyxml2::XML_SUCCESS);
  std::filesystem::remove_all(dir);
  const auto blocked =
      std::filesystem::temp_directory_path() / ("phaze_plan_report_file_" + std::to_string(::getpid()));
  { std::ofstream(blocked) << "a file, not a folder"; }
  const std::string message = testing::input_error_of([&] { io::write_plan_report(blocked / "report", in); });
  CHECK(message.find(blocked.string()) != std::string::npos);
  std::filesystem::remove(blocked);
}

TEST_CASE("a report's files are written as a set: a failure part of the way leaves the old set whole",
          "[plan_report]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("phaze-report-set-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto text_of = [&](const std::string& name) {
    std::ifstream in{dir / name};
    return std::string{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  };
  {
    io::report_files files{dir};
    files.add("report.md", "old md");
    files.add("report.html", "old html");
    files.commit();
  }
  CHECK(text_of("report.md") == "old md");
  // The second file's temporary cannot be written (a folder stands at its name): the first file's new
  // content must not replace the old, and no temporary may stay behind.
  fs::create_directories(dir / "report.html.phaze-tmp");
  CHECK_THROWS_AS(
      [&] {
        io::report_files files{dir};
        files.add("report.md", "new md");
        files.add("report.html", "new html");
        files.commit();
      }(),
      input_error);
  CHECK(text_of("report.md") == "old md");
  CHECK(text_of("report.html") == "old html");
  CHECK_FALSE(fs::exists(dir / "report.md.phaze-tmp"));
  fs::remove_all(dir / "report.html.phaze-tmp");
  {
    io::report_files files{dir};
    files.add("report.md", "new md");
    files.add("report.html", "new html");
    files.commit();
  }
  CHECK(text_of("report.html") == "new html");
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator{dir}) ++entries;
  CHECK(entries == 2);
  fs::remove_all(dir);
}
