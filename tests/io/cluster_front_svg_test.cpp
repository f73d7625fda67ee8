// Tests of phaze/io/cluster_front_svg.hpp: front.svg is well-formed XML with one filled circle per front
// point and a hollow one per planned composition, and its labels never overlap each other, a point or the
// plot's edge, also where the points crowd (labels are then left out and the legend says so).
#include "phaze/io/cluster_front_svg.hpp"

#include <catch2/catch.hpp>

#include <tinyxml2.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "phaze/cluster/presets.hpp"
#include "phaze/hw/presets.hpp"
#include "phaze/model/zoo.hpp"

using namespace phaze;

namespace {
void collect(const tinyxml2::XMLElement* e, std::string_view name, std::string_view cls,
             std::vector<const tinyxml2::XMLElement*>& out) {
  for (; e != nullptr; e = e->NextSiblingElement()) {
    const char* c = e->Attribute("class");
    if (name == e->Name() && (cls.empty() || (c != nullptr && cls == c))) out.push_back(e);
    collect(e->FirstChildElement(), name, cls, out);
  }
}

std::vector<const tinyxml2::XMLElement*> find_all(const tinyxml2::XMLDocument& doc, std::string_view name,
                                                  std::string_view cls) {
  std::vector<const tinyxml2::XMLElement*> out;
  collect(doc.FirstChildElement(), name, cls, out);
  return out;
}

/// Every pair of placed labels apart, every label inside the plot and off every marker.
void no_overlaps(const std::vector<io::detail::cluster_chart::placed_label>& labels,
                 const std::vector<io::svg::point>& markers, const io::detail::cluster_chart::box& plot,
                 double radius) {
  for (std::size_t i = 0; i < labels.size(); ++i) {
    CHECK(labels[i].bounds.inside(plot));
    for (std::size_t k = 0; k < i; ++k) CHECK_FALSE(labels[i].bounds.overlaps(labels[k].bounds));
    for (const auto& m : markers)
      CHECK_FALSE(labels[i].bounds.overlaps({m.x - radius, m.y - radius, m.x + radius, m.y + radius}));
  }
}
}  // namespace

TEST_CASE("front labels never overlap, crowded ones are left out", "[cluster_space][cluster_front_svg]") {
  namespace ch = io::detail::cluster_chart;
  const ch::box plot{0, 0, 600, 400};
  // A crowded diagonal: 40 points 10 units apart with long labels.
  std::vector<io::svg::point> anchors;
  std::vector<std::string> texts;
  for (int i = 0; i < 40; ++i) {
    anchors.push_back({20.0 + 10.0 * i, 380.0 - 9.0 * i});
    texts.push_back(std::to_string(i) + " h100-sxm + 8 a100-80gb");
  }
  const auto crowded = ch::place_labels(anchors, texts, anchors, plot, 11.0, 4.5);
  no_overlaps(crowded, anchors, plot, 4.5);
  CHECK(crowded.size() < anchors.size());
  CHECK_FALSE(crowded.empty());
  // Points far apart all get their label.
  const std::vector<io::svg::point> sparse{{50, 350}, {250, 200}, {450, 60}};
  const std::vector<std::string> names{"8 a100-80gb", "16 h100-sxm", "32 h100-sxm"};
  const auto all = ch::place_labels(sparse, names, sparse, plot, 11.0, 4.5);
  CHECK(all.size() == 3);
  no_overlaps(all, sparse, plot, 4.5);
}

TEST_CASE("front.svg: well-formed, a circle per point, labels apart", "[cluster_space][cluster_front_svg]") {
  search::cluster_space s;
  for (const auto& [name, price] : {std::pair{"h100-sxm", 30000.0}, std::pair{"a100-80gb", 15000.0}}) {
    search::device_offer o;
    o.label = name;
    o.device = *hw::find_preset(name);
    o.node = cluster::node_of(name);
    o.price_usd = price;
    o.power = search::watts{700};
    o.max = 16;
    o.step = 8;
    s.devices.push_back(o);
  }
  s.budget_usd = 1e6;
  train::training_knobs k;
  k.global_batch = 32;
  place::plan_choices cheap;
  cheap.placement = place::stage_placement::uneven;
  cheap.microbatches = {2};
  cheap.recompute = {model::recompute::none};
  cheap.sequence_parallel = {false};
  const auto r = search::cluster_search(s, zoo::get("gpt2"), k).choices(cheap).run();
  REQUIRE_FALSE(r.cost_front.empty());
  const std::string text = io::cluster_front_svg(s, r, "gpt2 & friends: throughput vs cost");
  tinyxml2::XMLDocument doc;
  REQUIRE(doc.Parse(text.c_str(), text.size()) == tinyxml2::XML_SUCCESS);
  CHECK(find_all(doc, "circle", "front").size() == r.cost_front.size());
  CHECK(find_all(doc, "circle", "planned").size() == r.evaluated - r.infeasible);
  const auto labels = find_all(doc, "text", "front-label");
  CHECK_FALSE(labels.empty());
  CHECK(labels.size() <= r.cost_front.size());
  // Read the labels back and check their boxes (as the placer measures them) pairwise.
  std::vector<io::detail::cluster_chart::box> boxes;
  for (const auto* l : labels) {
    const double x = l->DoubleAttribute("x");
    const double y = l->DoubleAttribute("y");
    const double w = io::detail::cluster_chart::text_width(l->GetText(), 11.0);
    const bool end = std::string_view{l->Attribute("text-anchor")} == "end";
    boxes.push_back({end ? x - w : x, y - 11.0 * 0.96, end ? x : x + w, y + 11.0 * 0.24});
  }
  for (std::size_t i = 0; i < boxes.size(); ++i)
    for (std::size_t j = 0; j < i; ++j) CHECK_FALSE(boxes[i].overlaps(boxes[j]));
  // The same result gives the same bytes.
  CHECK(io::cluster_front_svg(s, r, "gpt2 & friends: throughput vs cost") == text);
}
