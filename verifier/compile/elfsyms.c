/* ELF64 import listing. Every offset read from the file is checked against the file size before
 * use: the file is produced from untrusted source, so it is treated as untrusted too. */
#include "verifier/compile/elfsyms.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define KG_ELF_MAX (512u << 20)

static int in_file(size_t size, uint64_t off, uint64_t len)
{
	return off <= size && len <= size - off;
}

static const char *str_at(const char *file, size_t size, const Elf64_Shdr *strtab, uint64_t idx)
{
	if (idx >= strtab->sh_size || !in_file(size, strtab->sh_offset, strtab->sh_size))
		return NULL;
	const char *s = file + strtab->sh_offset + idx;
	size_t max = strtab->sh_size - idx;
	return memchr(s, '\0', max) ? s : NULL;
}

int kg_elf_imports(const char *path, kg_buf *syms, kg_buf *needed, kg_error *e)
{
	char *file = NULL;
	size_t size = 0;
	int rc = kg_read_file(path, KG_ELF_MAX, &file, &size, e);
	if (rc)
		return rc;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)file;
	if (size < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_ident[EI_DATA] != ELFDATA2LSB || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_file(size, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr))) {
		rc = kg_err(e, -EINVAL, "%s: not a 64-bit little-endian ELF file", path);
		goto out;
	}
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(file + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM && sh[i].sh_type != SHT_DYNAMIC)
			continue;
		if (sh[i].sh_link >= eh->e_shnum || !in_file(size, sh[i].sh_offset, sh[i].sh_size)) {
			rc = kg_err(e, -EINVAL, "%s: malformed section %u", path, i);
			goto out;
		}
		const Elf64_Shdr *strtab = &sh[sh[i].sh_link];
		if (sh[i].sh_type == SHT_DYNSYM) {
			const Elf64_Sym *sym = (const Elf64_Sym *)(file + sh[i].sh_offset);
			size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
			for (size_t j = 1; j < n; j++) {
				if (sym[j].st_shndx != SHN_UNDEF || !sym[j].st_name)
					continue;
				const char *name = str_at(file, size, strtab, sym[j].st_name);
				if (!name) {
					rc = kg_err(e, -EINVAL, "%s: symbol name out of bounds", path);
					goto out;
				}
				if ((rc = kg_buf_append(syms, name, strlen(name) + 1)))
					goto oom;
			}
		} else {
			const Elf64_Dyn *d = (const Elf64_Dyn *)(file + sh[i].sh_offset);
			size_t n = sh[i].sh_size / sizeof(Elf64_Dyn);
			for (size_t j = 0; j < n && d[j].d_tag != DT_NULL; j++) {
				if (d[j].d_tag != DT_NEEDED)
					continue;
				const char *name = str_at(file, size, strtab, d[j].d_un.d_val);
				if (!name) {
					rc = kg_err(e, -EINVAL, "%s: DT_NEEDED name out of bounds", path);
					goto out;
				}
				if ((rc = kg_buf_append(needed, name, strlen(name) + 1)))
					goto oom;
			}
		}
	}
	if ((rc = kg_buf_append(syms, "", 1)) || (rc = kg_buf_append(needed, "", 1)))
		goto oom;
	goto out;
oom:
	rc = kg_err(e, -ENOMEM, "out of memory listing imports");
out:
	free(file);
	return rc;
}
