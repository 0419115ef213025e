/* kgate-device's kernels (device/kernels.cu) as nvcc built them, embedded, and their size; empty
 * where the build had no nvcc (kg_device_fatbin_size 0: the keeper then has no kernels). */
	.section .rodata
	.balign 64
	.globl kg_device_fatbin
	.type kg_device_fatbin, @object
kg_device_fatbin:
#ifdef KG_FATBIN
	.incbin KG_FATBIN
#endif
kg_device_fatbin_end:
	.byte 0
	.balign 8
	.globl kg_device_fatbin_size
	.type kg_device_fatbin_size, @object
kg_device_fatbin_size:
	.quad kg_device_fatbin_end - kg_device_fatbin
	.section .note.GNU-stack,"",@progbits
