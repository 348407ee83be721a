// The built-ins a template can reach: filters and tests (jinja/filters.cpp), attribute and item
// lookup with Python methods of str/dict/list, and the globals (jinja/methods.cpp).
#pragma once
#include <string>

#include "engine/tokenizer/jinja/value.h"

namespace llmctl::jinja {

// `value | name(args)`; throws TemplateError for unknown filters.
Value apply_filter(const std::string& name, const Value& value, Args& args);
// `value is name(args)`.
bool apply_test(const std::string& name, const Value& value, Args& args);

// jinja2's sandboxed getattr (`obj.name`: attribute first, then item) and getitem (`obj[key]`:
// item first, then attribute for string keys). Missing -> Undefined; on Undefined -> error.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// str.replace within RenderLimits::max_output_bytes (checked before the result is built).
// markupsafe's escape: & < > " ' as &amp; &lt; &gt; &#34; &#39;.
std::string escape_html(const std::string& s);
// A string marked safe (jinja2's Markup: what |safe and |e return).
inline Value markup(std::string s) {
  Value v = Value::string(std::move(s));
  v.markup = true;
  return v;
}
std::string checked_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count);

// raise_exception, range, namespace, dict, strftime_now: name -> function, or Undefined.
Value global(const std::string& name);

}  // namespace llmctl::jinja
