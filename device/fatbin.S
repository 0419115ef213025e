/* kgate-device's kernels (device/kernels.cu) as nvcc built them, embedded; empty where the build
 * had no nvcc (kg_device_fatbin_end == kg_device_fatbin: the keeper then has no kernels). */
	.section .rodata
	.balign 64
	.globl kg_device_fatbin
	.type kg_device_fatbin, @object
kg_device_fatbin:
#ifdef KG_FATBIN
	.incbin KG_FATBIN
#endif
	.globl kg_device_fatbin_end
kg_device_fatbin_end:
	.byte 0
	.section .note.GNU-stack,"",@progbits
