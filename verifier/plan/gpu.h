/* What the parent knows about the GPU without creating a context: whether libcuda loads, how
 * many devices there are, and the first one's name and architecture. libcuda is dlopen'ed so
 * kgate runs where no driver is installed. */
#ifndef KG_GPU_H
#define KG_GPU_H

struct kg_gpu_info {
	int present;
	char why[256]; /* when not present */
	char name[128];
	int cc_major, cc_minor;
	char arch[16]; /* "90a" for sm_90a (Hopper), "80" ... */
	int sm_count;
	long long mem_bytes;
	double copy_gbps; /* measured by the trusted runner, 0 until then */
};

/* Fills *g; never fails (present = 0 with why). KGATE_NO_GPU=1 forces "no GPU". */
void kg_gpu_probe(struct kg_gpu_info *g);

#endif
