/* frontends.h: the one public header of gpucc's frontends. Each frontend turns a file
 * into an IR graph and knows nothing of passes or codegen. */
#ifndef GPUCC_FRONTENDS_H
#define GPUCC_FRONTENDS_H

#include "ir/ir.h"

/* The text form (the DSL): parses `len` bytes of `text` read from `file` (used in
 * messages and to resolve relative paths in load(...)). The result is verified: names
 * resolved, nodes in topological order, types inferred and checked. NULL with d set on
 * error; the message is "file:line:col: error: ..." with the source line and a caret. */
Graph *dsl_parse(const char *file, const char *text, size_t len, Diag *d);
/* Reads the file ("-" is standard input) and parses it. */
Graph *dsl_parse_file(const char *path, Diag *d);

/* The extension of the text form, used for dumps: "gir". */
#define DSL_EXT "gir"

#endif
