#include "engine/tokenizer/jinja/parser.h"

#include <algorithm>

namespace llmctl::jinja {

namespace {

using Names = std::vector<std::string>;

std::string describe(const Token& t) {
  switch (t.type) {
    case Tok::Data: return "template data";
    case Tok::VarBegin: return "begin of print statement";
    case Tok::VarEnd: return "end of print statement";
    case Tok::BlockBegin: return "begin of statement block";
    case Tok::BlockEnd: return "end of statement block";
    case Tok::String: return "string";
    case Tok::Int: return "integer";
    case Tok::Float: return "float";
    case Tok::Eof: return "end of template";
    default: return t.text;
  }
}

class Parser {
 public:
  Parser(std::vector<Token> toks, int max_depth) : t_(std::move(toks)), max_depth_(max_depth) {}

  Body parse() {
    Body body = subparse({});
    if (cur().type != Tok::Eof) fail("unexpected '" + describe(cur()) + "'");
    return body;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  [[noreturn]] void fail(const std::string& msg) const { syntax_error(cur().line, msg); }

  // Nesting of the tree being built: each recursion and each link of an operator chain
  // (`a + b + c`, `x|f|g`, `a.b.c`) adds a level, released when the construct is done. The
  // parser, the interpreter and the tree's destructor all recurse as deep as this. A bracket
  // costs more: parsing its contents descends through every precedence level, ~2.5 KB of stack
  // (jinja2 itself runs out of Python recursion at 70 nested parentheses).
  static constexpr int kBracketLevels = 3;  // plus the one of parse_unary
  class Nest {
   public:
    explicit Nest(Parser& p, int levels = 0) : p_(p) {
      for (int k = 0; k < levels; ++k) add();
    }
    ~Nest() { p_.depth_ -= n_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
    void add() {
      ++n_;
      if (++p_.depth_ > p_.max_depth_)
        p_.fail("template is nested too deeply (more than " + std::to_string(p_.max_depth_) +
                " levels of blocks, brackets or operator chains, a bracket counting " +
                std::to_string(kBracketLevels + 1) + "; limit max_nesting)");
    }

   private:
    Parser& p_;
    int n_ = 0;
  };

  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "', got '" + describe(cur()) + "'");
    next();
  }
  void expect(Tok type, const char* what) {
    if (cur().type != type) fail(std::string("expected ") + what + ", got '" + describe(cur()) + "'");
    next();
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail("expected name, got '" + describe(cur()) + "'");
    return next().text;
  }
  void end_block() { expect(Tok::BlockEnd, "end of statement block"); }

  ExprPtr node(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // Statements until `{% <one of ends>`; leaves the stream on that name.
  Body subparse(const Names& ends) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Print;
        s->line = t.line;
        s->expr = parse_tuple(true, {});
        expect(Tok::VarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        next();
        if (cur().type == Tok::Name &&
            std::find(ends.begin(), ends.end(), cur().text) != ends.end())
          return body;
        body.push_back(parse_statement(ends));
      } else if (t.type == Tok::Eof) {
        if (!ends.empty()) {
          std::string list;
          for (const auto& e : ends) list += (list.empty() ? "'" : " or '") + e + "'";
          fail("unexpected end of template, expected " + list);
        }
        return body;
      } else {
        fail("unexpected '" + describe(t) + "'");
      }
    }
  }

  // The statement parsers are kept out of line: inlined, their temporaries would all sit in the
  // frame of this function, which nested blocks recurse through (7 KB a level under ASan).
  StmtPtr parse_statement(const Names& ends) {
    Nest nest(*this, 1);
    auto s = std::make_unique<Stmt>();
    s->line = cur().line;
    if (cur().type != Tok::Name) fail("tag name expected");
    std::string tag = next().text;
    if (tag == "for") return parse_for(std::move(s));
    if (tag == "if") return parse_if(std::move(s));
    if (tag == "set") return parse_set(std::move(s));
    if (tag == "macro") return parse_macro(std::move(s));
    if (tag == "with") return parse_with(std::move(s));
    if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue;
      end_block();
      return s;
    }
    if (tag == "generation") {  // transformers' AssistantTracker extension: renders its body
      s->kind = Stmt::Kind::Group;
      end_block();
      s->body = block_body("endgeneration");
      return s;
    }
    std::string msg = "Encountered unknown tag '" + tag + "'.";
    if (!ends.empty()) msg += " Jinja was looking for '" + ends.back() + "'.";
    syntax_error(s->line, msg);
  }

