// Kernels of the list primitives (ops/list_ops.h), shared by every device: the
// moves (make_list, list_getitem, ...) work on Values, and the tensor work of
// list_concat, list_concat_grad and split_to_list goes through the device's own
// expand_dims, concat, split and squeeze kernels, so each formula stays in one
// place.
#ifndef KGRAD_BACKENDS_LIST_KERNELS_H_
#define KGRAD_BACKENDS_LIST_KERNELS_H_

#include "backends/kernel.h"

namespace kgrad {

void RegisterListKernels(KernelTable* table);

}  // namespace kgrad

#endif  // KGRAD_BACKENDS_LIST_KERNELS_H_
