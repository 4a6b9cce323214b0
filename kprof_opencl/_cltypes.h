/* The OpenCL declarations kprof's C parts share (_clhook_src/, _clpreload.c, _clnative_src/).
 *
 * Written by hand, so that kprof builds without the OpenCL SDK: each name and value is the
 * Khronos one (CL/cl_platform.h, CL/cl.h; entry types and slots from CL/cl_icd.h), spelled as
 * there, so that a file that includes those headers too compiles unchanged (tests/
 * test_opencl_hook.py compiles this one after them, where they are installed). Handles are
 * opaque pointers; nothing here is defined, only declared, so any unit may include it.
 */
#ifndef KPROF_CLTYPES_H
#define KPROF_CLTYPES_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define CL_API_CALL __stdcall
#define CL_CALLBACK __stdcall
#else
#define CL_API_CALL
#define CL_CALLBACK
#endif

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef cl_uint cl_bool;
typedef cl_ulong cl_bitfield;
typedef cl_ulong cl_properties;
typedef cl_bitfield cl_command_queue_properties;
typedef cl_properties cl_queue_properties;
typedef cl_properties cl_mem_properties;
typedef cl_bitfield cl_mem_flags;
typedef cl_bitfield cl_svm_mem_flags;
typedef cl_uint cl_image_info;
typedef cl_uint cl_mem_info;
typedef cl_uint cl_kernel_info;
typedef cl_uint cl_event_info;
typedef cl_uint cl_profiling_info;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_mem *cl_mem;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;
/* Only passed through: their layouts are the driver's business. */
typedef struct _cl_image_format cl_image_format;
typedef struct _cl_image_desc cl_image_desc;

#define CL_SUCCESS 0
#define CL_INVALID_CONTEXT -34
#define CL_INVALID_COMMAND_QUEUE -36
#define CL_INVALID_KERNEL -48
#define CL_QUEUE_PROFILING_ENABLE (1 << 1)
#define CL_QUEUE_ON_DEVICE (1 << 2)
#define CL_QUEUE_PROPERTIES 0x1093
#define CL_MEM_SIZE 0x1102
#define CL_IMAGE_ELEMENT_SIZE 0x1111
#define CL_KERNEL_FUNCTION_NAME 0x1190
#define CL_EVENT_COMMAND_EXECUTION_STATUS 0x11D3
#define CL_COMPLETE 0x0
#define CL_RUNNING 0x1
#define CL_PROFILING_COMMAND_START 0x1282
#define CL_PROFILING_COMMAND_END 0x1283

/* Slots of struct _cl_icd_dispatch: the index of each entry kprof calls or hooks. */
enum {
    SLOT_CREATE_COMMAND_QUEUE = 9,
    SLOT_CREATE_BUFFER = 14,
    SLOT_RELEASE_MEM_OBJECT = 18,
    SLOT_GET_MEM_OBJECT_INFO = 20,
    SLOT_GET_IMAGE_INFO = 21,
    SLOT_RELEASE_KERNEL = 37,
    SLOT_GET_KERNEL_INFO = 39,
    SLOT_GET_EVENT_INFO = 42,
    SLOT_RETAIN_EVENT = 43,
    SLOT_RELEASE_EVENT = 44,
    SLOT_GET_EVENT_PROFILING_INFO = 45,
    SLOT_ENQUEUE_READ_BUFFER = 48,
    SLOT_ENQUEUE_WRITE_BUFFER = 49,
    SLOT_ENQUEUE_COPY_BUFFER = 50,
    SLOT_ENQUEUE_READ_IMAGE = 51,
    SLOT_ENQUEUE_WRITE_IMAGE = 52,
    SLOT_ENQUEUE_COPY_IMAGE = 53,
    SLOT_ENQUEUE_COPY_IMAGE_TO_BUFFER = 54,
    SLOT_ENQUEUE_COPY_BUFFER_TO_IMAGE = 55,
    SLOT_ENQUEUE_NDRANGE_KERNEL = 59,
    SLOT_SET_EVENT_CALLBACK = 81,
    SLOT_SET_MEM_OBJECT_DESTRUCTOR_CALLBACK = 83,
    SLOT_ENQUEUE_READ_BUFFER_RECT = 86,
    SLOT_ENQUEUE_WRITE_BUFFER_RECT = 87,
    SLOT_ENQUEUE_COPY_BUFFER_RECT = 88,
    SLOT_CREATE_IMAGE = 96,
    SLOT_ENQUEUE_FILL_BUFFER = 102,
    SLOT_ENQUEUE_FILL_IMAGE = 103,
    SLOT_ENQUEUE_MARKER_WITH_WAIT_LIST = 105,
    SLOT_CREATE_COMMAND_QUEUE_WITH_PROPERTIES = 123,
    SLOT_SVM_ALLOC = 126,
    SLOT_SVM_FREE = 127,
    SLOT_ENQUEUE_SVM_FREE = 128,
    SLOT_ENQUEUE_SVM_MEMCPY = 129,
    SLOT_ENQUEUE_SVM_MEM_FILL = 130,
    SLOT_CREATE_BUFFER_WITH_PROPERTIES = 146,
    SLOT_CREATE_IMAGE_WITH_PROPERTIES = 147,
    N_SLOTS = 148, /* one past the last slot kprof uses */
};

/* The entries' types, in slot order. */
typedef cl_command_queue(CL_API_CALL *cl_api_clCreateCommandQueue)(
    cl_context, cl_device_id, cl_command_queue_properties, cl_int *);
typedef cl_mem(CL_API_CALL *cl_api_clCreateBuffer)(cl_context, cl_mem_flags, size_t, void *,
                                                   cl_int *);
