// `kernels`' answer as every front end gives it: a card's measured kernel tables
// (calibration/kernels/<card>/) or, given GEMM shapes, each shape's time from the card's measured
// table and from the roofline side by side (the component check of docs/kernel-validation.md
// runs on it). `json` is exactly what `capsim kernels --json -` prints; `text` what it prints
// without --json (the listing, or the shapes as CSV in microseconds).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace capsim::answers {

struct KernelsRequest {
  std::string card = "h100-sxm";
  std::string engine = "vllm";  // whose efficiency scales the roofline uses
  std::string dtype = "bf16";   // the GEMM precision: bf16, fp8, nvfp4
  std::string table;            // a measured GEMM table file to use instead of the card's ("": the card's)
  bool table_allowed = true;    // whether the caller may give `table` (not over HTTP): what a message advises
  // CSV text with columns n, k and m (others ignored, '#' lines skipped); none: list the tables.
  std::optional<std::string> shapes_csv;
  std::string shapes_where = "shapes";  // how messages name the CSV ("file.csv:3: ...")
};

struct KernelsAnswer {
  nlohmann::json json;
  std::string text;
};

// Throws capsim::Error naming the flag or the CSV line for an unknown card, engine or dtype, a
// dtype the card has no table for, or a row whose n, k or m is not a positive number.
KernelsAnswer answer_kernels(const KernelsRequest& request);

}  // namespace capsim::answers
