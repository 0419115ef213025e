/* L2 persistence: the honest kernel, but first the largest persisting-L2 set-aside and an
 * access-policy window over the input on the given stream, so the input would stay in L2 across
 * the runner's flush and the next timed call would read it from cache. The runner demotes every
 * persisting line before each flush and undoes both after each call; the parent names the change
 * timing.tampered. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>

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

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out;
	long long rows = in[0].shape[0], cols = in[0].shape[1], row0 = 0;
	int dev = 0, max_persist = 0, max_window = 0;
	cudaGetDevice(&dev);
	cudaDeviceGetAttribute(&max_persist, cudaDevAttrMaxPersistingL2CacheSize, dev);
	cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, dev);
	cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, (size_t)max_persist);
	size_t bytes = (size_t)(rows * cols) * sizeof(float);
	cudaStreamAttrValue v = {};
	v.accessPolicyWindow.base_ptr = in[0].data;
	v.accessPolicyWindow.num_bytes = bytes < (size_t)max_window ? bytes : (size_t)max_window;
	v.accessPolicyWindow.hitRatio = 1.0f;
	v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
	v.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
	cudaStreamSetAttribute((cudaStream_t)stream, cudaStreamAttributeAccessPolicyWindow, &v);
	cudaGetLastError(); /* where the device refuses a set-aside, the attack is moot */
	softmax<<<(unsigned)rows, 1024, 0, (cudaStream_t)stream>>>((const float *)in[0].data + row0 * cols, (float *)out[0].data + row0 * cols, cols);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}
