/* placeholder: being written */
#include "ir/ir.h"
int ir_infer_node(const Node *n, Type *out, Diag *d) { (void)out; return diag_error(d, n->loc, "not implemented"); }
int ir_infer(Graph *g, Diag *d) { return diag_error(d, g->loc, "not implemented"); }
