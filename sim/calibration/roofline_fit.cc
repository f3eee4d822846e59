#include "sim/calibration/roofline_fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sim/calibration/profile.h"
#include "sim/core/error.h"

namespace capsim::calibration {

double roofline_seconds(double flops, double peak_flops, double compute_eff, double bytes,
                        double peak_bandwidth, double bandwidth_eff, double floor_s) {
  const double c = flops > 0 ? flops / (peak_flops * compute_eff) : 0.0;
  const double m = bytes > 0 ? bytes / (peak_bandwidth * bandwidth_eff) : 0.0;
  return std::max(std::hypot(c, m), floor_s);
}

std::string regime_of(double compute_s, double memory_s, double floor_s) {
  if (floor_s > std::hypot(compute_s, memory_s)) return "floor";
  if (compute_s > 2 * memory_s) return "compute";
  if (2 * compute_s < memory_s) return "memory";
  return "ridge";
}

FitQuality fit_quality(const std::vector<KernelSample>& samples, const std::vector<double>& predicted,
                       const std::vector<std::string>& regime) {
  FitQuality q;
  q.samples = static_cast<int>(samples.size());
  if (samples.empty()) return q;
  std::vector<double> ape, ratio;
  double mean_log = 0, mean_t = 0;
  for (const auto& s : samples) {
    mean_log += std::log(s.seconds);
    mean_t += s.seconds;
  }
  mean_log /= static_cast<double>(samples.size());
  mean_t /= static_cast<double>(samples.size());
  double sse_log = 0, sst_log = 0, sse = 0, sst = 0;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const double t = samples[i].seconds, p = predicted[i];
    sse_log += std::pow(std::log(p) - std::log(t), 2);
    sst_log += std::pow(std::log(t) - mean_log, 2);
    sse += (p - t) * (p - t);
    sst += (t - mean_t) * (t - mean_t);
    ape.push_back(std::fabs(p / t - 1));
    ratio.push_back(p / t - 1);
  }
  q.r2_log = sst_log > 0 ? 1 - sse_log / sst_log : (sse_log == 0 ? 1 : 0);
  q.r2 = sst > 0 ? 1 - sse / sst : (sse == 0 ? 1 : 0);
  q.median_ape = median(ape);
  q.p90_ape = quantile(ape, 0.9);
  q.max_ape = *std::max_element(ape.begin(), ape.end());
  for (const char* name : {"memory", "ridge", "compute", "floor"}) {
    std::vector<double> a, r;
    for (std::size_t i = 0; i < samples.size(); ++i) {
      if (regime[i] == name) {
        a.push_back(ape[i]);
        r.push_back(ratio[i]);
      }
    }
    if (a.empty()) continue;
    q.regimes.push_back({name, static_cast<int>(a.size()), median(a), quantile(a, 0.9), median(r)});
  }
  return q;
}

namespace {

struct Work {
  std::vector<double> x, y, t;  // (F/P)², (B/BW)², measured
  std::vector<int> g;
};

}  // namespace

