// One self-contained HTML page per report (--report FILE.html): headings, text, tables and
// charts (gnuplot SVG inlined), with its style sheet and a small check script inline. It loads
// nothing: no network URL, no other file; it opens from disk offline.
//
// The check script runs when the page loads: it counts the <svg> charts that have drawn content
// and records the result in <body data-plots="ok N"> (or "error ..."), logs
// "capsim-report: N plots, M empty" to the console and console.error()s an empty chart, so a
// headless browser's --dump-dom and its console show whether the charts rendered.
#pragma once

#include <string>
#include <vector>

#include "sim/report/plot.h"
#include "sim/report/table.h"

namespace capsim {

std::string html_escape(const std::string& text);

class HtmlReport {
 public:
  // `flag` names the option in error messages ("--report").
  HtmlReport(std::string title, std::string flag = "--report");

  void heading(const std::string& text, int level = 2);
  void paragraph(const std::string& text);
  void preformatted(const std::string& text);
  // The command's text report, verbatim under a "Text report" heading: the last section of
  // every report page, so the page holds all the terminal said.
  void text_report(const std::string& text, int level = 3) {
    heading("Text report", level);
    preformatted(text);
  }
  // A table; `row_class[i]` (optional) classes row i: "pass", "fail" colour it.
  void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
             const std::vector<std::string>& row_class = {});
  void table(const TextTable& t) { table(t.header(), t.rows()); }
  // Draws `chart` with gnuplot now and inlines its SVG with a caption.
  void chart(const plot::Chart& chart, const std::string& caption = "");

  int charts() const { return charts_; }
  std::string render() const;
  // Writes the page whole or not at all (write_text_file).
  void write(const std::string& path) const;

 private:
  std::string title_;
  std::string flag_;
  std::string body_;
  int charts_ = 0;
};

}  // namespace capsim
