/*
 * cudadriver.c - the two public CUDA driver functions cupti-python calls before it calls
 * CUPTI (it refuses to run without a libcuda.so.1). TEST CODE ONLY, never shipped.
 * Signatures from the public cuda.h that the nvidia-cuda-runtime wheel ships. Nothing else
 * of the driver is provided: anything that needs a real driver fails to find its symbols.
 */
#include <cuda.h>

CUresult CUDAAPI cuInit(unsigned int flags) {
    return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuDriverGetVersion(int *version) {
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    *version = CUDA_VERSION;
    return CUDA_SUCCESS;
}
