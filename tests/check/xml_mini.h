// A tiny, strict XML 1.0 reader for tests: enough to check that a file is well-formed (one root,
// properly nested and matching tags, quoted and unique attributes, known entities, no stray
// '<' or '&') and to walk its elements. Not namespace-aware; no DTDs.
#pragma once

#include <cctype>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace capsim_test {

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::vector<std::unique_ptr<XmlElement>> children;
  std::string text;  // character data directly inside, entities decoded

  bool has(const std::string& a) const { return attributes.count(a) > 0; }
  const std::string& attr(const std::string& a) const {
    static const std::string none;
    const auto it = attributes.find(a);
    return it == attributes.end() ? none : it->second;
  }
  std::vector<const XmlElement*> all(const std::string& child) const {
    std::vector<const XmlElement*> out;
    for (const auto& c : children) {
      if (c->name == child) out.push_back(c.get());
    }
    return out;
  }
};

class XmlReader {
 public:
  // Throws std::runtime_error "offset N: what" when `text` is not well-formed.
  static std::unique_ptr<XmlElement> parse(const std::string& text) {
    XmlReader r(text);
    return r.document();
  }

 private:
  explicit XmlReader(const std::string& t) : t_(t) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("offset " + std::to_string(i_) + ": " + what);
  }
  bool starts(const char* s) const { return t_.compare(i_, std::char_traits<char>::length(s), s) == 0; }
  void skip_space() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
  }
  void skip_misc() {
    for (;;) {
      skip_space();
      if (starts("<!--")) {
        const auto end = t_.find("-->", i_);
        if (end == std::string::npos) fail("unterminated comment");
        i_ = end + 3;
      } else if (starts("<?")) {
        const auto end = t_.find("?>", i_);
        if (end == std::string::npos) fail("unterminated processing instruction");
        i_ = end + 2;
      } else {
        return;
      }
    }
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
  }
  std::string name() {
    const std::size_t s = i_;
    if (i_ >= t_.size() || !(std::isalpha(static_cast<unsigned char>(t_[i_])) || t_[i_] == '_' || t_[i_] == ':')) {
      fail("expected a name");
    }
    while (i_ < t_.size() && name_char(t_[i_])) ++i_;
    return t_.substr(s, i_ - s);
  }
  std::string decode(const std::string& raw) const {
    std::string out;
    for (std::size_t k = 0; k < raw.size(); ++k) {
      if (raw[k] == '<') throw std::runtime_error("'<' in character data or an attribute value");
      if (raw[k] != '&') {
        out += raw[k];
        continue;
      }
      const auto semi = raw.find(';', k);
      if (semi == std::string::npos) throw std::runtime_error("'&' without ';'");
      const std::string ent = raw.substr(k + 1, semi - k - 1);
      if (ent == "amp") out += '&';
      else if (ent == "lt") out += '<';
      else if (ent == "gt") out += '>';
      else if (ent == "quot") out += '"';
      else if (ent == "apos") out += '\'';
      else if (ent.size() > 1 && ent[0] == '#') {
        const long code = ent[1] == 'x' ? std::stol(ent.substr(2), nullptr, 16) : std::stol(ent.substr(1));
        if (code < 0x80) out += static_cast<char>(code);
        else out += '?';
      } else {
        throw std::runtime_error("unknown entity &" + ent + ";");
      }
      k = semi;
    }
    return out;
  }
  std::unique_ptr<XmlElement> element() {
    if (!starts("<")) fail("expected '<'");
    ++i_;
    auto e = std::make_unique<XmlElement>();
    e->name = name();
    for (;;) {
      const std::size_t before = i_;
      skip_space();
      if (starts("/>")) {
        i_ += 2;
        return e;
      }
      if (starts(">")) {
        ++i_;
        break;
      }
      if (i_ == before) fail("expected whitespace before an attribute");
      const std::string a = name();
      skip_space();
      if (!starts("=")) fail("attribute " + a + " has no '='");
      ++i_;
      skip_space();
      if (i_ >= t_.size() || (t_[i_] != '"' && t_[i_] != '\'')) fail("attribute " + a + " is not quoted");
      const char q = t_[i_++];
      const auto end = t_.find(q, i_);
      if (end == std::string::npos) fail("unterminated attribute " + a);
      try {
        if (!e->attributes.emplace(a, decode(t_.substr(i_, end - i_))).second) fail("duplicate attribute " + a);
      } catch (const std::runtime_error& x) {
        fail(std::string("attribute ") + a + ": " + x.what());
      }
      i_ = end + 1;
    }
    // Content.
    for (;;) {
      const auto lt = t_.find('<', i_);
      if (lt == std::string::npos) fail("element <" + e->name + "> is not closed");
      try {
        e->text += decode(t_.substr(i_, lt - i_));
      } catch (const std::runtime_error& x) {
        fail(x.what());
      }
      i_ = lt;
      if (starts("</")) {
        i_ += 2;
        const std::string closing = name();
        if (closing != e->name) fail("</" + closing + "> closes <" + e->name + ">");
        skip_space();
        if (!starts(">")) fail("expected '>'");
        ++i_;
        return e;
      }
      if (starts("<!--") || starts("<?")) {
        skip_misc();
        continue;
      }
      if (starts("<![CDATA[")) {
        const auto end = t_.find("]]>", i_);
        if (end == std::string::npos) fail("unterminated CDATA");
        e->text += t_.substr(i_ + 9, end - i_ - 9);
        i_ = end + 3;
        continue;
      }
      e->children.push_back(element());
    }
  }
  std::unique_ptr<XmlElement> document() {
    if (starts("\xEF\xBB\xBF")) i_ += 3;
    skip_misc();
    auto root = element();
    skip_misc();
    if (i_ != t_.size()) fail("content after the root element");
    return root;
  }

  const std::string& t_;
  std::size_t i_ = 0;
};

}  // namespace capsim_test
