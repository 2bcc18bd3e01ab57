/* parser.y: the grammar of the text form (docs/ir.md), a pure bison parser. Actions
 * build the syntax tree of dsl-impl.h and check what is visible locally: op names and
 * arity, dtypes, dims, initializer forms, numbers in expressions. Everything that needs
 * the whole file (names, types, the graph) is dsl.c's job.
 *
 * Words are not reserved ("graph", "const", "return", "zeros", ... are IDENTs whose
 * text the actions check), so the grammar never clashes with an op or symbol name. The
 * stack is capped at YYMAXDEPTH, which turns absurd nesting into an error instead of a
 * crash; LAC makes the "expected ..." lists of syntax errors exact. */
%define api.pure full
%define api.prefix {dsl_yy}
%define api.token.prefix {TK_}
%define parse.error custom
%define parse.lac full
%locations
%lex-param {void *scanner}
%parse-param {void *scanner} {DslCtx *ctx}

%code requires {
#include "dsl-impl.h"

typedef struct DslList {
  void *first, *last;
  int n;
} DslList;
}

%code top {
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
}

%code {
#define YYMAXDEPTH 10000

int dsl_yylex(DSL_YYSTYPE *lval, DSL_YYLTYPE *lloc, void *scanner);
static void dsl_yyerror(DSL_YYLTYPE *loc, void *scanner, DslCtx *ctx, const char *msg);

#define LOC(l) dsl_loc(ctx, (l).first_line, (l).first_column)
#define FAIL(l, ...)                          \
  do {                                        \
    diag_error(ctx->d, LOC(l), __VA_ARGS__);  \
    YYABORT;                                  \
  } while (0)
#define NEW(T) ((T *)arena_alloc(ctx->ast, sizeof(T)))
/* Appends `item` (a struct with a `next` field named NEXT) to list `l`. */
#define APPEND(l, item, T, NEXT)                  \
  do {                                            \
    if ((l).last)                                 \
      ((T *)(l).last)->NEXT = (item);             \
    else                                          \
      (l).first = (item);                         \
    (l).last = (item);                            \
    (l).n++;                                      \
  } while (0)

static DslLit *lit_list(DslCtx *ctx, SrcLoc loc) {
  DslLit *l = arena_alloc(ctx->ast, sizeof *l);
  l->is_list = true;
  l->loc = loc;
  return l;
}

static void add_stmt(DslCtx *ctx, DslStmt *s) {
  if (ctx->stmts_tail)
    ctx->stmts_tail->next = s;
  else
    ctx->stmts = s;
  ctx->stmts_tail = s;
}

static bool word_is(const char *w, const char *k) { return !strcmp(w, k); }

/* Adds lo..hi to the range being read; -1 (the message in ctx->tok_msg) when no range
 * has been started or it has all its segments. */
static int add_segment(DslCtx *ctx, int64_t lo, int64_t hi) {
  DslRange *r = ctx->ranges_tail;
  if (!r) {
    snprintf(ctx->tok_msg, sizeof ctx->tok_msg, "expected a dim's name before its sizes, as in "
             "dims(N = 1..64)");
    return -1;
  }
  if (r->r.nseg == IR_MAX_DIM_SEGMENTS) {
    snprintf(ctx->tok_msg, sizeof ctx->tok_msg, "the range of '%s' has more than %d segments",
             r->r.sym, IR_MAX_DIM_SEGMENTS);
    return -1;
  }
  r->r.lo[r->r.nseg] = lo;
  r->r.hi[r->r.nseg++] = hi;
  return 0;
}
}

%union {
  DslNum num;
  const char *str;
  DslType *type;
  DslDim *dim;
  DslLit *lit;
  DslAttr *attr;
  DslExpr *expr;
  DslResult *res;
  DslInitArg *iarg;
  DslStmt *stmt;
  DslInit *init;
  DslList list;
  int64_t size;
}

%token <str> VALUE "value" STRING "string" IDENT "identifier"
%token <num> INT "integer" FLOAT "number"
%token AT_ORIGIN "'@'"
%token DOTDOT "'..'"
%type <size> range_size

%type <str> gname
%type <num> number
%type <type> type dims
%type <dim> dim
%type <lit> literal lit_items
%type <attr> attr
%type <expr> expr term unary primary call
%type <res> result param
%type <iarg> init_arg
%type <stmt> stmt
%type <init> init
%type <list> results params args args_opt attrs attr_list num_list init_args rets
%type <str> origin

