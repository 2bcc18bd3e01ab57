/* bind.c: binding symbolic dims to sizes before code generation (`--dim N=8`). Kernels
 * bake every size in, so a graph with a batch dim N is compiled for one N at a time. */
#include "codegen/cg-impl.h"

#include <string.h>

int codegen_bind_dims(Graph *g, const char *const *names, const int64_t *sizes, int n,
                      Diag *d) {
  for (int k = 0; k < n; k++) {
    const DimRange *r = graph_range(g, names[k]);
    if (r && !range_has(r, sizes[k])) {
      char buf[256];
      return diag_error(d, r->loc.line ? r->loc : g->loc,
                        "--dim %s=%lld: outside the range of '%s', %s", names[k],
                        (long long)sizes[k], names[k], range_str(r, buf, sizeof buf));
    }
    graph_drop_range(g, names[k]);
    bool used = false;
    for (int i = 0; i < g->ninputs; i++) {
      Shape *s = &g->inputs[i]->type.shape;
      for (int j = 0; j < s->rank; j++)
        if (s->dims[j].sym && !strcmp(s->dims[j].sym, names[k])) {
          s->dims[j] = (Dim){sizes[k], NULL};
          graph_note_bound(g, names[k], sizes[k], i, j);
          used = true;
        }
    }
    if (!used)
      return diag_error(d, g->loc, "--dim %s=%lld: no input of the graph has a dim named '%s'",
                        names[k], (long long)sizes[k], names[k]);
  }
  /* Every node's outputs are inferred again from the bound inputs. */
  for (int i = 0; i < g->nnodes; i++)
    for (int k = 0; k < g->nodes[i]->nout; k++)
      g->nodes[i]->out[k]->type = type_unknown();
  return ir_infer(g, d);
}