typedef cl_int(CL_API_CALL *cl_api_clReleaseMemObject)(cl_mem);
typedef cl_int(CL_API_CALL *cl_api_clGetMemObjectInfo)(cl_mem, cl_mem_info, size_t, void *,
                                                        size_t *);
typedef cl_int(CL_API_CALL *cl_api_clGetImageInfo)(cl_mem, cl_image_info, size_t, void *,
                                                   size_t *);
typedef cl_int(CL_API_CALL *cl_api_clReleaseKernel)(cl_kernel);
typedef cl_int(CL_API_CALL *cl_api_clGetKernelInfo)(cl_kernel, cl_kernel_info, size_t, void *,
                                                    size_t *);
typedef cl_int(CL_API_CALL *cl_api_clGetEventInfo)(cl_event, cl_event_info, size_t, void *,
                                                   size_t *);
typedef cl_int(CL_API_CALL *cl_api_clRetainEvent)(cl_event);
typedef cl_int(CL_API_CALL *cl_api_clReleaseEvent)(cl_event);
typedef cl_int(CL_API_CALL *cl_api_clGetEventProfilingInfo)(cl_event, cl_profiling_info, size_t,
                                                            void *, size_t *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueReadBuffer)(cl_command_queue, cl_mem, cl_bool,
                                                        size_t, size_t, void *, cl_uint,
                                                        const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueWriteBuffer)(cl_command_queue, cl_mem, cl_bool,
                                                         size_t, size_t, const void *, cl_uint,
                                                         const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueCopyBuffer)(cl_command_queue, cl_mem, cl_mem,
                                                        size_t, size_t, size_t, cl_uint,
                                                        const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueReadImage)(cl_command_queue, cl_mem, cl_bool,
                                                       const size_t *, const size_t *, size_t,
                                                       size_t, void *, cl_uint,
                                                       const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueWriteImage)(cl_command_queue, cl_mem, cl_bool,
                                                        const size_t *, const size_t *, size_t,
                                                        size_t, const void *, cl_uint,
                                                        const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueCopyImage)(cl_command_queue, cl_mem, cl_mem,
                                                       const size_t *, const size_t *,
                                                       const size_t *, cl_uint,
                                                       const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueCopyImageToBuffer)(cl_command_queue, cl_mem, cl_mem,
                                                               const size_t *, const size_t *,
                                                               size_t, cl_uint,
                                                               const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueCopyBufferToImage)(cl_command_queue, cl_mem, cl_mem,
                                                               size_t, const size_t *,
                                                               const size_t *, cl_uint,
                                                               const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueNDRangeKernel)(cl_command_queue, cl_kernel, cl_uint,
                                                           const size_t *, const size_t *,
                                                           const size_t *, cl_uint,
                                                           const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clSetEventCallback)(
    cl_event, cl_int, void(CL_CALLBACK *)(cl_event, cl_int, void *), void *);
typedef cl_int(CL_API_CALL *cl_api_clSetMemObjectDestructorCallback)(
    cl_mem, void(CL_CALLBACK *)(cl_mem, void *), void *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueReadBufferRect)(
    cl_command_queue, cl_mem, cl_bool, const size_t *, const size_t *, const size_t *, size_t,
    size_t, size_t, size_t, void *, cl_uint, const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueWriteBufferRect)(
    cl_command_queue, cl_mem, cl_bool, const size_t *, const size_t *, const size_t *, size_t,
    size_t, size_t, size_t, const void *, cl_uint, const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueCopyBufferRect)(
    cl_command_queue, cl_mem, cl_mem, const size_t *, const size_t *, const size_t *, size_t,
    size_t, size_t, size_t, cl_uint, const cl_event *, cl_event *);
typedef cl_mem(CL_API_CALL *cl_api_clCreateImage)(cl_context, cl_mem_flags,
                                                  const cl_image_format *, const cl_image_desc *,
                                                  void *, cl_int *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueFillBuffer)(cl_command_queue, cl_mem, const void *,
                                                        size_t, size_t, size_t, cl_uint,
                                                        const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueFillImage)(cl_command_queue, cl_mem, const void *,
                                                       const size_t *, const size_t *, cl_uint,
                                                       const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueMarkerWithWaitList)(cl_command_queue, cl_uint,
                                                                const cl_event *, cl_event *);
typedef cl_command_queue(CL_API_CALL *cl_api_clCreateCommandQueueWithProperties)(
    cl_context, cl_device_id, const cl_queue_properties *, cl_int *);
typedef void *(CL_API_CALL *cl_api_clSVMAlloc)(cl_context, cl_svm_mem_flags, size_t,
                                               unsigned int);
typedef void(CL_API_CALL *cl_api_clSVMFree)(cl_context, void *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueSVMFree)(
    cl_command_queue, cl_uint, void **, void(CL_CALLBACK *)(cl_command_queue, cl_uint, void **,
                                                            void *),
    void *, cl_uint, const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueSVMMemcpy)(cl_command_queue, cl_bool, void *,
                                                       const void *, size_t, cl_uint,
                                                       const cl_event *, cl_event *);
typedef cl_int(CL_API_CALL *cl_api_clEnqueueSVMMemFill)(cl_command_queue, void *, const void *,
                                                        size_t, size_t, cl_uint,
                                                        const cl_event *, cl_event *);
typedef cl_mem(CL_API_CALL *cl_api_clCreateBufferWithProperties)(cl_context,
                                                                 const cl_mem_properties *,
                                                                 cl_mem_flags, size_t, void *,
                                                                 cl_int *);
typedef cl_mem(CL_API_CALL *cl_api_clCreateImageWithProperties)(
    cl_context, const cl_mem_properties *, cl_mem_flags, const cl_image_format *,
    const cl_image_desc *, void *, cl_int *);

#endif /* KPROF_CLTYPES_H */