%%

file:
    IDENT { if (!word_is($1, "graph")) FAIL(@1, "expected 'graph' but found '%s'", $1); }
    gname '(' params_opt ')' ranges_opt '{' stmts '}' {
      ctx->gname = $3;
      ctx->gloc = LOC(@1);
      ctx->end_loc = LOC(@10);
    }
  ;

/* ranges_opt = ("dims" "(" range_item ("," range_item)* ")")?
 * range_item = IDENT "=" segment | segment  (a bare segment adds to the range before it)
 * segment    = INT (".." INT)? */
ranges_opt:
    %empty
  | IDENT { if (!word_is($1, "dims")) FAIL(@1, "expected 'dims' or '{' but found '%s'", $1); }
    '(' range_items ')'
  ;

range_items: range_item | range_items ',' range_item ;

range_item:
    IDENT '=' {
      DslRange *r = NEW(DslRange);
      memset(r, 0, sizeof *r);
      r->r.sym = $1;
      r->r.loc = LOC(@1);
      if (ctx->ranges_tail)
        ctx->ranges_tail->next = r;
      else
        ctx->ranges = r;
      ctx->ranges_tail = r;
    } segment
  | segment
  ;

segment:
    range_size { if (add_segment(ctx, $1, $1)) FAIL(@1, "%s", ctx->tok_msg); }
  | range_size DOTDOT range_size { if (add_segment(ctx, $1, $3)) FAIL(@1, "%s", ctx->tok_msg); }
  ;

range_size:
    INT {
      if ($1.mag > (uint64_t)IR_MAX_DIM_RANGE)
        FAIL(@1, "size %" PRIu64 " is larger than 2^31", $1.mag);
      $$ = (int64_t)$1.mag;
    }
  ;

gname: IDENT | STRING ;

params_opt: %empty | params ;

params:
    param { $$ = (DslList){0}; APPEND($$, $1, DslResult, next); ctx->params = $1; }
  | params ',' param { $$ = $1; APPEND($$, $3, DslResult, next); }
  ;

param: VALUE ':' type {
      $$ = NEW(DslResult);
      $$->name = $1;
      $$->loc = LOC(@1);
      $$->has_type = true;
      $$->type = *$3;
    }
  ;

/* type = DTYPE "[" (dim ("," dim)*)? "]" */
type:
    IDENT '[' ']' {
      $$ = NEW(DslType);
      if (dsl_make_type(ctx, $1, LOC(@1), $$)) YYABORT;
    }
  | IDENT '[' dims ']' {
      $$ = $3;
      if (dsl_make_type(ctx, $1, LOC(@1), $$)) YYABORT;
    }
  ;

dims:
    dim { $$ = NEW(DslType); if (dsl_add_dim(ctx, $$, $1)) YYABORT; }
  | dims ',' dim { $$ = $1; if (dsl_add_dim(ctx, $$, $3)) YYABORT; }
  ;

dim:
    INT { $$ = NEW(DslDim); $$->num = $1; $$->loc = LOC(@1); }
  | '-' INT { $$ = NEW(DslDim); $$->num = $2; $$->num.neg = true; $$->loc = LOC(@1); }
  | IDENT { $$ = NEW(DslDim); $$->sym = $1; $$->loc = LOC(@1); }
  | STRING { $$ = NEW(DslDim); $$->sym = $1; $$->loc = LOC(@1); }
  ;

stmts: %empty | stmts stmt ;

/* stmt = VALUE (":" type)? "=" "const" type init
 *      | result ("," result)* "=" expr
 *      | "return" VALUE ("," VALUE)* */
stmt:
    results '=' expr {
      $$ = NEW(DslStmt);
      $$->kind = DS_NODE;
      $$->loc = LOC(@1);
      $$->results = $1.first;
      $$->nresults = $1.n;
      $$->root = $3;
      $$->first = ctx->stmt_mark ? ctx->stmt_mark->created : ctx->exprs;
      ctx->stmt_mark = ctx->exprs_tail;
      add_stmt(ctx, $$);
    }
  | results '=' IDENT type init {
      if (!word_is($3, "const"))
        FAIL(@3, "expected an op call or 'const' but found '%s'", $3);
      if ($1.n != 1)
        FAIL(@1, "a constant has exactly one result");
      $$ = NEW(DslStmt);
      $$->kind = DS_CONST;
      $$->loc = LOC(@1);
      $$->results = $1.first;
      $$->nresults = 1;
      $$->ctype = *$4;
      $$->init = *$5;
      add_stmt(ctx, $$);
    }
  | IDENT {
      if (!word_is($1, "return"))
        FAIL(@1, "unexpected '%s': a statement starts with a value or 'return'", $1);
    }
    rets {
      $$ = NEW(DslStmt);
      $$->kind = DS_RETURN;
      $$->loc = LOC(@1);
      $$->rets = $3.first;
      add_stmt(ctx, $$);
    }
  ;