  // Body up to `{% end %}`, consuming the end tag.
  Body block_body(const std::string& end) {
    Body b = subparse({end});
    next();
    end_block();
    return b;
  }

  Target parse_target(bool with_namespace) {
    Target t;
    if (with_namespace && cur().type == Tok::Name && peek().type == Tok::Op && peek().text == ".") {
      t.names.push_back(next().text);
      next();
      t.attr = expect_name();
      return t;
    }
    t.names.push_back(expect_name());
    while (is_op(",")) {
      next();
      t.is_tuple = true;
      if (cur().type != Tok::Name) break;
      t.names.push_back(expect_name());
    }
    return t;
  }

  [[gnu::noinline]] StmtPtr parse_for(StmtPtr s) {
    s->kind = Stmt::Kind::For;
    s->target = parse_target(false);
    if (!is_name("in")) fail("expected 'in'");
    next();
    s->expr = parse_tuple(false, {"recursive"});
    if (is_name("if")) {
      next();
      s->cond = parse_expression(true);
    }
    if (is_name("recursive")) fail("recursive loops are not supported");
    end_block();
    s->body = subparse({"endfor", "else"});
    if (next().text == "else") {
      end_block();
      s->else_body = subparse({"endfor"});
      next();
    }
    end_block();
    return s;
  }

