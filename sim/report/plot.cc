#include "sim/report/plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

#include "sim/core/error.h"

extern char** environ;

namespace capsim::plot {
namespace {

namespace fs = std::filesystem;

const char* kInstall = "install the Debian package gnuplot-nox (apt-get install gnuplot-nox)";

// Single-quoted gnuplot string: '' stands for a quote; newlines become spaces.
std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out + "'";
}

std::string number(double v) {
  if (std::isnan(v) || std::isinf(v)) return "NaN";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

std::string range(std::optional<double> lo, std::optional<double> hi) {
  std::string r(1, '[');
  r.append(lo ? number(*lo) : std::string(1, '*')).append(1, ':');
  r.append(hi ? number(*hi) : std::string(1, '*')).append(1, ']');
  return r;
}

// A scratch directory, removed with everything in it.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& flag) {
    std::string tmpl = (fs::temp_directory_path() / "capsim-plot-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      throw Error(flag + ": cannot create a temporary directory for gnuplot: " + std::strerror(errno));
    }
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `gnuplot script`, stdout and stderr to `log`; returns the exit status (-1: did not run).
int run_gnuplot(const std::string& gnuplot, const std::string& script, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<std::string> args = {gnuplot, script};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, gnuplot.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Runs a whole script (terminal and output included) and returns the output file's bytes.
std::string run_script(const std::string& terminal, const std::string& body, const std::string& flag,
                       const std::string& ext) {
  const std::string gnuplot = find_gnuplot();
  if (gnuplot.empty()) require_gnuplot(flag);
  ScratchDir dir(flag);
  const std::string out = dir.file("chart." + ext);
  const std::string script = dir.file("chart.gp");
  {
    std::ofstream s(script, std::ios::binary);
    s << terminal << "\nset output " << quote(out) << "\n" << body << "\nunset output\n";
    if (!s) throw Error(flag + ": cannot write the gnuplot script in " + fs::temp_directory_path().string());
  }
  const std::string log = dir.file("gnuplot.log");
  const int rc = run_gnuplot(gnuplot, script, log);
  std::string text = fs::exists(out) ? read_file(out) : std::string();
  if (rc != 0 || text.empty()) {
    std::string why = read_file(log);
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    if (why.size() > 600) why = why.substr(why.size() - 600);
    throw Error(flag + ": gnuplot (" + gnuplot + ") failed" +
                (rc < 0 ? std::string(": could not run it") : " with exit status " + std::to_string(rc)) +
                (why.empty() ? std::string() : ": " + why));
  }
  return text;
}

std::string terminal_for(const std::string& ext, int width, int height) {
  if (ext == "png") {
    return "set terminal pngcairo size " + std::to_string(width) + "," + std::to_string(height) +
           " noenhanced font 'sans,10' background '#ffffff'";
  }
  return "set terminal svg size " + std::to_string(width) + "," + std::to_string(height) +
         " dynamic noenhanced font 'sans,11' background '#ffffff'";
}

bool has_points(const Chart& c) {
  if (!c.bars.empty()) return true;
  for (const Series& s : c.series) {
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (std::isfinite(s.x[i]) && std::isfinite(s.y[i]) && (!c.logx || s.x[i] > 0) &&
          (!c.logy || s.y[i] > 0)) {
        return true;
      }
    }
  }
  return false;
}

std::string extension(const std::string& path) {
  std::string e = fs::path(path).extension().string();
  for (char& ch : e) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return e.empty() ? e : e.substr(1);
}

}  // namespace

std::string find_gnuplot() {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::stringstream in(path);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/gnuplot";
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate;
  }
  return "";
}

void require_gnuplot(const std::string& flag) {
  if (find_gnuplot().empty()) {
    throw Error(flag + ": gnuplot is not installed (not found on PATH); " + kInstall);
  }
}

