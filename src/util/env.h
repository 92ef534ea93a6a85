// Every environment variable the library reads, each with its rule, in one
// place (as huggingface_hub's constants module does). Nothing else in the
// library calls getenv. An empty variable counts as unset everywhere.
//
//   variable                    rule
//   HOME                        the home directory; else the password database's
//   XDG_CACHE_HOME              cache root when absolute (after "~" expansion; a
//                               relative value is ignored, as the XDG spec says),
//                               else ~/.cache
//   SKIPPY_CACHE_DIR            skippy's derived caches (verification records,
//                               materialized stages); else <cache root>/skippy
//   HF_HOME                     else <cache root>/huggingface
//   HF_HUB_CACHE                the Hugging Face cache; else the legacy
//   HUGGINGFACE_HUB_CACHE         HUGGINGFACE_HUB_CACHE; else $HF_HOME/hub
//   HF_ENDPOINT                 the Hub, http:// or https:// (default https://huggingface.co)
//   HF_TOKEN                    the token; else HUGGING_FACE_HUB_TOKEN; else the
//   HUGGING_FACE_HUB_TOKEN        token file $HF_TOKEN_PATH, else $HF_HOME/token
//   HF_TOKEN_PATH                 (surrounding whitespace dropped)
//   HF_HUB_OFFLINE              1/ON/YES/TRUE (any case): never touch the Hub
//   SKIPPY_VERIFY_PACKAGE_SHA   non-empty and not "0": local packages are
//                               SHA-256-verified on load (hf:// always are)
//   SKIPPY_HF_DOWNLOADS         files downloaded at once (default 4, >= 1)
//   SKIPPY_HF_UPLOADS           files uploaded at once by publish (default 4, >= 1)
//   SKIPPY_HF_MAX_ATTEMPTS      attempts per Hub request, retries included (default 5, >= 1)
//   SKIPPY_HF_BACKOFF_MS        first retry delay in ms, doubling (default 1000)
//   SKIPPY_HF_MIN_RATE          minimum rate of a storage transfer, bytes/s per
//                               connection (default 4096; 0: no floor)
//   SKIPPY_HF_MIN_RATE_SECS     ...averaged over this many seconds (default 30, >= 1)
//   SKIPPY_HF_STALL_SECS        a Hub request with no byte moving for this long is
//                               a failed attempt (default 60, >= 1)
//   MESH_LLM_ARTIFACT_TRANSFER  peer artifact transfer: off (unset, unknown),
//                               trusted or open (peer.h: transfer_mode_from_env)
//   SKIPPY_PEER_MIN_RATE        fetch --peer: the slowest transfer waited for, in
//                               bytes per second, with an optional K, M or G
//                               suffix (x1024); default 1M; 0 = no minimum
//   SKIPPY_PEER_RATE_WINDOW     fetch --peer: seconds that rate is averaged over
//                               (decimals allowed, 0.1 to 3600; default 10)
//   SKIPPY_TRUSTED_SIGNERS      owner certificates (PEM paths, ':'-separated) a
//                               package must be signed by (package_signature.h);
//                               unset: signatures are optional
//   SKIPPY_TRUSTED_OWNERS       the same, under another name
//                               (both are read; their lists add up)
//   SKIPPY_PROGRESS             how long work shows progress on stderr: auto
//                               (default: one redrawn line on a terminal, else
//                               a plain line every SKIPPY_PROGRESS_SECS), lines
//                               (plain lines, even on a terminal) or off
//   SKIPPY_PROGRESS_SECS        seconds between plain progress lines (decimals
//                               allowed, 0.01 to 3600; default 10)
//   SOURCE_DATE_EPOCH           created_at_unix_secs of written packages
//                               (reproducible builds); a non-negative integer
//   SKIPPY_RUNTIME_ABI          the skippy runtime ABI (MAJOR.MINOR.PATCH) that
//                               select, fetch, materialize and the C API check
//                               packages against (skippy/abi.h: runtime_abi_from);
//                               unset: no check
//
// "~" and "~/..." are expanded in the path variables, as huggingface_hub
// does (os.path.expanduser).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skippy::env {

// ------------------------------------------------------------- raw access

// The variable's value; nullopt when unset or empty.
std::optional<std::string> get(const char* name);
// huggingface_hub's truthy rule: 1, ON, YES or TRUE, any case.
bool flag(const char* name);
// A decimal unsigned value; `fallback` when unset, not a number or out of range.
unsigned unsigned_or(const char* name, unsigned fallback);
// "~" or "~/rest" with the home directory; anything else unchanged.
std::filesystem::path expand_user(std::string_view path);

// ---------------------------------------------------------------- places