results:
    result { $$ = (DslList){0}; APPEND($$, $1, DslResult, next); }
  | results ',' result { $$ = $1; APPEND($$, $3, DslResult, next); }
  ;

result:
    VALUE { $$ = NEW(DslResult); $$->name = $1; $$->loc = LOC(@1); }
  | VALUE ':' type {
      $$ = NEW(DslResult);
      $$->name = $1;
      $$->loc = LOC(@1);
      $$->has_type = true;
      $$->type = *$3;
    }
  ;

rets:
    VALUE {
      DslRef *r = NEW(DslRef);
      r->name = $1;
      r->loc = LOC(@1);
      $$ = (DslList){0};
      APPEND($$, r, DslRef, next);
    }
  | rets ',' VALUE {
      DslRef *r = NEW(DslRef);
      r->name = $3;
      r->loc = LOC(@3);
      $$ = $1;
      APPEND($$, r, DslRef, next);
    }
  ;

/* init = "zeros" | "ones" | "full" "(" number ")" | "random" "(" ... ")"
 *      | "load" "(" STRING ("," STRING)? ")" | literal */
init:
    IDENT {
      DslInit *in = NEW(DslInit);
      if (dsl_make_init(ctx, $1, LOC(@1), NULL, false, in)) YYABORT;
      $$ = in;
    }
  | IDENT '(' ')' {
      DslInit *in = NEW(DslInit);
      if (dsl_make_init(ctx, $1, LOC(@1), NULL, true, in)) YYABORT;
      $$ = in;
    }
  | IDENT '(' init_args ')' {
      DslInit *in = NEW(DslInit);
      if (dsl_make_init(ctx, $1, LOC(@1), $3.first, true, in)) YYABORT;
      $$ = in;
    }
  | literal {
      DslInit *in = NEW(DslInit);
      in->kind = CI_DATA;
      in->loc = LOC(@1);
      in->lit = $1;
      $$ = in;
    }
  ;

init_args:
    init_arg { $$ = (DslList){0}; APPEND($$, $1, DslInitArg, next); }
  | init_args ',' init_arg { $$ = $1; APPEND($$, $3, DslInitArg, next); }
  ;

init_arg:
    number { $$ = NEW(DslInitArg); $$->num = $1; $$->loc = LOC(@1); }
  | STRING { $$ = NEW(DslInitArg); $$->is_string = true; $$->str = $1; $$->loc = LOC(@1); }
  | IDENT '=' number { $$ = NEW(DslInitArg); $$->name = $1; $$->num = $3; $$->loc = LOC(@1); }
  ;

/* literal = number | "[" literal ("," literal)* "]"; "[]" too, for empty dims */
literal:
    number {
      $$ = NEW(DslLit);
      $$->num = $1;
      $$->count = 1;
      $$->loc = LOC(@1);
    }
  | '[' ']' { $$ = lit_list(ctx, LOC(@1)); }
  | '[' lit_items ']' { $$ = $2; $$->loc = LOC(@1); }
  ;

lit_items:
    literal {
      $$ = lit_list(ctx, LOC(@1));
      $$->first = $$->last = $1;
      $$->n = 1;
      $$->count = $1->count;
    }
  | lit_items ',' literal {
      $$ = $1;
      $$->last->next = $3;
      $$->last = $3;
      $$->n++;
      $$->count += $3->count;
    }
  ;

/* number = "-"? (INT | FLOAT | "inf" | "nan") */
number:
    INT
  | FLOAT
  | '-' INT { $$ = $2; $$.neg = true; $$.f = -$$.f; $$.loc = LOC(@1); }
  | '-' FLOAT { $$ = $2; $$.neg = true; $$.f = -$$.f; $$.loc = LOC(@1); }
  ;