  [[gnu::noinline]] StmtPtr parse_if(StmtPtr s) {
    s->kind = Stmt::Kind::If;
    ExprPtr cond = parse_tuple(false, {});
    while (true) {
      end_block();
      Body body = subparse({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      std::string tag = next().text;
      if (tag == "elif") {
        cond = parse_tuple(false, {});
        continue;
      }
      if (tag == "else") {
        end_block();
        s->else_body = subparse({"endif"});
        next();
      }
      break;
    }
    end_block();
    return s;
  }

  [[gnu::noinline]] StmtPtr parse_set(StmtPtr s) {
    s->target = parse_target(true);
    if (is_op("=")) {
      next();
      s->kind = Stmt::Kind::Set;
      s->expr = parse_tuple(true, {});
      end_block();
      return s;
    }
    if (s->target.is_tuple || !s->target.attr.empty()) fail("expected '='");
    s->kind = Stmt::Kind::SetBlock;
    end_block();
    s->body = block_body("endset");
    return s;
  }

  [[gnu::noinline]] StmtPtr parse_macro(StmtPtr s) {
    s->kind = Stmt::Kind::Macro;
    s->text = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string name = expect_name();
      ExprPtr def;
      if (is_op("=")) {
        next();
        def = parse_expression(true);
      }
      s->params.emplace_back(std::move(name), std::move(def));
    }
    next();
    end_block();
    s->body = block_body("endmacro");
    return s;
  }

  [[gnu::noinline]] StmtPtr parse_with(StmtPtr s) {
    s->kind = Stmt::Kind::With;
    while (cur().type != Tok::BlockEnd) {
      if (!s->params.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      s->params.emplace_back(std::move(name), parse_expression(true));
    }
    end_block();
    s->body = block_body("endwith");
    return s;
  }

  // ---- expressions ----

  bool is_tuple_end(const Names& extra) const {
    if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || (cur().type == Tok::Op && cur().text == ")"))
      return true;
    return cur().type == Tok::Name && std::find(extra.begin(), extra.end(), cur().text) != extra.end();
  }

  ExprPtr parse_tuple(bool with_condexpr, const Names& extra, bool explicit_parens = false) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra)) break;
      items.push_back(parse_expression(with_condexpr));
      if (!is_op(",")) break;
      is_tuple = true;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail("Expected an expression, got '" + describe(cur()) + "'");
    }
    auto e = node(Expr::Kind::Tuple, line);
    e->items = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    Nest nest(*this);
    ExprPtr e = parse_or();
    while (is_name("if")) {
      nest.add();
      int line = next().line;
      auto c = node(Expr::Kind::Cond, line);
      c->b = parse_or();
      if (is_name("else")) {
        next();
        c->c = parse_condexpr();
      }
      c->a = std::move(e);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, int line) {
    auto e = node(Expr::Kind::Binary, line);
    e->name = op;
    e->a = std::move(l);
    e->b = std::move(r);
    return e;
  }

  ExprPtr parse_or() {
    Nest nest(*this);
    ExprPtr e = parse_and();
    while (is_name("or")) {
      nest.add();
      int line = next().line;
      e = binary("or", std::move(e), parse_and(), line);
    }
    return e;
  }

  ExprPtr parse_and() {
    Nest nest(*this);
    ExprPtr e = parse_not();
    while (is_name("and")) {
      nest.add();
      int line = next().line;
      e = binary("and", std::move(e), parse_not(), line);
    }
    return e;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Nest nest(*this, 1);
      auto e = node(Expr::Kind::Unary, next().line);
      e->name = "not";
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    auto e = node(Expr::Kind::Compare, line);
    while (true) {
      if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        e->ops.push_back(next().text);
      } else if (is_name("in")) {
        next();
        e->ops.push_back("in");
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        next();
        next();
        e->ops.push_back("notin");
      } else {
        break;
      }
      e->items.push_back(parse_math1());
    }
    if (e->ops.empty()) return first;
    e->a = std::move(first);
    return e;
  }

  ExprPtr parse_math1() {
    Nest nest(*this);
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      nest.add();
      const Token& t = next();
      e = binary(t.text, std::move(e), parse_concat(), t.line);
    }
    return e;
  }

  ExprPtr parse_concat() {
    Nest nest(*this);
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      nest.add();
      int line = next().line;
      e = binary("~", std::move(e), parse_math2(), line);
    }
    return e;
  }

  ExprPtr parse_math2() {
    Nest nest(*this);
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      nest.add();
      const Token& t = next();
      e = binary(t.text, std::move(e), parse_pow(), t.line);
    }
    return e;
  }

  ExprPtr parse_pow() {
    Nest nest(*this);
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      nest.add();
      int line = next().line;
      e = binary("**", std::move(e), parse_unary(true), line);
    }
    return e;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this, 1);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      e = node(Expr::Kind::Unary, t.line);
      e->name = t.text;
      e->a = parse_unary(false);
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.type == Tok::Name) {
      next();
      auto e = node(Expr::Kind::Const, line);
      if (t.text == "true" || t.text == "True") e->value = Value::boolean(true);
      else if (t.text == "false" || t.text == "False") e->value = Value::boolean(false);
      else if (t.text == "none" || t.text == "None") e->value = Value::none();
      else {
        e->kind = Expr::Kind::Name;
        e->name = t.text;
      }
      return e;
    }
    if (t.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) s += next().text;
      auto e = node(Expr::Kind::Const, line);
      e->value = Value::string(std::move(s));
      return e;
    }
    if (t.type == Tok::Int || t.type == Tok::Float) {
      next();
      auto e = node(Expr::Kind::Const, line);
      e->value = t.type == Tok::Int ? Value::integer(t.ival) : Value::number(t.fval);
      return e;
    }
    if (is_op("(")) {
      Nest nest(*this, kBracketLevels);
      next();
      ExprPtr e = parse_tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[") || is_op("{")) {
      Nest nest(*this, kBracketLevels);
      bool dict = t.text == "{";
      const char* close = dict ? "}" : "]";
      next();
      auto e = node(dict ? Expr::Kind::Dict : Expr::Kind::List, line);
      while (!is_op(close)) {
        if (!e->items.empty()) expect_op(",");
        if (is_op(close)) break;
        e->items.push_back(parse_expression(true));
        if (dict) {
          expect_op(":");
          e->items.push_back(parse_expression(true));
        }
      }
      next();
      return e;
    }
    fail("unexpected '" + describe(t) + "'");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    Nest nest(*this);
    while (true) {
      if (is_op(".") || is_op("[") || is_op("(")) nest.add();
      if (is_op(".")) {
        int line = next().line;
        if (cur().type == Tok::Name) {
          auto g = node(Expr::Kind::Getattr, line);
          g->name = next().text;
          g->a = std::move(e);
          e = std::move(g);
        } else if (cur().type == Tok::Int) {
          auto g = node(Expr::Kind::Getitem, line);
          g->b = node(Expr::Kind::Const, line);
          g->b->value = Value::integer(next().ival);
          g->a = std::move(e);
          e = std::move(g);
        } else {
          fail("expected name or number");
        }
      } else if (is_op("[")) {
        int line = next().line;
        std::vector<ExprPtr> args;
        while (!is_op("]")) {
          if (!args.empty()) expect_op(",");
          args.push_back(parse_subscribed());
        }
        next();
        auto g = node(Expr::Kind::Getitem, line);
        if (args.size() == 1) {
          g->b = std::move(args[0]);
        } else {
          g->b = node(Expr::Kind::Tuple, line);
          g->b->items = std::move(args);
        }
        g->a = std::move(e);
        e = std::move(g);
      } else if (is_op("(")) {
        e = parse_call(std::move(e), Expr::Kind::Call, "");
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    auto sl = node(Expr::Kind::Slice, line);
    if (is_op(":")) {
      next();
      sl->items.push_back(nullptr);
    } else {
      ExprPtr e = parse_expression(true);
      if (!is_op(":")) return e;
      next();
      sl->items.push_back(std::move(e));
    }
    auto open = [&] { return !(is_op("]") || is_op(",") || is_op(":")); };
    sl->items.push_back(open() ? parse_expression(true) : nullptr);
    if (is_op(":")) {
      next();
      sl->items.push_back(open() ? parse_expression(true) : nullptr);
    } else {
      sl->items.push_back(nullptr);
    }
    return sl;
  }

  // `(` args `)` for calls, filters and tests; `target` becomes node->a.
  ExprPtr parse_call(ExprPtr target, Expr::Kind kind, std::string name) {
    auto e = node(kind, cur().line);
    e->name = std::move(name);
    e->a = std::move(target);
    if (!is_op("(")) return e;
    next();
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string k = next().text;
        next();
        e->kwargs.emplace_back(std::move(k), parse_expression(true));
      } else {
        if (!e->kwargs.empty()) fail("positional argument after keyword argument");
        e->items.push_back(parse_expression(true));
      }
    }
    next();
    return e;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".")) {
      next();
      n += '.';  // not `"." + name`: GCC 12 warns falsely (-Wrestrict) on that form
      n += expect_name();
    }
    return n;
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    Nest nest(*this);
    while (true) {
      if (is_op("|") || is_name("is") || is_op("(")) nest.add();
      if (is_op("|")) {
        next();
        std::string name = dotted_name();
        e = parse_call(std::move(e), Expr::Kind::Filter, name);
      } else if (is_name("is")) {
        int line = next().line;
        bool negated = false;
        if (is_name("not")) {
          next();
          negated = true;
        }
        std::string name = dotted_name();
        ExprPtr t;
        if (is_op("(")) {
          t = parse_call(std::move(e), Expr::Kind::Test, name);
        } else {
          t = node(Expr::Kind::Test, line);
          t->name = name;
          t->a = std::move(e);
          // One bare argument: `x is divisibleby 3`, `x is sameas false`.
          bool arg_start = cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                           cur().type == Tok::Float || is_op("[") || is_op("{");
          if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) fail("You cannot chain multiple tests with is");
            t->items.push_back(parse_postfix(parse_primary()));
          }
        }
        if (negated) {
          auto n = node(Expr::Kind::Unary, line);
          n->name = "not";
          n->a = std::move(t);
          t = std::move(n);
        }
        e = std::move(t);
      } else if (is_op("(")) {
        e = parse_call(std::move(e), Expr::Kind::Call, "");
      } else {
        return e;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  const int max_depth_;
};

}  // namespace

std::shared_ptr<const Template> parse_template(std::string_view source, const LexOptions& opt, int max_nesting) {
  auto t = std::make_shared<Template>();
  t->body = Parser(tokenize(source, opt), max_nesting).parse();
  return t;
}

}  // namespace llmctl::jinja
