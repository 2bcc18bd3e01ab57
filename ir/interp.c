/* placeholder: being written */
#include "ir/ir.h"
int ir_eval_node(const Node *n, Tensor *const *in, Tensor **out, Diag *d) { (void)in; (void)out; return diag_error(d, n->loc, "not implemented"); }
int ir_eval(const Graph *g, Tensor *const *inputs, Tensor **outputs, Diag *d) { (void)inputs; (void)outputs; return diag_error(d, g->loc, "not implemented"); }
