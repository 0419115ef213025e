/* Reads what a candidate .so imports: its undefined dynamic symbols and DT_NEEDED libraries, for
 * the static check against the policy's allowlist. A bounds-checked ELF64 reader, no libelf. */
#ifndef KG_ELFSYMS_H
#define KG_ELFSYMS_H

#include "kg_common.h"

/* syms and needed receive NUL-separated names (each buffer ends with an extra NUL). */
int kg_elf_imports(const char *path, kg_buf *syms, kg_buf *needed, kg_error *e);

#endif
