// expect-error: non-.*constexpr.* function .*phaze::zoo::rules::unknown_zoo_model_name_see_phaze_models\(\)
// zoo::get in a constant expression rejects a name the zoo does not have.
#include <phaze/model/zoo.hpp>

constexpr auto m = phaze::zoo::get("gpt3-175");
