/* placeholder: being written */
#include "ir/ir.h"
int ir_verify(const Graph *g, Diag *d) { return diag_error(d, g->loc, "not implemented"); }
int ir_check_attrs(const Node *n, Diag *d) { return diag_error(d, n->loc, "not implemented"); }
int ir_toposort(Graph *g, Diag *d) { return diag_error(d, g->loc, "not implemented"); }