/* expr = term (("+" | "-") term)* */
expr:
    term
  | expr '+' term {
      $$ = dsl_new_expr(ctx, DE_OP, LOC(@2));
      $$->op = OP_ADD;
      $$->args = arena_alloc(ctx->ast, 2 * sizeof(DslExpr *));
      $$->args[0] = $1;
      $$->args[1] = $3;
      $$->nargs = 2;
    }
  | expr '-' term {
      $$ = dsl_new_expr(ctx, DE_OP, LOC(@2));
      $$->op = OP_SUB;
      $$->args = arena_alloc(ctx->ast, 2 * sizeof(DslExpr *));
      $$->args[0] = $1;
      $$->args[1] = $3;
      $$->nargs = 2;
    }
  ;

/* term = unary (("*" | "/" | "@") unary)* */
term:
    unary
  | term '*' unary {
      $$ = dsl_new_expr(ctx, DE_OP, LOC(@2));
      $$->op = OP_MUL;
      $$->args = arena_alloc(ctx->ast, 2 * sizeof(DslExpr *));
      $$->args[0] = $1;
      $$->args[1] = $3;
      $$->nargs = 2;
    }
  | term '/' unary {
      $$ = dsl_new_expr(ctx, DE_OP, LOC(@2));
      $$->op = OP_DIV;
      $$->args = arena_alloc(ctx->ast, 2 * sizeof(DslExpr *));
      $$->args[0] = $1;
      $$->args[1] = $3;
      $$->nargs = 2;
    }
  | term '@' unary {
      $$ = dsl_new_expr(ctx, DE_OP, LOC(@2));
      $$->op = OP_MATMUL;
      $$->args = arena_alloc(ctx->ast, 2 * sizeof(DslExpr *));
      $$->args[0] = $1;
      $$->args[1] = $3;
      $$->nargs = 2;
    }
  ;

/* unary = "-" unary | primary */
unary:
    primary
  | '-' unary {
      $$ = dsl_new_expr(ctx, DE_OP, LOC(@1));
      $$->op = OP_NEG;
      $$->args = arena_alloc(ctx->ast, sizeof(DslExpr *));
      $$->args[0] = $2;
      $$->nargs = 1;
    }
  ;

/* primary = VALUE | call | "(" expr ")" */
primary:
    VALUE { $$ = dsl_new_expr(ctx, DE_VALUE, LOC(@1)); $$->name = $1; }
  | call
  | '(' expr ')' { $$ = $2; }
  | INT { FAIL(@1, "a number in an expression must be declared as a const"); }
  | FLOAT { FAIL(@1, "a number in an expression must be declared as a const"); }
  ;

/* call = OPNAME "(" (expr ("," expr)*)? ")" ("{" attr ("," attr)* "}")? ("@" STRING)? */
call:
    IDENT '(' args_opt ')' attrs origin {
      Op op;
      if (op_from_name($1, &op))
        FAIL(@1, "unknown op '%s'", $1);
      const OpInfo *oi = &op_info[op];
      int n = $3.n;
      if (n < oi->min_in || (oi->max_in >= 0 && n > oi->max_in)) {
        if (oi->min_in == oi->max_in)
          FAIL(@1, "op '%s' takes %d input%s, got %d", oi->name, oi->min_in,
               oi->min_in == 1 ? "" : "s", n);
        else if (oi->max_in < 0)
          FAIL(@1, "op '%s' takes at least %d input%s, got %d", oi->name, oi->min_in,
               oi->min_in == 1 ? "" : "s", n);
        else
          FAIL(@1, "op '%s' takes %d to %d inputs, got %d", oi->name, oi->min_in,
               oi->max_in, n);
      }
      $$ = dsl_new_expr(ctx, DE_OP, LOC(@1));
      $$->op = op;
      $$->nargs = n;
      $$->args = arena_alloc(ctx->ast, sizeof(DslExpr *) * (size_t)(n ? n : 1));
      int i = 0;
      for (DslExpr *a = $3.first; a; a = a->next_arg)
        $$->args[i++] = a;
      $$->attrs = $5.first;
      $$->nattrs = $5.n;
      $$->origin = $6;
    }
  ;

args_opt: %empty { $$ = (DslList){0}; } | args ;

args:
    expr { $$ = (DslList){0}; APPEND($$, $1, DslExpr, next_arg); }
  | args ',' expr { $$ = $1; APPEND($$, $3, DslExpr, next_arg); }
  ;

attrs:
    %empty { $$ = (DslList){0}; }
  | '{' '}' { $$ = (DslList){0}; }
  | '{' attr_list '}' { $$ = $2; }
  ;

