// The page of headlab report: the base64 helper, the one-byte quantisation and the zlib
// compression of attention maps, and the template (src/report/report.html, compiled in as kReportTemplate) filled in.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <zlib.h>

#include "headlab/common/error.h"
#include "headlab/report/report.h"
#include "headlab_report_script.h"    // generated from src/report/*.js (cmake/embed_text.cmake)
#include "headlab_report_template.h"  // generated from src/report/report.html (cmake/embed_text.cmake)

namespace headlab {

std::string base64_encode(const std::vector<unsigned char>& bytes) {
  static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const unsigned v = bytes[i] << 16 | bytes[i + 1] << 8 | bytes[i + 2];
    out += {alphabet[v >> 18], alphabet[v >> 12 & 63], alphabet[v >> 6 & 63], alphabet[v & 63]};
  }
  if (i + 1 == bytes.size()) {
    const unsigned v = bytes[i] << 16;
    out += {alphabet[v >> 18], alphabet[v >> 12 & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const unsigned v = bytes[i] << 16 | bytes[i + 1] << 8;
    out += {alphabet[v >> 18], alphabet[v >> 12 & 63], alphabet[v >> 6 & 63], '='};
  }
  return out;
}

std::vector<unsigned char> quantise_map(const double* probs, int64_t rows, int64_t cols, bool causal) {
  std::vector<unsigned char> out;
  out.reserve(causal ? rows * (rows + 1) / 2 : rows * cols);
  for (int64_t t = 0; t < rows; ++t)
    for (int64_t s = 0; s < (causal ? t + 1 : cols); ++s) {
      const double p = probs[t * cols + s];
      out.push_back(
          static_cast<unsigned char>(std::isfinite(p) ? std::lround(std::fmin(1.0, std::fmax(0.0, p)) * 255) : 0));
    }
  return out;
}

std::vector<unsigned char> deflate_bytes(const std::vector<unsigned char>& bytes) {
  uLongf size = compressBound(bytes.size());
  std::vector<unsigned char> out(size);
  HEADLAB_CHECK(compress2(out.data(), &size, bytes.data(), bytes.size(), 6) == Z_OK,
                "report: zlib failed to compress " << bytes.size() << " bytes");
  out.resize(size);
  return out;
}

namespace {

std::string html_escaped(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

// Whether `text` holds "{{", which begins every placeholder of the template.
constexpr bool has_placeholder_mark(const char* text) {
  for (; *text; ++text)
    if (text[0] == '{' && text[1] == '{') return true;
  return false;
}
static_assert(!has_placeholder_mark(kReportScript), "src/report/*.js must not contain \"{{\" (report_html)");

// The first (or with `last`, the last) occurrence of `placeholder`.
void replace_once(std::string& text, const std::string& placeholder, const std::string& value, bool last = false) {
  const size_t at = last ? text.rfind(placeholder) : text.find(placeholder);
  HEADLAB_CHECK(at != std::string::npos, "report template: no " << placeholder);
  text.replace(at, placeholder.size(), value);
}

}  // namespace

std::string report_html(const std::string& json, const std::string& title) {
  std::string page = kReportTemplate;
  // The template's placeholders in order are {{TITLE}}, {{DATA}}, {{SCRIPT}}: each is filled at its
  // last occurrence after it, or its first before it, so no value can hide a later placeholder.
  replace_once(page, "{{SCRIPT}}", kReportScript, true);  // our own code, without "{{" (static_assert)
  replace_once(page, "{{DATA}}", json, true);             // json_string escapes '<': no "</script>" inside
  replace_once(page, "{{TITLE}}", html_escaped(title));
  return page;
}

}  // namespace headlab
