// Charts for reports and --plot, drawn by gnuplot (Debian package gnuplot-nox) run as a
// subprocess: capsim describes a chart (series of points, or bars), gnuplot renders it with its
// svg terminal (or pngcairo for .png files). Nothing is drawn by hand here.
//
// Contract: every failure a user can cause or fix (gnuplot missing, no png terminal, an
// unwritable file, gnuplot refusing a script) throws capsim::Error starting with the flag
// ("--report: ", "--plot: ") and saying what to do. Files appear whole or not at all.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace capsim::plot {

struct Series {
  std::string title;
  std::vector<double> x, y;
  std::string style = "lines";  // gnuplot style: lines, steps, linespoints, points
  bool y2 = false;               // on the right-hand axis
};

// A labelled reference line across the plot: y = value (horizontal) or x = value (vertical).
struct RefLine {
  std::string label;
  double value = 0;
};

struct Chart {
  std::string title, xlabel, ylabel, y2label;
  bool logx = false, logy = false;
  std::optional<double> xmin, xmax, ymin, ymax, y2min, y2max;
  std::vector<Series> series;
  std::vector<RefLine> hlines, vlines;
  // A bar chart instead of series when `bars` is non-empty: one bar per category, coloured by
  // `bar_ok` when given (true green, false red), else one colour; the value printed on each bar
  // with `bar_format` (printf style, e.g. "$%.2f").
  std::vector<std::string> categories;
  std::vector<double> bars;
  std::vector<bool> bar_ok;
  std::string bar_format = "%.2f";
  // Bars drawn across (labels on the left, first category at the top) instead of up; chosen
  // automatically when a category name is long or there are many.
  std::optional<bool> horizontal;
};

// Whether `chart`'s bars are drawn across (Chart::horizontal, else long or many categories).
bool horizontal_bars(const Chart& chart);

// The gnuplot executable found on PATH, or "" when there is none.
std::string find_gnuplot();
// Throws capsim::Error "<flag>: gnuplot is not installed (not found on PATH); install the Debian
// package gnuplot-nox (apt-get install gnuplot-nox)" when find_gnuplot() is empty.
void require_gnuplot(const std::string& flag);

// The gnuplot script that draws `chart` (data inline), after `set terminal`/`set output`.
std::string gnuplot_script(const Chart& chart);

// Renders `chart` as SVG for inlining into HTML: no XML prolog, no namespace URLs, element ids
// prefixed with `id_prefix` so several charts share one page. Throws capsim::Error (`flag`).
std::string render_svg(const Chart& chart, const std::string& id_prefix, const std::string& flag,
                       int width = 760, int height = 420);

// Checks that `path` ends in .svg or .png and, for .png, that gnuplot has the pngcairo terminal;
// call before long work so a bad --plot fails at once. Throws capsim::Error (`flag`).
void check_plot_path(const std::string& path, const std::string& flag);
// The bytes of `chart` as the file `path` asks for (.svg with the svg terminal, .png with
// pngcairo), to write with write_text_file.
std::string chart_bytes(const Chart& chart, const std::string& path, const std::string& flag);

}  // namespace capsim::plot