std::string gnuplot_script(const Chart& c) {
  std::ostringstream g;
  g << "set encoding utf8\n";
  if (!c.title.empty()) g << "set title " << quote(c.title) << "\n";
  if (!c.xlabel.empty()) g << "set xlabel " << quote(c.xlabel) << "\n";
  if (!c.ylabel.empty()) g << "set ylabel " << quote(c.ylabel) << "\n";
  g << "set grid lc rgb '#dddddd'\nset border lc rgb '#555555'\n";
  if (!has_points(c)) {
    g << "set label 'no data' at graph 0.5, graph 0.5 center\nset xrange [0:1]\nset yrange [0:1]\n"
         "plot NaN notitle\n";
    return g.str();
  }
  if (!c.bars.empty()) {
    g << "$bars << EOD\n";
    double lowest = 0;
    for (std::size_t i = 0; i < c.bars.size(); ++i) {
      std::string label = i < c.categories.size() ? c.categories[i] : std::to_string(i + 1);
      for (char& ch : label) {
        if (ch == '"') ch = '\'';
        if (ch == '\n') ch = ' ';
      }
      const int colour = c.bar_ok.empty() ? 0x4682b4 : (c.bar_ok[i] ? 0x2e8b57 : 0xb22222);
      g << "\"" << label << "\" " << number(c.bars[i]) << " " << colour << "\n";
      if (std::isfinite(c.bars[i])) lowest = std::min(lowest, c.bars[i]);
    }
    g << "EOD\n";
    g << "set style fill solid 0.85 border -1\nunset key\n";
    const std::string n_minus = number(static_cast<double>(c.bars.size()) - 0.4);
    const std::optional<double> lo = c.ymin ? c.ymin : std::optional<double>(lowest < 0 ? lowest * 1.15 : 0.0);
    const std::string label_fmt = quote(c.bar_format);
    if (horizontal_bars(c)) {
      // Across: the value on x, categories on y from the top; the value printed past each bar.
      if (!c.ylabel.empty()) g << "unset ylabel\nset xlabel " << quote(c.ylabel) << "\n";
      g << "unset grid\nset grid x lc rgb '#dddddd'\n";
      g << "set yrange [" << n_minus << ":-0.6]\nset xrange " << range(lo, c.ymax) << "\n";
      g << "set offsets 0, graph 0.15, 0, 0\nset ytics scale 0\n";
      for (const RefLine& h : c.hlines) {
        g << "set arrow from first " << number(h.value) << ", graph 0 to first " << number(h.value)
          << ", graph 1 nohead lc rgb '#b22222' dt 2 lw 1.5 front\n";
        g << "set label " << quote(h.label) << " at first " << number(h.value)
          << ", graph 1 left offset 0.5,-0.8 tc rgb '#b22222' front\n";
      }
      g << "plot $bars using (0):0:(($2<0)?$2:0):(($2<0)?0:$2):($0-0.3):($0+0.3):3:ytic(1) with boxxyerror "
           "lc rgb variable, '' using (($2<0)?0:$2):0:(sprintf("
        << label_fmt << ", $2)) with labels left offset char 0.6,0\n";
      return g.str();
    }
    g << "set boxwidth 0.6\n";
    g << "set xrange [-0.6:" << n_minus << "]\n";
    g << "set yrange " << range(lo, c.ymax) << "\nset offsets 0, 0, graph 0.1, 0\n";
    for (const RefLine& h : c.hlines) {
      g << "set arrow from graph 0, first " << number(h.value) << " to graph 1, first "
        << number(h.value) << " nohead lc rgb '#b22222' dt 2 lw 1.5 front\n";
      g << "set label " << quote(h.label) << " at graph 0.99, first " << number(h.value)
        << " right offset 0,0.7 tc rgb '#b22222' front\n";
    }
    g << "plot $bars using 0:2:3:xtic(1) with boxes lc rgb variable, '' using 0:2:(sprintf("
      << label_fmt << ", $2)) with labels offset 0,0.8\n";
    return g.str();
  }
  if (c.logx) g << "set logscale x\n";
  if (c.logy) g << "set logscale y\n";
  g << "set xrange " << range(c.xmin, c.xmax) << "\n";
  g << "set yrange " << range(c.ymin, c.ymax) << "\n";
  bool any_y2 = false;
  for (const Series& s : c.series) any_y2 = any_y2 || s.y2;
  if (any_y2) {
    g << "set ytics nomirror\nset y2tics\nset y2range " << range(c.y2min, c.y2max) << "\n";
    if (!c.y2label.empty()) g << "set y2label " << quote(c.y2label) << "\n";
  }
  g << "set key top left box opaque\n";
  for (const RefLine& h : c.hlines) {
    g << "set arrow from graph 0, first " << number(h.value) << " to graph 1, first " << number(h.value)
      << " nohead lc rgb '#b22222' dt 2 lw 1.5 front\n";
    g << "set label " << quote(h.label) << " at graph 0.99, first " << number(h.value)
      << " right offset 0,0.7 tc rgb '#b22222' front\n";
  }
  for (const RefLine& v : c.vlines) {
    g << "set arrow from first " << number(v.value) << ", graph 0 to first " << number(v.value)
      << ", graph 1 nohead lc rgb '#555555' dt 3 lw 1.5 front\n";
    g << "set label " << quote(v.label) << " at first " << number(v.value)
      << ", graph 0.04 left offset 0.5,0 tc rgb '#555555' front\n";
  }
  std::vector<std::string> plots;
  for (std::size_t k = 0; k < c.series.size(); ++k) {
    const Series& s = c.series[k];
    std::ostringstream d;
    std::size_t n = 0;
    d << "$d" << k << " << EOD\n";
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      if ((c.logx && s.x[i] <= 0) || (c.logy && s.y[i] <= 0)) continue;
      d << number(s.x[i]) << " " << number(s.y[i]) << "\n";
      ++n;
    }
    d << "EOD\n";
    if (n == 0) continue;
    g << d.str();
    plots.push_back("$d" + std::to_string(k) + " using 1:2 with " + s.style + " lw 2" +
                    (s.style == "linespoints" ? " pt 7 ps 0.6" : "") + (s.y2 ? " axes x1y2" : "") +
                    " title " + quote(s.title));
  }
  g << "plot ";
  for (std::size_t i = 0; i < plots.size(); ++i) g << (i ? ", \\\n     " : "") << plots[i];
  g << "\n";
  return g.str();
}

