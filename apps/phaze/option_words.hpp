/// @file
/// The library's error messages name what they concern by its C++ name in backquotes (`global_batch`,
/// `virtual_stages`, `placement`): a C++ user set those fields. On the command line they were set by options,
/// so the program says the option instead (--global-batch, --vp, --placer) before it prints a message.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>

namespace phaze::cli {

/// Each name the library's messages put in backquotes, with the option that sets it. A name not listed stays
/// as the library wrote it.
inline constexpr auto option_of_name = std::to_array<std::pair<std::string_view, std::string_view>>({
    {"global_batch", "--global-batch"},
    {"microbatch", "--microbatch"},
    {"sequence", "--seq"},
    {"vocab", "--vocab"},
    {"devices", "--devices"},
    {"tp", "--tp"},
    {"pp", "--pp"},
    {"dp", "--dp"},
    {"cp", "--cp"},
    {"ep", "--ep"},
    {"etp", "--etp"},
    {"virtual_stages", "--vp"},
    {"schedule", "--schedule"},
    {"stage_blocks", "--stage-blocks"},
    {"rank_method::anneal", "--ranks anneal"},
    {"placement", "--placer"},
    {"placer", "--placer"},
    {"tensor_parallel", "--tp"},
    {"microbatches", "--microbatch"},
    {"precision", "--precision"},
    {"optimizer_dtype", "--optimizer-dtype"},
    {"recompute", "--recompute"},
    {"recompute_layers", "--recompute-layers"},
    {"recompute_by", "--recompute-method"},
    {"recompute_modules", "--recompute-modules"},
    {"sequence_parallel", "--sequence-parallel"},
    {"distributed_optimizer", "--distributed-optimizer"},
    {"shard_gradients", "--shard-gradients"},
    {"fsdp", "--fsdp"},
    {"fsdp_shard", "--fsdp-shard"},
    {"fsdp_reshard_after_forward", "--fsdp-reshard-after-forward"},
    {"fp8_param_gather", "--fp8-param-gather"},
    {"grad_reduce_in_bf16", "--grad-reduce-in-bf16"},
    {"foreach_optimizer", "--optimizer-kernels foreach"},
    {"bf16_blocks", "--bf16-blocks"},
    {"embedding_in_pipeline_split", "--account-for-embedding-in-pipeline-split"},
    {"loss_in_pipeline_split", "--account-for-loss-in-pipeline-split"},
    {"dispatcher", "--moe-dispatcher"},
    {"capacity_factor", "--capacity-factor"},
    {"mtp_layers", "--mtp-layers"},
    {"vocab_padding", "--vocab-padding"},
    {"memory_headroom", "--memory-headroom"},
    {"host_overhead", "--host-overhead"},
    {"fused_attention", "--attention fused"},
    {"overlap", "--overlap"},
    {"overlap_grad_reduce", "grad in --overlap"},
    {"overlap_param_gather", "param in --overlap"},
    {"tp_comm_overlap", "tp in --overlap"},
    {"overlap_p2p", "pp in --overlap"},
    {"overlap_expert_comm", "ep in --overlap"},
});

/// `message` with every backquoted name of option_of_name replaced by its option.
inline std::string in_option_words(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  std::size_t at = 0;
  while (at < message.size()) {
    const std::size_t open = message.find('`', at);
    const std::size_t close = open == std::string_view::npos ? open : message.find('`', open + 1);
    if (close == std::string_view::npos) break;
    const std::string_view name = message.substr(open + 1, close - open - 1);
    out.append(message.substr(at, open - at));
    bool replaced = false;
    for (const auto& [field, option] : option_of_name) {
      if (field == name) {
        out.append(option);
        replaced = true;
        break;
      }
    }
    if (!replaced) out.append(message.substr(open, close - open + 1));
    at = close + 1;
  }
  out.append(message.substr(at));
  return out;
}

}  // namespace phaze::cli
