/* placeholder: being written */
#include "passes/passes.h"
