#include "sim/report/html.h"

#include "sim/report/json_output.h"

namespace capsim {
namespace {

const char* kStyle = R"css(
body { font-family: system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; border-bottom: 2px solid #4682b4; padding-bottom: .2em; }
h2 { font-size: 1.25em; margin-top: 1.8em; }
h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .9em; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f0f4f8; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.pass td:last-child { color: #1b6e3a; font-weight: bold; }
tr.fail td { background: #fdecea; }
tr.fail td:last-child { color: #b22222; font-weight: bold; }
tr.rule td { border: 0; padding: 0; height: 4px; background: #eee; }
pre { background: #f7f7f7; border: 1px solid #ddd; padding: .8em; overflow-x: auto; font-size: .85em; }
figure.plot { margin: 1em 0; }
figure.plot svg { width: 100%; max-width: 900px; height: auto; display: block; }
figcaption { font-size: .85em; color: #555; }
footer { margin-top: 3em; font-size: .8em; color: #777; }
)css";

// Runs when the page has loaded: every chart must be an <svg> with drawn elements and a box.
const char* kCheck = R"js(
(function () {
  var figs = document.querySelectorAll('figure.plot');
  var empty = 0;
  figs.forEach(function (f) {
    var svg = f.querySelector('svg');
    var drawn = svg ? svg.querySelectorAll('path, line, polyline, rect, text').length : 0;
    var box = svg ? svg.getBoundingClientRect() : null;
    if (!svg || drawn === 0 || !box || box.width <= 0 || box.height <= 0) {
      empty++;
      console.error('capsim-report: chart "' + (f.getAttribute('data-title') || '?') + '" is empty');
    }
  });
  document.body.setAttribute('data-plots', empty ? 'error ' + empty + ' of ' + figs.length + ' empty'
                                                 : 'ok ' + figs.length);
  console.log('capsim-report: ' + figs.length + ' plots, ' + empty + ' empty');
})();
)js";

bool numeric_cell(const std::string& s) {
  if (s.empty()) return false;
  const char c = s[0];
  return (c >= '0' && c <= '9') || ((c == '-' || c == '+' || c == '$' || c == '.') && s.size() > 1 &&
                                    s[1] >= '0' && s[1] <= '9');
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

HtmlReport::HtmlReport(std::string title, std::string flag) : title_(std::move(title)), flag_(std::move(flag)) {}

void HtmlReport::heading(const std::string& text, int level) {
  const char digit = static_cast<char>('0' + (level < 1 ? 1 : level > 4 ? 4 : level));
  body_.append("<h").append(1, digit).append(">").append(html_escape(text));
  body_.append("</h").append(1, digit).append(">\n");
}

void HtmlReport::paragraph(const std::string& text) { body_ += "<p>" + html_escape(text) + "</p>\n"; }

void HtmlReport::preformatted(const std::string& text) { body_ += "<pre>" + html_escape(text) + "</pre>\n"; }

void HtmlReport::table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                       const std::vector<std::string>& row_class) {
  body_ += "<table>\n<thead><tr>";
  for (const auto& h : header) body_ += "<th>" + html_escape(h) + "</th>";
  body_ += "</tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].empty()) {
      body_ += "<tr class=\"rule\"><td colspan=\"" + std::to_string(header.size()) + "\"></td></tr>\n";
      continue;
    }
    const std::string cls = i < row_class.size() && !row_class[i].empty() ? " class=\"" + row_class[i] + "\"" : "";
    body_ += "<tr" + cls + ">";
    for (std::size_t k = 0; k < header.size(); ++k) {
      const std::string cell = k < rows[i].size() ? rows[i][k] : "";
      body_ += (k > 0 && numeric_cell(cell) ? "<td class=\"num\">" : "<td>") + html_escape(cell) + "</td>";
    }
    body_ += "</tr>\n";
  }
  body_ += "</tbody>\n</table>\n";
}

void HtmlReport::chart(const plot::Chart& c, const std::string& caption) {
  std::string id = std::to_string(++charts_);
  id.insert(id.begin(), 'c');
  id.push_back('-');
  const std::string svg = plot::render_svg(c, id, flag_);
  body_ += "<figure class=\"plot\" data-title=\"" + html_escape(c.title) + "\">\n" + svg + "\n";
  if (!caption.empty()) body_ += "<figcaption>" + html_escape(caption) + "</figcaption>\n";
  body_ += "</figure>\n";
}

std::string HtmlReport::render() const {
  std::string page = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                     "<title>" + html_escape(title_) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  page += "<h1>" + html_escape(title_) + "</h1>\n" + body_;
  page += "<footer>Written by capsim; charts drawn by gnuplot. This page is self-contained and works offline.</footer>\n";
  page += "<script>" + std::string(kCheck) + "</script>\n</body>\n</html>\n";
  return page;
}

void HtmlReport::write(const std::string& path) const { write_text_file(path, render(), flag_); }

}  // namespace capsim