bool horizontal_bars(const Chart& c) {
  if (c.horizontal) return *c.horizontal;
  std::size_t longest = 0;
  for (const auto& s : c.categories) longest = std::max(longest, s.size());
  return longest > 16 || c.bars.size() * longest > 90 || c.bars.size() > 12;
}

std::string render_svg(const Chart& chart, const std::string& id_prefix, const std::string& flag,
                       int width, int height) {
  if (!chart.bars.empty() && horizontal_bars(chart)) {
    height = std::max(200, 90 + 32 * static_cast<int>(chart.bars.size()));
  }
  std::string svg = run_script(terminal_for("svg", width, height), gnuplot_script(chart), flag, "svg");
  const auto start = svg.find("<svg");
  if (start == std::string::npos) throw Error(flag + ": gnuplot wrote no <svg> element");
  svg = svg.substr(start);
  // Inline in HTML the namespaces are implied; dropping them leaves no URL in the page.
  for (const char* ns : {" xmlns=\"http://www.w3.org/2000/svg\"", " xmlns:xlink=\"http://www.w3.org/1999/xlink\"",
                         "\n xmlns=\"http://www.w3.org/2000/svg\"", "\n xmlns:xlink=\"http://www.w3.org/1999/xlink\""}) {
    for (auto p = svg.find(ns); p != std::string::npos; p = svg.find(ns)) svg.erase(p, std::strlen(ns));
  }
  // Unique ids per chart: every id, and every reference to one.
  static const std::regex id_attr(R"re(\bid=(['"])([^'"]+)\1)re");
  static const std::regex href_attr(R"re(href=(['"])#([^'"]+)\1)re");
  static const std::regex url_ref(R"re(url\(#([^)]+)\))re");
  svg = std::regex_replace(svg, id_attr, "id=$1" + id_prefix + "$2$1");
  svg = std::regex_replace(svg, href_attr, "href=$1#" + id_prefix + "$2$1");
  svg = std::regex_replace(svg, url_ref, "url(#" + id_prefix + "$1)");
  // The tooltip of the whole chart is its title, not "Gnuplot".
  const std::string gp_title = "<title>Gnuplot</title>";
  if (const auto p = svg.find(gp_title); p != std::string::npos) {
    std::string t;
    for (char ch : chart.title) {
      if (ch == '<') t += "&lt;";
      else if (ch == '>') t += "&gt;";
      else if (ch == '&') t += "&amp;";
      else t += ch;
    }
    svg.replace(p, gp_title.size(), "<title>" + t + "</title>");
  }
  while (!svg.empty() && (svg.back() == '\n' || svg.back() == ' ')) svg.pop_back();
  return svg;
}

void check_plot_path(const std::string& path, const std::string& flag) {
  const std::string ext = extension(path);
  if (ext != "svg" && ext != "png") {
    throw Error(flag + ": '" + path + "' must end in .svg or .png (the chart's format)");
  }
  require_gnuplot(flag);
  if (ext == "png") {
    static std::once_flag once;
    static bool has_png = false;
    std::call_once(once, [&] {
      ScratchDir dir(flag);
      const std::string script = dir.file("probe.gp");
      std::ofstream(script) << "set terminal pngcairo\n";
      has_png = run_gnuplot(find_gnuplot(), script, dir.file("probe.log")) == 0;
    });
    if (!has_png) {
      throw Error(flag + ": gnuplot (" + find_gnuplot() + ") has no pngcairo terminal for '" + path +
                  "'; write .svg instead, or install a gnuplot built with cairo (Debian: gnuplot-nox)");
    }
  }
}

std::string chart_bytes(const Chart& chart, const std::string& path, const std::string& flag) {
  check_plot_path(path, flag);
  const std::string ext = extension(path);
  return run_script(terminal_for(ext, 900, 520), gnuplot_script(chart), flag, ext);
}

}  // namespace capsim::plot