// $HOME, else the password database's home directory; nullopt when neither.
std::optional<std::filesystem::path> home_dir();
// $XDG_CACHE_HOME when absolute, else <home>/.cache, else
// <temp dir>/cache-<uid> (a machine with no home directory at all).
std::filesystem::path cache_home();
// $SKIPPY_CACHE_DIR, else cache_home()/skippy. Not created here.
std::filesystem::path skippy_cache_dir();
// $HF_HOME, else cache_home()/huggingface.
std::filesystem::path hf_home();
// $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else hf_home()/hub.
std::filesystem::path hf_hub_cache_dir();

// ------------------------------------------------------- the Hugging Face Hub

// $HF_ENDPOINT without trailing '/', default "https://huggingface.co".
// Throws Error(kUsage) when it is not an http:// or https:// URL (without a
// scheme curl would fall back to plain http and send the token in clear).
std::string hf_endpoint();
// HF_TOKEN, else HUGGING_FACE_HUB_TOKEN, else the token file ($HF_TOKEN_PATH,
// else hf_home()/token; unreadable counts as absent). nullopt when none.
std::optional<std::string> hf_token();
bool hf_hub_offline();
bool hf_hub_disable_xet();        // HF_HUB_DISABLE_XET (huggingface_hub's switch): LFS uploads and resolve-URL downloads only
unsigned hf_parallel_downloads();  // SKIPPY_HF_DOWNLOADS, default 4
unsigned hf_parallel_uploads();    // SKIPPY_HF_UPLOADS, default 4
unsigned hf_connections();         // SKIPPY_HF_CONNECTIONS, default 8 (1..64)
uint64_t hf_min_range_bytes();     // SKIPPY_HF_MIN_RANGE (bytes), default 4 MiB, at least 64 KiB
unsigned hf_max_attempts();        // SKIPPY_HF_MAX_ATTEMPTS, default 5
unsigned hf_backoff_ms();          // SKIPPY_HF_BACKOFF_MS, default 1000
uint64_t hf_min_rate();            // SKIPPY_HF_MIN_RATE (bytes/s, a size: 512K), default 4096, 0 = off; kUsage when malformed
unsigned hf_min_rate_secs();       // SKIPPY_HF_MIN_RATE_SECS, default 30, at least 1
unsigned hf_stall_secs();          // SKIPPY_HF_STALL_SECS, default 60, at least 1
// huggingface_hub's own limits on a silent server, with its defaults: how
// long a metadata request (HEAD, an API call) and a download may wait for
// the first byte of the answer before the attempt fails (and a retry line
// says so). Seconds, fractions allowed; at least 0.1.
double hf_etag_timeout_secs();     // HF_HUB_ETAG_TIMEOUT, default 10
double hf_download_timeout_secs(); // HF_HUB_DOWNLOAD_TIMEOUT, default 10

// ------------------------------------------------------------------ peers

// SKIPPY_PEER_MIN_RATE, default 1 MiB/s. Throws Error(kUsage) naming the
// variable when malformed.
uint64_t peer_min_rate();
// SKIPPY_PEER_RATE_WINDOW in milliseconds, default 10000. Throws
// Error(kUsage) naming the variable when malformed or out of range.
uint64_t peer_rate_window_ms();
// A rate in bytes per second as parse_byte_size reads a size ("1048576",
// "512K", "1M", "1MB"); nullopt when malformed. (SKIPPY_PEER_MIN_RATE and
// SKIPPY_HF_MIN_RATE.)
std::optional<uint64_t> parse_byte_rate(std::string_view text);

// ------------------------------------------------------------------ others

bool verify_package_sha();  // SKIPPY_VERIFY_PACKAGE_SHA
// SKIPPY_TRUSTED_SIGNERS then SKIPPY_TRUSTED_OWNERS, each split at ':' ("~"
// expanded, empty entries dropped).
std::vector<std::filesystem::path> trusted_signers();
// SKIPPY_RUNTIME_ABI as written; nullopt when unset (parsed by
// skippy/abi.h's runtime_abi_from, which says what is wrong with it).
std::optional<std::string> runtime_abi();
// SKIPPY_PROGRESS: "auto" when unset. Throws Error(kUsage) naming the
// variable when it is not auto, lines or off.
std::string progress_mode();
// SKIPPY_PROGRESS_SECS in seconds, default 10. Throws Error(kUsage) naming
// the variable when malformed or out of range.
double progress_interval_secs();
// SOURCE_DATE_EPOCH; nullopt when unset. Throws Error(kUsage) when it is not
// a non-negative decimal integer.
std::optional<int64_t> source_date_epoch();

}  // namespace skippy::env
