#include "xet/chunker.h"

#include <algorithm>

namespace skippy::xet {

const uint64_t kGearTable[256] = {
    0xb088d3a9e840f559u, 0x5652c7f739ed20d6u, 0x45b28969898972abu, 0x6b0a89d5b68ec777u,
    0x368f573e8b7a31b7u, 0x1dc636dce936d94bu, 0x207a4c4e5554d5b6u, 0xa474b34628239acbu,
    0x3b06a83e1ca3b912u, 0x90e78d6c2f02baf7u, 0xe1c92df7150d9a8au, 0x8e95053a1086d3adu,
    0x5a2ef4f1b83a0722u, 0xa50fac949f807faeu, 0x0e7303eb80d8d681u, 0x99b07edc1570ad0fu,
    0x689d2fb555fd3076u, 0x00005082119ea468u, 0xc4b08306a88fcc28u, 0x3eb0678af6374afdu,
    0xf19f87ab86ad7436u, 0xf2129fbfbe6bc736u, 0x481149575c98a4edu, 0x0000010695477bc5u,
    0x1fba37801a9ceaccu, 0x3bf06fd663a49b6du, 0x99687e9782e3874bu, 0x79a10673aa50d8e3u,
    0xe4accf9e6211f420u, 0x2520e71f87579071u, 0x2bd5d3fd781a8a9bu, 0x00de4dcddd11c873u,
    0xeaa9311c5a87392fu, 0xdb748eb617bc40ffu, 0xaf579a8df620bf6fu, 0x86a6e5da1b09c2b1u,
    0xcc2fc30ac322a12eu, 0x355e2afec1f74267u, 0x2d99c8f4c021a47bu, 0xbade4b4a9404cfc3u,
    0xf7b518721d707d69u, 0x3286b6587bf32c20u, 0x0000b68886af270cu, 0xa115d6e4db8a9079u,
    0x484f7e9c97b2e199u, 0xccca7bb75713e301u, 0xbf2584a62bb0f160u, 0xade7e813625dbcc8u,
    0x000070940d87955au, 0x8ae69108139e626fu, 0xbd776ad72fde38a2u, 0xfb6b001fc2fcc0cfu,
    0xc7a474b8e67bc427u, 0xbaf6f11610eb5d58u, 0x09cb1f5b6de770d1u, 0xb0b219e6977d4c47u,
    0x00ccbc386ea7ad4au, 0xcc849d0adf973f01u, 0x73a3ef7d016af770u, 0xc807d2d386bdbdfeu,
    0x7f2ac9966c791730u, 0xd037a86bc6c504dau, 0xf3f17c661eaa609du, 0xaca626b04daae687u,
    0x755a99374f4a5b07u, 0x90837ee65b2caedeu, 0x6ee8ad93fd560785u, 0x0000d9e11053edd8u,
    0x9e063bb2d21cdbd7u, 0x07ab77f12a01d2b2u, 0xec550255e6641b44u, 0x78fb94a8449c14c6u,
    0xc7510e1bc6c0f5f5u, 0x0000320b36e4cae3u, 0x827c33262c8b1a2du, 0x14675f0b48ea4144u,
    0x267bd3a6498decebu, 0xf1916ff982f5035eu, 0x86221b7ff434fb88u, 0x9dbecee7386f49d8u,
    0xea58f8cac80f8f4au, 0x008d198692fc64d8u, 0x6d38704fbabf9a36u, 0xe032cb07d1e7be4cu,
    0x228d21f6ad450890u, 0x635cb1bfc02589a5u, 0x4620a1739ca2ce71u, 0xa7e7dfe3aae5fb58u,
    0x0c10ca932b3c0debu, 0x2727fee884afed7bu, 0xa2df1c6df9e2ab1fu, 0x4dcdd1ac0774f523u,
    0x000070ffad33e24eu, 0xa2ace87bc5977816u, 0x9892275ab4286049u, 0xc2861181ddf18959u,
    0xbb9972a042483e19u, 0xef70cd3766513078u, 0x00000513abfc9864u, 0xc058b61858c94083u,
    0x09e850859725e0deu, 0x9197fb3bf83e7d94u, 0x7e1e626d12b64bceu, 0x520c54507f7b57d1u,
    0xbee1797174e22416u, 0x6fd9ac3222e95587u, 0x0023957c9adfbf3eu, 0xa01c7d7e234bbe15u,
    0xaba2c758b8a38cbbu, 0x0d1fa0ceec3e2b30u, 0x0bb6a58b7e60b991u, 0x4333dd5b9fa26635u,
    0xc2fd3b7d4001c1a3u, 0xfb41802454731127u, 0x65a56185a50d18cbu, 0xf67a02bd8784b54fu,
    0x696f11dd67e65063u, 0x00002022fca814abu, 0x8cd6be912db9d852u, 0x695189b6e9ae8a57u,
    0xee9453b50ada0c28u, 0xd8fc5ea91a78845eu, 0xab86bf191a4aa767u, 0x0000c6b5c86415e5u,
    0x267310178e08a22eu, 0xed2d101b078bca25u, 0x3b41ed84b226a8fbu, 0x13e622120f28dc06u,
    0xa315f5ebfb706d26u, 0x8816c34e3301baceu, 0xe9395b9cbb71fdaeu, 0x002ce9202e721648u,
    0x4283db1d2bb3c91cu, 0xd77d461ad2b1a6a5u, 0xe2ec17e46eeb866bu, 0xb8e0be4039fbc47cu,
    0xdea160c4d5299d04u, 0x7eec86c8d28c3634u, 0x2119ad129f98a399u, 0xa6ccf46b61a283efu,
    0x2c52cedef658c617u, 0x2db4871169acdd83u, 0x0000f0d6f39ecbe9u, 0x3dd5d8c98d2f9489u,
    0x8a1872a22b01f584u, 0xf282a4c40e7b3cf2u, 0x8020ec2ccb1ba196u, 0x6693b6e09e59e313u,
    0x0000ce19cc7c83ebu, 0x20cb5735f6479c3bu, 0x762ebf3759d75a5bu, 0x207bfe823d693975u,
    0xd77dc112339cd9d5u, 0x9ba7834284627d03u, 0x217dc513e95f51e9u, 0xb27b1a29fc5e7816u,
    0x00d5cd9831bb662du, 0x71e39b806d75734cu, 0x7e572af006fb1a23u, 0xa2734f2f6ae91f85u,
    0xbf82c6b5022cddf2u, 0x5c3beac60761a0deu, 0xcdc893bb47416998u, 0x6d1085615c187e01u,
    0x77f8ae30ac277c5du, 0x917c6b81122a2c91u, 0x5b75b699add16967u, 0x0000cf6ae79a069bu,
    0xf3c40afa60de1104u, 0x2063127aa59167c3u, 0x621de62269d1894du, 0xd188ac1de62b4726u,
    0x107036e2154b673cu, 0x0000b85f28553a1du, 0xf2ef4e4c18236f3du, 0xd9d6de6611b9f602u,
    0xa1fc7955fb47911cu, 0xeb85fd032f298dbdu, 0xbe27502fb3befae1u, 0xe3034251c4cd661eu,
    0x441364d354071836u, 0x0082b36c75f2983eu, 0xb145910316fa66f0u, 0x021c069c9847caf7u,
    0x2910dfc75a4b5221u, 0x735b353e1c57a8b5u, 0xce44312ce98ed96cu, 0xbc942e4506bdfa65u,
    0xf05086a71257941bu, 0xfec3b215d351ceadu, 0x00ae1055e0144202u, 0xf54b40846f42e454u,
    0x00007fd9c8bcbcc8u, 0xbfbd9ef317de9bfeu, 0xa804302ff2854e12u, 0x39ce4957a5e5d8d4u,
    0xffb9e2a45637ba84u, 0x55b9ad1d9ea0818bu, 0x00008acbf319178au, 0x48e2bfc8d0fbfb38u,
    0x8be39841e848b5e8u, 0x0e2712160696a08bu, 0xd51096e84b44242au, 0x1101ba176792e13au,
    0xc22e770f4531689du, 0x1689eff272bbc56cu, 0x00a92a197f5650ecu, 0xbc765990bda1784eu,
    0xc61441e392fcb8aeu, 0x07e13a2ced31e4a0u, 0x92cbe984234e9d4du, 0x8f4ff572bb7d8ac5u,
    0x0b9670c00b963bd0u, 0x62955a581a03eb01u, 0x645f83e5ea000254u, 0x41fce516cd88f299u,
    0xbbda9748da7a98cfu, 0x0000aab2fe4845fau, 0x19761b069bf56555u, 0x8b8f5e8343b6ad56u,
    0x3e5d1cfd144821d9u, 0xec5c1e2ca2b0cd8fu, 0xfaf7e0fea7fbb57fu, 0x000000d3ba12961bu,
    0xda3f90178401b18eu, 0x70ff906de33a5febu, 0x0527d5a7c06970e7u, 0x22d8e773607c13e9u,
    0xc9ab70df643c3bacu, 0xeda4c6dc8abe12e3u, 0xecef1f410033e78au, 0x0024c2b274ac72cbu,
    0x06740d954fa900b4u, 0x1d7a299b323d6304u, 0xb3c37cb298cbead5u, 0xc986e3c76178739bu,
    0x9fabea364b46f58au, 0x6da214c5af85cc56u, 0x17a43ed8b7a38f84u, 0x6eccec511d9adbebu,
    0xf9cab30913335afbu, 0x4a5e60c5f415eed2u, 0x00006967503672b4u, 0x9da51d121454bb87u,
    0x84321e13b9bbc816u, 0xfb3d6fb6ab2fdd8du, 0x60305eed8e160a8du, 0xcbbf4b14e9946ce8u,
    0x00004f63381b10c3u, 0x07d5b7816fcc4e10u, 0xe5a536726a6a8155u, 0x57afb23447a07fddu,
    0x18f346f7abc9d394u, 0x636dc655d61ad33du, 0xcc8bab4939f7f3f6u, 0x63c7a906c1dd187bu,
};

namespace {

constexpr uint64_t kGearMask = 0xFFFF000000000000ull;  // 16 bits: a cut every 64 KiB on average
constexpr size_t kGearWindow = 64;                      // bytes a gear hash depends on

}  // namespace

std::optional<size_t> Chunker::next_cut(std::span<const uint8_t> data) {
  const uint8_t* p = data.data();
  const size_t n = data.size();
  size_t i = 0;
  // Bytes more than a window before the first place a cut may fall never
  // reach a tested hash (xet-core starts hashing kMin - 64 - 1 bytes in).
  if (open_ + kGearWindow < kMinChunkSize) i = std::min(kMinChunkSize - kGearWindow - 1 - open_, n);
  const size_t limit = std::min(n, kMaxChunkSize - open_);  // the forced cut is at open_ + limit
  uint64_t h = hash_;
  // Up to (not including) the byte that makes the chunk kMin long: hash only.
  const size_t untested_end = open_ + 1 < kMinChunkSize ? std::min(limit, kMinChunkSize - 1 - open_) : 0;
  for (; i < untested_end; ++i) h = (h << 1) + kGearTable[p[i]];
  for (; i < limit; ++i) {
    h = (h << 1) + kGearTable[p[i]];
    if ((h & kGearMask) == 0) {
      hash_ = 0;
      open_ = 0;
      return i + 1;
    }
  }
  if (open_ + limit == kMaxChunkSize) {
    hash_ = 0;
    open_ = 0;
    return limit;
  }
  hash_ = h;
  open_ += n;
  return std::nullopt;
}

size_t Chunker::finish() {
  const size_t last = open_;
  hash_ = 0;
  open_ = 0;
  return last;
}

std::vector<uint64_t> chunk_boundaries(std::span<const uint8_t> data) {
  std::vector<uint64_t> ends;
  Chunker c;
  uint64_t pos = 0;
  while (pos < data.size()) {
    const auto cut = c.next_cut(data.subspan(pos));
    if (!cut) break;
    pos += *cut;
    ends.push_back(pos);
  }
  if (c.finish() > 0) ends.push_back(data.size());
  return ends;
}

}  // namespace skippy::xet
