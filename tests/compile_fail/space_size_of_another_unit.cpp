// expect-error: static assertion failed: phaze::dsl: this option takes a quantity of another unit
// The global buffer is a size in bytes, not a time.
#include <phaze/hw/space.hpp>

using namespace phaze::literals;
namespace dsl = phaze::dsl;

constexpr auto space =
    dsl::accelerator_space(dsl::tensor_cores = dsl::pow2(2, 16), dsl::global_buffer = 2_ms);
