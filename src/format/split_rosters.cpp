// The split-certification rosters of the reference runtime lines, as data:
// each line's bundled split-certified.json (skippy/abi.h
// SplitRoster), copied field for field from the file at the commit named.
// Architectures sorted (byte order), as the files list them.
#include "format/split_rosters.h"

namespace skippy::rosters {
namespace {

// Mesh-LLM/mesh-llm crates/skippy-api/src/split-certified.json@da919a0c
constexpr std::string_view kUpstreamArchitectures[] = {
    "afmoe", "apertus", "arcee", "arwkv7", "bailingmoe3", "bloom", "chameleon", "chatglm", "cohere2",
    "deepseek2", "deepseek32", "dots1", "ernie4_5", "ernie4_5-moe", "exaone4", "falcon", "falcon-h1", "gemma",
    "gemma2", "gemma3", "gemma3n", "gemma4", "glm4", "glm4moe", "gpt-oss", "gptneox", "granite",
    "granite_swa", "granitehybrid", "granitemoe", "graniteswitch", "grovemoe", "hunyuan-dense", "hy_v3",
    "inkling", "internlm2", "jais", "jais2", "jamba", "kimi-k3", "kimi-linear", "laguna", "lfm2", "lfm2moe",
    "llama", "llama4", "maincoder", "mamba", "mellum", "mimo2", "minicpm", "minicpm3", "minimax-m3",
    "mistral4", "mpt", "nemotron", "nemotron_h_moe", "olmo2", "phi2", "phi3", "qwen2", "qwen2moe", "qwen2vl",
    "qwen3", "qwen35", "qwen35moe", "qwen3moe", "qwen3next", "qwen3vl", "qwen3vlmoe", "qwen4exp", "rwkv6",
    "rwkv7", "smollm3", "spark2_5", "stablelm", "starcoder2", "step35",
};

// marlucool/mesh-llm crates/mesh-llm-host-runtime/src/inference/skippy/split-certified.json@05a82c5f
constexpr std::string_view kForkArchitectures[] = {
    "afmoe", "apertus", "arcee", "arwkv7", "bailingmoe2", "bailingmoe3", "bloom", "chameleon", "chatglm",
    "cohere2", "deepseek2", "deepseek32", "deepseek4", "dots1", "ernie4_5", "ernie4_5-moe", "exaone4",
    "falcon", "falcon-h1", "gemma", "gemma2", "gemma3", "gemma3n", "gemma4", "glm4", "glm4moe", "gpt-oss",
    "gptneox", "granite", "granite_swa", "granitehybrid", "granitemoe", "graniteswitch", "grovemoe",
    "hunyuan-dense", "hy_v3", "inkling", "internlm2", "jais", "jais2", "jamba", "kimi-k3", "kimi-linear",
    "laguna", "lfm2", "lfm2moe", "llama", "llama4", "maincoder", "mamba", "mellum", "mimo2", "minicpm",
    "minicpm3", "minimax-m2", "minimax-m3", "mistral3", "mistral4", "mpt", "muse-glimmer", "nemotron",
    "nemotron_h", "nemotron_h_moe", "olmo2", "phi2", "phi3", "qwen2", "qwen2moe", "qwen2vl", "qwen3",
    "qwen35", "qwen35moe", "qwen3moe", "qwen3next", "qwen3vl", "qwen3vlmoe", "qwen4exp", "rwkv6", "rwkv7",
    "smollm3", "spark2_5", "stablelm", "starcoder2", "step35",
};

}  // namespace

const SplitRoster kUpstream{
    .source = "Mesh-LLM/mesh-llm crates/skippy-api/src/split-certified.json@da919a0c",
    .llama_upstream_sha = "661643e43079a4ee6faab4c1895291767b67ea8d",
    .skippy_abi = "0.1.57",
    .patch_queue_sha256 = "8b55597e18ffda86b0c0b9edf0edc3dfcbf2d91b4f07126a7d2ed04672cf2e59",
    .architectures = kUpstreamArchitectures,
};

const SplitRoster kFork{
    .source = "marlucool/mesh-llm crates/mesh-llm-host-runtime/src/inference/skippy/split-certified.json@05a82c5f",
    .llama_upstream_sha = "8212c7802455255460ab8e18fc34754560031b34",
    .skippy_abi = "0.1.64",
    .patch_queue_sha256 = "173ca846b59594f253588b2e1b509bd2098ebac9357bba301f39925280cd8dea",
    .architectures = kForkArchitectures,
};

}  // namespace skippy::rosters
