#include "bench/suite_report.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/suite_env.h"
#include "bench/suite_json.h"

namespace kgrad {
namespace bench {
namespace {

std::string Fmt(double v) {
  if (!std::isfinite(v)) return "n/a";
  double a = std::fabs(v);
  if (a >= 100) return absl::StrFormat("%.0f", v);
  if (a >= 1) return absl::StrFormat("%.2f", v);
  return absl::StrFormat("%.3g", v);
}

std::string MetricsJson(const Metrics& m) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : m) parts.push_back(absl::StrCat("    ", JsonString(k), ": ", JsonNumber(v)));
  return absl::StrCat("{\n", absl::StrJoin(parts, ",\n"), "\n  }");
}

std::string PassText(const Row& row) {
  if (row.target.empty()) return "";
  if (!row.pass.has_value()) return "n/a";
  return *row.pass ? "pass" : "**miss**";
}

}  // namespace

std::string ToJson(const Report& r) {
  std::vector<std::string> meta, rows;
  for (const auto& [k, v] : r.meta) meta.push_back(absl::StrCat("    ", JsonString(k), ": ", JsonString(v)));
  for (const Row& row : r.rows) {
    double ratio = row.kgrad / row.torch;
    std::string pass = !row.pass.has_value() ? "null" : (*row.pass ? "true" : "false");
    rows.push_back(absl::StrCat("    {\"scenario\": ", JsonString(row.scenario), ", \"metric\": ",
                                JsonString(row.metric), ", \"key\": ", JsonString(row.key),
                                ", \"kgrad\": ", JsonNumber(row.kgrad), ", \"pytorch\": ", JsonNumber(row.torch),
                                ", \"kgrad_over_pytorch\": ", JsonNumber(ratio),
                                ", \"target\": ", JsonString(row.target), ", \"pass\": ", pass, "}"));
  }
  std::vector<std::string> notes;
  for (const std::string& n : r.notes) notes.push_back(absl::StrCat("    ", JsonString(n)));
  return absl::StrCat("{\n  \"meta\": {\n", absl::StrJoin(meta, ",\n"), "\n  },\n  \"rows\": [\n",
                      absl::StrJoin(rows, ",\n"), "\n  ],\n  \"notes\": [\n", absl::StrJoin(notes, ",\n"),
                      "\n  ],\n  \"kgrad\": ", MetricsJson(r.kgrad), ",\n  \"pytorch\": ", MetricsJson(r.torch),
                      "\n}\n");
}

std::string ToMarkdown(const Report& r) {
  std::string out = "# kgrad benchmark suite\n\n";
  for (const auto& [k, v] : r.meta) absl::StrAppend(&out, "- ", k, ": ", v, "\n");
  absl::StrAppend(&out, "\n| scenario | metric | kgrad | PyTorch | kgrad / PyTorch | target | result |\n",
                  "|---|---|---:|---:|---:|---|---|\n");
  for (const Row& row : r.rows) {
    absl::StrAppend(&out, "| ", row.scenario, " | ", row.metric, " | ", Fmt(row.kgrad), " | ", Fmt(row.torch),
                    " | ", Fmt(row.kgrad / row.torch), " | ", row.target, " | ", PassText(row), " |\n");
  }
  if (!r.notes.empty()) {
    absl::StrAppend(&out, "\nNotes:\n\n");
    for (const std::string& n : r.notes) absl::StrAppend(&out, "- ", n, "\n");
  }
  return out;
}

namespace {

struct Series {
  std::string name, color;
  std::vector<std::pair<double, double>> points;  // (nodes, ms), both > 0
};

// A decade tick: "100", "10k", "1M", "0.1".
std::string Decade(double v) {
  if (v >= 1e6) return absl::StrFormat("%gM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%gk", v / 1e3);
  return absl::StrFormat("%g", v);
}

}  // namespace