attr_list:
    attr { $$ = (DslList){0}; APPEND($$, $1, DslAttr, next); }
  | attr_list ',' attr { $$ = $1; APPEND($$, $3, DslAttr, next); }
  ;

/* attr = IDENT "=" (INT | FLOAT | STRING | "[" (number ("," number)*)? "]" | type literal) */
attr:
    IDENT '=' number {
      $$ = NEW(DslAttr); $$->name = $1; $$->loc = LOC(@1);
      $$->kind = DA_NUM; $$->num = $3;
    }
  | IDENT '=' STRING {
      $$ = NEW(DslAttr); $$->name = $1; $$->loc = LOC(@1);
      $$->kind = DA_STRING; $$->str = $3;
    }
  | IDENT '=' '[' ']' {
      $$ = NEW(DslAttr); $$->name = $1; $$->loc = LOC(@1);
      $$->kind = DA_LIST;
    }
  | IDENT '=' '[' num_list ']' {
      $$ = NEW(DslAttr); $$->name = $1; $$->loc = LOC(@1);
      $$->kind = DA_LIST; $$->list = $4.first; $$->nlist = $4.n;
    }
  | IDENT '=' type literal {
      $$ = NEW(DslAttr); $$->name = $1; $$->loc = LOC(@1);
      $$->kind = DA_TENSOR; $$->type = *$3; $$->lit = $4;
    }
  ;

num_list:
    number {
      DslNumList *l = NEW(DslNumList);
      l->num = $1;
      $$ = (DslList){0};
      APPEND($$, l, DslNumList, next);
    }
  | num_list ',' number {
      DslNumList *l = NEW(DslNumList);
      l->num = $3;
      $$ = $1;
      APPEND($$, l, DslNumList, next);
    }
  ;

origin: %empty { $$ = NULL; } | AT_ORIGIN STRING { $$ = $2; } ;

%%

/* How a token kind reads in "expected ..." messages. */
static const char *symbol_desc(yysymbol_kind_t k) {
  switch (k) {
  case YYSYMBOL_YYEOF: return "end of file";
  case YYSYMBOL_VALUE: return "a value";
  case YYSYMBOL_STRING: return "a string";
  case YYSYMBOL_IDENT: return "a name";
  case YYSYMBOL_INT: return "an integer";
  case YYSYMBOL_FLOAT: return "a number";
  default: return yysymbol_name(k);
  }
}

static int yyreport_syntax_error(const yypcontext_t *yyctx, void *scanner, DslCtx *ctx) {
  (void)scanner;
  const DSL_YYLTYPE *l = yypcontext_location(yyctx);
  SrcLoc loc = dsl_loc(ctx, l->first_line, l->first_column);
  char found[64];
  if (yypcontext_token(yyctx) == YYSYMBOL_YYEOF)
    snprintf(found, sizeof found, "end of file");
  else
    snprintf(found, sizeof found, "'%s'", ctx->tok);
  yysymbol_kind_t exp[YYNTOKENS];
  int n = yypcontext_expected_tokens(yyctx, exp, YYNTOKENS);
  if (n < 0) {
    diag_error(ctx->d, loc, "expression nested too deeply");
    return 0;
  }
  /* After a complete operand almost anything may continue the expression; what the
   * reader is missing is the closing token, so leave out the ways to go on. */
  if (n > 3) {
    int k = 0;
    for (int i = 0; i < n; i++) {
      yysymbol_kind_t e = exp[i];
      const char *name = yysymbol_name(e);
      bool goes_on = e == YYSYMBOL_AT_ORIGIN || (strlen(name) == 3 && strchr("+-*/@{", name[1]));
      if (!goes_on)
        exp[k++] = e;
    }
    n = k;
  }
  if (n == 0 || n > 3) {
    diag_error(ctx->d, loc, "unexpected %s", found);
    return 0;
  }
  char want[160] = "";
  for (int i = 0; i < n; i++) {
    size_t at = strlen(want);
    snprintf(want + at, sizeof want - at, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ",
             symbol_desc(exp[i]));
  }
  diag_error(ctx->d, loc, "expected %s but found %s", want, found);
  return 0;
}

static void dsl_yyerror(DSL_YYLTYPE *loc, void *scanner, DslCtx *ctx, const char *msg) {
  (void)scanner;
  SrcLoc at = dsl_loc(ctx, loc->first_line, loc->first_column);
  if (strstr(msg, "exhausted"))
    diag_error(ctx->d, at, "expression nested too deeply");
  else
    diag_error(ctx->d, at, "%s", msg);
}
