/* BCRF's sweep (implementations/_sweep.c) as an XLA FFI handler for JAX on the CPU.

   Operands: the arc blocks K (B, N - 1, T, T), read in place parity by parity (the even blocks
   from K, the odd from K + T², both 2 T² apart: XLA need not copy each parity out), the lengths
   (B,) int32, then the state: the linear scalings lin0 (B, 2, P0, T) and lin1 (B, 2, P1, T), their
   log shifts shift0 (B, 2, P0) and shift1 (B, 2, P1), and least (B). Results: the state after
   `count` iterations, each projecting the inner nodes of parity `first` first. The state's
   operands are aliased to the results (jax_backend/_sweep.py), so the sweep runs in place; where
   XLA gave a result its own buffer, the operand is copied there first.

   The sequences are shared among XLA's intra-op threads (one thread: the caller alone), each
   taking the next one not yet taken. The caller takes its part too and waits only for the
   sequences others have taken, so that a pool with no free thread cannot stall it; a task that
   starts after the call has returned finds nothing to take. */
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

extern "C" {
int ibp_sweep_f32(int64_t, int64_t, int, const int64_t *, int, int, int, const float *, int64_t, int64_t,
                  const float *, int64_t, int64_t, float *, int64_t, float *, float *, int64_t, float *, float *);
int ibp_sweep_f64(int64_t, int64_t, int, const int64_t *, int, int, int, const double *, int64_t, int64_t,
                  const double *, int64_t, int64_t, double *, int64_t, double *, double *, int64_t, double *,
                  double *);
}

namespace {

template <typename R>
constexpr auto sweep_of() {
    if constexpr (std::is_same_v<R, float>)
        return ibp_sweep_f32;
    else
        return ibp_sweep_f64;
}

/* The sequences of one call, taken one at a time by whoever runs `take`. */
struct Work {
    explicit Work(int64_t count) : count(count) {}
    const int64_t count;
    std::atomic<int64_t> next{0}, finished{0};
    std::atomic<bool> failed{false};
    std::mutex mutex;
    std::condition_variable all_done;
};

template <ffi::DataType D>
ffi::Error Sweep(ffi::ThreadPool pool, ffi::Buffer<D> arcs, ffi::Buffer<ffi::S32> lengths,
                 ffi::Buffer<D> lin0, ffi::Buffer<D> lin1, ffi::Buffer<D> shift0, ffi::Buffer<D> shift1,
                 ffi::Buffer<D> least, ffi::Result<ffi::Buffer<D>> new_lin0, ffi::Result<ffi::Buffer<D>> new_lin1,
                 ffi::Result<ffi::Buffer<D>> new_shift0, ffi::Result<ffi::Buffer<D>> new_shift1,
                 ffi::Result<ffi::Buffer<D>> new_least, int64_t first, int64_t count, int64_t depth) {
    using R = ffi::NativeType<D>;
    const auto blocks = arcs.dimensions(), rows0 = lin0.dimensions();
    if (blocks.size() != 4 || rows0.size() != 4 || lin1.dimensions().size() != 4)
        return ffi::Error::InvalidArgument("bcrf sweep: arc blocks and scalings must have 4 dimensions");
    const int64_t batch = rows0[0], tags = rows0[3], block = tags * tags;
    if (blocks[0] != batch || blocks[2] != tags || blocks[3] != tags ||
        lengths.element_count() != static_cast<size_t>(batch))
        return ffi::Error::InvalidArgument("bcrf sweep: operands of inconsistent shapes");
    const ffi::Buffer<D> *state[] = {&lin0, &lin1, &shift0, &shift1, &least};
    R *out[] = {new_lin0->typed_data(), new_lin1->typed_data(), new_shift0->typed_data(),
                new_shift1->typed_data(), new_least->typed_data()};
    for (int k = 0; k < 5; k++)
        if (out[k] != state[k]->typed_data()) std::memcpy(out[k], state[k]->typed_data(), state[k]->size_bytes());
    std::vector<int64_t> length(lengths.typed_data(), lengths.typed_data() + batch);
    const R *K = arcs.typed_data();  // the odd blocks at K + block: never read where there are none
    const int64_t rows1 = lin1.dimensions()[2];
    auto run = [=, &length](int64_t b) {
        return sweep_of<R>()(b, b + 1, static_cast<int>(tags), length.data(), static_cast<int>(first),
                         static_cast<int>(count), static_cast<int>(depth), K, blocks[1] * block, 2 * block,
                         K + block, blocks[1] * block, 2 * block, out[0], rows0[2], out[2], out[1],
                         rows1, out[3], out[4]);
    };
    auto work = std::make_shared<Work>(batch);
    auto take = [work, run]() {
        for (int64_t b; (b = work->next++) < work->count;) {
            if (run(b)) work->failed = true;
            if (++work->finished == work->count) {
                std::lock_guard<std::mutex> lock(work->mutex);
                work->all_done.notify_all();
            }
        }
    };
    const int64_t helpers = std::min<int64_t>(pool.num_threads(), batch) - 1;
    for (int64_t k = 0; k < helpers; k++) pool.Schedule([work, take]() { take(); });
    take();
    std::unique_lock<std::mutex> lock(work->mutex);
    work->all_done.wait(lock, [&] { return work->finished == work->count; });
    return work->failed ? ffi::Error::Internal("bcrf sweep: no work space") : ffi::Error::Success();
}

}  // namespace

#define BIND(D)                                                                                          \
    ffi::Ffi::Bind()                                                                                     \
        .Ctx<ffi::ThreadPool>()                                                                          \
        .Arg<ffi::Buffer<D>>()                                                                           \
        .Arg<ffi::Buffer<ffi::S32>>()                                                                    \
        .Arg<ffi::Buffer<D>>()                                                                           \
        .Arg<ffi::Buffer<D>>()                                                                           \
        .Arg<ffi::Buffer<D>>()                                                                           \
        .Arg<ffi::Buffer<D>>()                                                                           \
        .Arg<ffi::Buffer<D>>()                                                                           \
        .Ret<ffi::Buffer<D>>()                                                                           \
        .Ret<ffi::Buffer<D>>()                                                                           \
        .Ret<ffi::Buffer<D>>()                                                                           \
        .Ret<ffi::Buffer<D>>()                                                                           \
        .Ret<ffi::Buffer<D>>()                                                                           \
        .Attr<int64_t>("first")                                                                          \
        .Attr<int64_t>("count")                                                                          \
        .Attr<int64_t>("depth")

XLA_FFI_DEFINE_HANDLER_SYMBOL(IbpSweepF32, Sweep<ffi::F32>, BIND(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(IbpSweepF64, Sweep<ffi::F64>, BIND(ffi::F64));
