/* placeholder: being written */
#include "frontends/frontends.h"
Graph *dsl_parse(const char *file, const char *text, size_t len, Diag *d) { (void)text; (void)len; diag_error(d, (SrcLoc){file, 0, 0, 0}, "not implemented"); return NULL; }
Graph *dsl_parse_file(const char *path, Diag *d) { diag_error(d, (SrcLoc){path, 0, 0, 0}, "not implemented"); return NULL; }