std::string BuildTimeSvg(const Report& r) {
  std::vector<Series> series = {{"kgrad: grad + optimise", "#1f77b4", {}},
                                {"PyTorch: eager forward + backward (reference)", "#d62728", {}}};
  for (int n : r.build_sizes) {
    std::string key = absl::StrCat("ad_build.", n, "_ms");
    for (int s = 0; s < 2; ++s) {
      const Metrics& m = s == 0 ? r.kgrad : r.torch;
      auto it = m.find(key);
      if (it != m.end() && std::isfinite(it->second) && it->second > 0) series[s].points.push_back({n, it->second});
    }
  }
  // Decade-aligned log axes around every point.
  double x0 = 1e9, x1 = 0, y0 = 1e9, y1 = 0;
  for (const Series& s : series) {
    for (auto [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  if (x1 == 0) x0 = 1e3, x1 = 1e5, y0 = 1, y1 = 1e3;
  double lx0 = std::floor(std::log10(x0)), lx1 = std::max(lx0 + 1, std::ceil(std::log10(x1)));
  double ly0 = std::floor(std::log10(y0)), ly1 = std::max(ly0 + 1, std::ceil(std::log10(y1)));
  const double w = 640, h = 420, left = 80, right = 70, top = 50, bottom = 60;
  auto px = [&](double x) { return left + (std::log10(x) - lx0) / (lx1 - lx0) * (w - left - right); };
  auto py = [&](double y) { return h - bottom - (std::log10(y) - ly0) / (ly1 - ly0) * (h - top - bottom); };
  std::string svg = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
      "<text x=\"%.0f\" y=\"24\" text-anchor=\"middle\" font-size=\"15\">Gradient graph build + optimise time "
      "vs graph size (log-log)</text>\n",
      w, h, w / 2);
  // Axes, decade grid and labels.
  absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", left,
                        h - bottom, w - right, h - bottom);
  absl::StrAppendFormat(&svg, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", left,
                        top, left, h - bottom);
  for (double e = lx0; e <= lx1; ++e) {
    double x = px(std::pow(10, e));
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                          x, top, x, h - bottom, x, h - bottom + 18, Decade(std::pow(10, e)));
  }
  for (double e = ly0; e <= ly1; ++e) {
    double y = py(std::pow(10, e));
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                          "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s ms</text>\n",
                          left, y, w - right, y, left - 6, y + 4, absl::StrFormat("%g", std::pow(10, e)));
  }
  absl::StrAppendFormat(&svg, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">nodes in the program</text>\n",
                        (left + w - right) / 2, h - 20);
  absl::StrAppendFormat(&svg,
                        "<text x=\"18\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.0f)\">"
                        "time (ms)</text>\n",
                        (top + h - bottom) / 2, (top + h - bottom) / 2);
  // Linear growth from kgrad's first point, for comparison.
  if (series[0].points.size() >= 2) {
    auto [xa, ya] = series[0].points.front();
    double xb = series[0].points.back().first;
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888\" "
                          "stroke-dasharray=\"5,4\"/>\n",
                          px(xa), py(ya), px(xb), py(ya * xb / xa));
  }
  double legend_y = top + 6;
  for (const Series& s : series) {
    if (s.points.empty()) continue;
    std::vector<std::string> pts;
    for (auto [x, y] : s.points) pts.push_back(absl::StrFormat("%.1f,%.1f", px(x), py(y)));
    absl::StrAppendFormat(&svg, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n",
                          s.color, absl::StrJoin(pts, " "));
    for (auto [x, y] : s.points) {
      absl::StrAppendFormat(&svg,
                            "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n"
                            "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%s</text>\n",
                            px(x), py(y), s.color, px(x) + 6, py(y) - 6, s.color, Fmt(y));
    }
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"2\"/>\n"
                          "<text x=\"%.0f\" y=\"%.0f\">%s</text>\n",
                          left + 12, legend_y, left + 36, legend_y, s.color, left + 42, legend_y + 4, s.name);
    legend_y += 18;
  }
  if (series[0].points.size() >= 2) {
    absl::StrAppendFormat(&svg,
                          "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#888\" "
                          "stroke-dasharray=\"5,4\"/>\n<text x=\"%.0f\" y=\"%.0f\">linear growth from kgrad's "
                          "smallest size</text>\n",
                          left + 12, legend_y, left + 36, legend_y, left + 42, legend_y + 4);
  }
  return svg + "</svg>\n";
}

absl::Status WriteReport(const Report& r, const std::string& dir, const std::string& stem) {
  std::string md = ToMarkdown(r);
  absl::Status written = WriteText(absl::StrCat(dir, "/", stem, ".json"), ToJson(r));
  written.Update(WriteText(absl::StrCat(dir, "/", stem, ".md"), md));
  std::printf("%s", md.c_str());
  return written;
}

}  // namespace bench
}  // namespace kgrad