RooflineFit fit_roofline(const std::vector<KernelSample>& samples, const FitSpec& spec) {
  if (samples.empty()) throw Error("calibration fit: no samples to fit");
  if (!(spec.peak_bandwidth > 0)) throw Error("calibration fit: the card's peak bandwidth must be > 0");
  const std::size_t n = samples.size();
  const int groups = static_cast<int>(spec.groups.size());
  Work w;
  for (const auto& s : samples) {
    if (!(s.seconds > 0) || !std::isfinite(s.seconds)) {
      throw Error("calibration fit: sample '" + s.label + "' has a non-positive time");
    }
    if (s.flops < 0 || s.bytes < 0 || (s.flops == 0 && s.bytes == 0)) {
      throw Error("calibration fit: sample '" + s.label + "' has neither FLOPs nor bytes");
    }
    if (s.flops > 0 && (s.group < 0 || s.group >= groups || !(s.peak_flops > 0))) {
      throw Error("calibration fit: sample '" + s.label + "' has FLOPs but no compute group or peak");
    }
    w.x.push_back(s.flops > 0 ? std::pow(s.flops / s.peak_flops, 2) : 0.0);
    w.y.push_back(std::pow(s.bytes / spec.peak_bandwidth, 2));
    w.t.push_back(s.seconds);
    w.g.push_back(s.flops > 0 ? s.group : -1);
  }

  RooflineFit out;
  // Current parameters: U[g] = 1/e_g², V = 1/e_b², f.
  std::vector<double> U(groups);
  for (int k = 0; k < groups; ++k) U[k] = 1 / std::pow(spec.groups[k].prior, 2);
  double V = 1 / std::pow(spec.bandwidth_prior, 2);
  double f = spec.floor_prior;
  const auto h_of = [&](std::size_t i) {
    return std::sqrt((w.g[i] >= 0 ? w.x[i] * U[w.g[i]] : 0.0) + w.y[i] * V);
  };

  // Which parameters the samples can determine (judged at the priors).
  std::vector<int> informs_u(groups, 0);
  int informs_v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (h_of(i) < f) continue;
    const double c = w.g[i] >= 0 ? std::sqrt(w.x[i] * U[w.g[i]]) : 0.0;
    const double m = std::sqrt(w.y[i] * V);
    if (w.g[i] >= 0 && c >= 0.5 * m) ++informs_u[w.g[i]];
    if (m >= 0.5 * c) ++informs_v;
  }
  out.compute.resize(groups);
  std::vector<bool> free_u(groups, false);
  for (int k = 0; k < groups; ++k) {
    ParamFit& p = out.compute[k];
    p.name = spec.groups[k].name;
    p.samples = informs_u[k];
    if (spec.groups[k].fixed) {
      p.note = "held fixed";
    } else if (informs_u[k] < spec.min_samples) {
      p.note = "not fitted: " + std::to_string(informs_u[k]) +
               " compute-bound or ridge samples (need " + std::to_string(spec.min_samples) + ")";
    } else {
      free_u[k] = true;
    }
  }
  out.bandwidth.name = "bandwidth";
  out.bandwidth.samples = informs_v;
  bool free_v = false;
  if (spec.bandwidth_fixed) {
    out.bandwidth.note = "held fixed";
  } else if (informs_v < spec.min_samples) {
    out.bandwidth.note = "not fitted: " + std::to_string(informs_v) +
                         " memory-bound or ridge samples (need " + std::to_string(spec.min_samples) + ")";
  } else {
    free_v = true;
  }
  out.floor.name = "floor";

  std::vector<bool> active(n, false);
  Eigen::MatrixXd cov;
  std::vector<int> column_of_group(groups, -1);
  int v_column = -1;
  int floor_samples = 0, deep_floor_samples = 0;
  bool floor_fitted = false;
  for (int iter = 1; iter <= 100; ++iter) {
    out.iterations = iter;
    for (std::size_t i = 0; i < n; ++i) active[i] = h_of(i) >= f;
    // Linear least squares in the free parameters over the samples above the floor.
    for (bool again = true; again;) {
      again = false;
      int p = 0;
      for (int k = 0; k < groups; ++k) column_of_group[k] = free_u[k] ? p++ : -1;
      v_column = free_v ? p++ : -1;
      std::vector<std::size_t> rows;
      for (std::size_t i = 0; i < n; ++i) {
        if (active[i]) rows.push_back(i);
      }
      if (p == 0 || static_cast<int>(rows.size()) < p) break;
      Eigen::MatrixXd A = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(rows.size()), p);
      Eigen::VectorXd b(static_cast<Eigen::Index>(rows.size()));
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const std::size_t i = rows[r];
        const double t2 = w.t[i] * w.t[i];
        double known = 0;
        const int gi = w.g[i];
        if (gi >= 0) {
          if (column_of_group[gi] >= 0) A(static_cast<Eigen::Index>(r), column_of_group[gi]) = w.x[i] / t2;
          else known += w.x[i] * U[gi];
        }
        if (v_column >= 0) A(static_cast<Eigen::Index>(r), v_column) = w.y[i] / t2;
        else known += w.y[i] * V;
        b(static_cast<Eigen::Index>(r)) = 1 - known / t2;
      }
      const Eigen::VectorXd theta = A.colPivHouseholderQr().solve(b);
      // A non-physical solution (U or V <= 0) means that parameter is not determined: hold it.
      for (int k = 0; k < groups; ++k) {
        if (column_of_group[k] >= 0 && !(theta(column_of_group[k]) > 0 && std::isfinite(theta(column_of_group[k])))) {
          free_u[k] = false;
          out.compute[k].note = "not fitted: the samples do not determine it (least squares gave a non-physical value)";
          U[k] = 1 / std::pow(spec.groups[k].prior, 2);
          again = true;
        }
      }
      if (v_column >= 0 && !(theta(v_column) > 0 && std::isfinite(theta(v_column)))) {
        free_v = false;
        out.bandwidth.note = "not fitted: the samples do not determine it (least squares gave a non-physical value)";
        V = 1 / std::pow(spec.bandwidth_prior, 2);
        again = true;
      }
      if (again) continue;
      for (int k = 0; k < groups; ++k) {
        if (column_of_group[k] >= 0) U[k] = theta(column_of_group[k]);
      }
      if (v_column >= 0) V = theta(v_column);
      const double dof = static_cast<double>(rows.size()) - p;
      const double sigma2 = dof > 0 ? (A * theta - b).squaredNorm() / dof : 0.0;
      cov = sigma2 * (A.transpose() * A).inverse();
    }

    // The floor: one dimension, exact over the breakpoints of max(h, f), in log space.
    if (!spec.floor_fixed) {
      std::vector<std::size_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::vector<double> h(n), lt(n);
      for (std::size_t i = 0; i < n; ++i) {
        h[i] = h_of(i);
        lt[i] = std::log(w.t[i]);
      }
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b2) { return h[a] < h[b2]; });
      std::vector<double> suffix(n + 1, 0.0);  // Σ over sorted j.. of (log h - log t)²
      for (std::size_t j = n; j-- > 0;) {
        const std::size_t i = order[j];
        suffix[j] = suffix[j + 1] + std::pow(std::log(h[i]) - lt[i], 2);
      }
      double best = suffix[0];
      std::size_t best_j = 0;
      double best_f = 0;
      double s1 = 0, s2 = 0;
      for (std::size_t j = 1; j <= n; ++j) {
        const std::size_t i = order[j - 1];
        s1 += lt[i];
        s2 += lt[i] * lt[i];
        const double lo = std::log(h[i]);
        const double hi = j < n ? std::log(h[order[j]]) : std::numeric_limits<double>::infinity();
        const double lf = std::clamp(s1 / static_cast<double>(j), lo, hi);
        const double obj = static_cast<double>(j) * lf * lf - 2 * lf * s1 + s2 + suffix[j];
        if (obj < best - 1e-15 * std::max(1.0, best)) {
          best = obj;
          best_j = j;
          best_f = std::exp(lf);
        }
      }
      floor_samples = static_cast<int>(best_j);
      // A floor is a kernel's minimum time, so it is identified only by samples whose roofline
      // time is well below it (under half). Samples just under a "floor" are a misfit of the
      // roofline terms (e.g. small memory-bound GEMMs reaching less bandwidth than large ones),
      // which a free floor would otherwise absorb.
      int deep = 0;
      for (std::size_t j = 0; j < best_j; ++j) deep += h[order[j]] < 0.5 * best_f;
      deep_floor_samples = deep;
      if (best_j >= static_cast<std::size_t>(std::max(1, spec.min_samples)) && deep >= spec.min_samples) {
        f = best_f;
        floor_fitted = true;
        double var = 0;
        const double lf = std::log(f);
        for (std::size_t j = 0; j < best_j; ++j) var += std::pow(lt[order[j]] - lf, 2);
        var = best_j > 1 ? var / static_cast<double>(best_j - 1) : 0.0;
        const double se = std::sqrt(var / static_cast<double>(best_j));
        out.floor.ci_low = f * std::exp(-1.96 * se);
        out.floor.ci_high = f * std::exp(1.96 * se);
      } else {
        f = spec.floor_prior;
        floor_fitted = false;
      }
    }
    std::vector<bool> now(n);
    for (std::size_t i = 0; i < n; ++i) now[i] = h_of(i) >= f;
    if (now == active) break;  // the samples above the floor no longer change: a fixed point
  }

  // Report.
  for (int k = 0; k < groups; ++k) {
    ParamFit& p = out.compute[k];
    p.value = 1 / std::sqrt(U[k]);
    p.fitted = free_u[k];
    p.ci_low = p.ci_high = p.value;
    if (p.fitted && column_of_group[k] >= 0 && cov.rows() > column_of_group[k]) {
      const double se_u = std::sqrt(std::max(0.0, cov(column_of_group[k], column_of_group[k])));
      const double se = 0.5 * std::pow(U[k], -1.5) * se_u;
      p.ci_low = p.value - 1.96 * se;
      p.ci_high = p.value + 1.96 * se;
    }
  }
  out.bandwidth.value = 1 / std::sqrt(V);
  out.bandwidth.fitted = free_v;
  out.bandwidth.ci_low = out.bandwidth.ci_high = out.bandwidth.value;
  if (free_v && v_column >= 0 && cov.rows() > v_column) {
    const double se = 0.5 * std::pow(V, -1.5) * std::sqrt(std::max(0.0, cov(v_column, v_column)));
    out.bandwidth.ci_low = out.bandwidth.value - 1.96 * se;
    out.bandwidth.ci_high = out.bandwidth.value + 1.96 * se;
  }
  out.floor.value = f;
  out.floor.fitted = floor_fitted;
  out.floor.samples = floor_fitted ? floor_samples : deep_floor_samples;
  if (!floor_fitted) {
    out.floor.ci_low = out.floor.ci_high = f;
    out.floor.note = spec.floor_fixed
                         ? "held fixed"
                         : "not fitted: " + std::to_string(deep_floor_samples) +
                               " samples far below a floor (roofline time under half of it; need " +
                               std::to_string(spec.min_samples) + ")";
  }

  out.predicted.resize(n);
  out.regime.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const double c = w.g[i] >= 0 ? std::sqrt(w.x[i] * U[w.g[i]]) : 0.0;
    const double m = std::sqrt(w.y[i] * V);
    out.predicted[i] = std::max(std::hypot(c, m), f);
    out.regime[i] = regime_of(c, m, f);
  }
  out.quality = fit_quality(samples, out.predicted, out.regime);
  return out;
}

}  // namespace capsim::calibration
