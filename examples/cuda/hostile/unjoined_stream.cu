/* An unjoined side stream: the call forks a stream of its own from the given one (an event, so its
 * work starts once the inputs are there), computes the second half of the rows on it after 150 us
 * of other work, and never joins it back. The runner's device-wide synchronisation waits for it.
 * kgate main 9500fee (measured on an H100, tests/gpu/clock36.sh with KGATE_EXPECT_BEFORE=1):
 * check.async_escape already, "the device stayed busy 21.753 ms after the candidate's stream
 * finished (1.196 ms)": the runner's own figure of its device-wide wait, which kgate judged by.
 * That figure is the candidate's process's to forge, so the verdict rested on a claim; it was not
 * the accepted, charged call this example was written to show.
 * The call's end is now the given stream's DONE mark on the device (device/wire.h's gate): the
 * snapshot is taken there, without the side stream's rows, which land after it:
 * check.async_escape from kgate-device's own look too (the outputs changed after the snapshot),
 * which no claim of the runner's enters. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

KG_CANDIDATE;

__device__ static void merge(float &m, float &s, float m2, float s2)
{
	float mm = fmaxf(m, m2);
	s = (m == -INFINITY ? 0.0f : s * __expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mm));
	m = mm;
}

__global__ static void softmax(const float *x, float *y, long long cols)
{
	__shared__ float sm[32], ss[32];
	__shared__ int snan;
	const float *xr = x + blockIdx.x * cols;
	float *yr = y + blockIdx.x * cols;
	float m = -INFINITY, s = 0.0f;
	int nan = 0;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
		float v = xr[c];
		nan |= isnan(v);
		if (v > m) {
			s = (m == -INFINITY ? 0.0f : s * __expf(m - v));
			m = v;
		}
		s += __expf(v - m);
	}
	for (int o = 16; o > 0; o >>= 1)
		merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
	if ((threadIdx.x & 31) == 0) {
		sm[threadIdx.x >> 5] = m;
		ss[threadIdx.x >> 5] = s;
	}
	nan = __syncthreads_or(nan);
	if (threadIdx.x < 32) {
		int nw = blockDim.x >> 5;
		m = threadIdx.x < nw ? sm[threadIdx.x] : -INFINITY;
		s = threadIdx.x < nw ? ss[threadIdx.x] : 0.0f;
		for (int o = 16; o > 0; o >>= 1)
			merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
		if (threadIdx.x == 0) {
			sm[0] = m;
			ss[0] = s;
			snan = nan;
		}
	}
	__syncthreads();
	m = sm[0];
	float inv = 1.0f / ss[0];
	nan = snan;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		yr[c] = nan ? NAN : __expf(xr[c] - m) * inv;
}

__global__ static void spin(unsigned long long ns)
{
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	while (t - t0 < ns);
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1)
		return -22;
	cudaStream_t s = (cudaStream_t)stream;
	static cudaStream_t side;
	static cudaEvent_t fork;
	if (!side && (cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking) ||
		      cudaEventCreateWithFlags(&fork, cudaEventDisableTiming)))
		return -5;
	long long rows = in[0].shape[0], cols = in[0].shape[1], half = rows / 2;
	const float *x = (const float *)in[0].data;
	float *y = (float *)out[0].data;
	if (!rows || !cols)
		return 0;
	if (half)
		softmax<<<(unsigned)half, 1024, 0, s>>>(x, y, cols);
	cudaEventRecord(fork, s); /* the side stream starts where the given one is: after the inputs */
	cudaStreamWaitEvent(side, fork, 0);
	spin<<<1, 1, 0, side>>>(150000ull);
	softmax<<<(unsigned)(rows - half), 1024, 0, side>>>(x + half * cols, y + half * cols, cols);
	return cudaGetLastError() == cudaSuccess ? 0 : -5; /* never joined back */
}
