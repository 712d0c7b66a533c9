// platform/ on Windows (built only there; run under Wine): files with non-ASCII names,
// mappings, memory, CPUs, child processes and signals through the Win32 implementation.
// Linux's own tests are platform_test.cpp.
#include <gtest/gtest.h>

#include <windows.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "platform/cpu.h"
#include "platform/file.h"
#include "platform/memory.h"
#include "platform/process.h"
#include "platform/signals.h"
#include "platform/windows/cpu_topology.h"

namespace moetier::platform {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A fresh folder per test whose name is not ASCII (UTF-8 in, wide-character APIs inside).
class PlatformWindows : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / fs::path(u8"moetier_plätform_ü_" + std::u8string(
                                                    reinterpret_cast<const char8_t*>(info->name())) +
                                                u8"_" + std::u8string(reinterpret_cast<const char8_t*>(
                                                            std::to_string(process_id()).c_str())));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // The UTF-8 path of a file in the folder, written with `bytes`.
  std::string write(const std::string& name, const std::string& bytes) const {
    const fs::path p = dir_ / fs::path(reinterpret_cast<const char8_t*>(name.c_str()));
    std::ofstream(p, std::ios::binary) << bytes;
    const std::u8string u8 = p.u8string();
    return std::string(u8.begin(), u8.end());
  }
  fs::path dir_;
};

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
  return s;
}

TEST_F(PlatformWindows, FileReadsMappingAndInfoWithANonAsciiName) {
  const std::string bytes = pattern(100'000);
  const std::string p = write("données_模型.bin", bytes);
  auto file = File::open(p);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->size(), bytes.size());
  std::string buf(bytes.size(), '\0');
  ASSERT_TRUE(file->read_exact(0, buf.data(), buf.size()));
  EXPECT_EQ(buf, bytes);
  std::string tail(100, '\0');
  auto got = file->read_at(bytes.size() - 10, tail.data(), tail.size());
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, 10u);
  got = file->read_at(bytes.size(), tail.data(), tail.size());
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, 0u);
  EXPECT_FALSE(file->read_at(bytes.size() + 1, tail.data(), 1));
  const Status short_read = file->read_exact(bytes.size() - 10, tail.data(), tail.size());
  EXPECT_EQ(short_read.message(), p + ": read failed at byte 100000: unexpected end of file");

  auto map = FileMapping::map(*file);
  ASSERT_TRUE(map) << map.status().message();
  ASSERT_EQ(map->size(), bytes.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(map->data()), map->size()), bytes);
  map->drop_pages(0, bytes.size());  // leaves the working set; reads see the file again
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(map->data()), map->size()), bytes);
  prefault_read(map->data(), map->size());
  advise_will_need(map->data(), map->size());
  EXPECT_TRUE(lock_in_ram(map->data(), map->size())) << "locking 100 kB of a mapping";

  auto info = file_info(p);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->size, bytes.size());
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LT(std::abs(now_ns - info->modified_ns), int64_t{600} * 1'000'000'000) << "modified within 10 minutes";
}

TEST_F(PlatformWindows, OpenErrors) {
  auto missing = File::open(write("x", "") + "-missing");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(missing.status().message().find("cannot open '"), std::string::npos) << missing.status().message();
  const std::u8string dir = dir_.u8string();
  auto folder = File::open(std::string(dir.begin(), dir.end()));
  ASSERT_FALSE(folder);
  EXPECT_NE(folder.status().message().find("is not a regular file"), std::string::npos) << folder.status().message();
  EXPECT_FALSE(file_info(write("y", "") + "-missing"));
  auto empty = File::open(write("empty", ""));
  ASSERT_TRUE(empty);
  auto empty_map = FileMapping::map(*empty);
  ASSERT_TRUE(empty_map);
  EXPECT_EQ(empty_map->data(), nullptr);
}

TEST(PlatformWindowsMemory, AnonymousMemoryAlignedZeroedWritable) {
  EXPECT_EQ(page_size(), 4096u);
  for (const size_t align : {size_t{0}, size_t{65536}, huge_page_size()}) {
    auto m = AnonymousMemory::allocate({.bytes = 3 * 1024 * 1024 + 5, .alignment = align, .huge_pages = true});
    ASSERT_TRUE(m) << m.status().message();
    EXPECT_EQ(m->size(), 3u * 1024 * 1024 + 5);
    if (align != 0) EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data()) % align, 0u);
    for (size_t i = 0; i < m->size(); i += 4096) ASSERT_EQ(m->data()[i], 0);
    m->data()[m->size() - 1] = 7;
    prefault_write(m->data(), m->size());
    EXPECT_TRUE(region_pages(m->data()).anon_huge_pages.has_value());
  }
  EXPECT_FALSE(AnonymousMemory::allocate({.bytes = 10, .alignment = 3000}));
  const MemoryInfo mem = memory_info();
  ASSERT_TRUE(mem.total && mem.available);
  EXPECT_GT(*mem.total, uint64_t{64} << 20);
  EXPECT_LE(*mem.available, *mem.total);
  const ProcessMemory self = process_memory();
  ASSERT_TRUE(self.resident && self.peak_resident);
  EXPECT_GE(*self.peak_resident, *self.resident);
  EXPECT_FALSE(huge_page_setting_location().empty());
  release_free_heap();
}

// GetLogicalProcessorInformationEx's records for made-up cores: (efficiency class, group,
// mask) per core.
struct FakeCore {
  BYTE efficiency_class;
  WORD group;
  KAFFINITY mask;
};
std::vector<uint8_t> processor_records(const std::vector<FakeCore>& cores) {
  std::vector<uint8_t> out;
  for (const FakeCore& c : cores) {
    SYSTEM_LOGICAL_PROCESSOR_INFORMATION_EX r{};
    r.Relationship = RelationProcessorCore;
    r.Size = sizeof(r);
    r.Processor.Flags = std::popcount(static_cast<uint64_t>(c.mask)) > 1 ? LTP_PC_SMT : 0;
    reinterpret_cast<BYTE*>(&r.Processor)[1] = c.efficiency_class;  // EfficiencyClass
    r.Processor.GroupCount = 1;
    r.Processor.GroupMask[0].Group = c.group;
    r.Processor.GroupMask[0].Mask = c.mask;
    const auto* bytes = reinterpret_cast<const uint8_t*>(&r);
    out.insert(out.end(), bytes, bytes + sizeof(r));
  }
  return out;
}

TEST(PlatformWindowsCpu, TopologyOfAHybridLaptopFromItsRecords) {
  // i7-13620H: 6 P-cores (class 1) with two threads each at CPUs 0-11, 4 E-cores (class 0).
  std::vector<FakeCore> cores;
  for (int c = 0; c < 6; ++c) cores.push_back({1, 0, KAFFINITY{3} << (2 * c)});
  for (int c = 12; c < 16; ++c) cores.push_back({0, 0, KAFFINITY{1} << c});
  CpuTopology t = windows_impl::topology_from_processor_info(processor_records(cores), {0}, 16);
  EXPECT_EQ(t.logical, 16);
  EXPECT_EQ(t.physical, 10);
  EXPECT_EQ(t.performance, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(t.efficiency, (std::vector<int>{12, 13, 14, 15}));
  ASSERT_EQ(t.cores.size(), 10u);
  EXPECT_EQ(t.cores[1], (std::vector<int>{2, 3}));
  // SMT off: one CPU per P-core.
  cores.clear();
  for (int c = 0; c < 6; ++c) cores.push_back({1, 0, KAFFINITY{1} << c});
  for (int c = 6; c < 10; ++c) cores.push_back({0, 0, KAFFINITY{1} << c});
  t = windows_impl::topology_from_processor_info(processor_records(cores), {0}, 10);
  EXPECT_EQ(t.physical, 10);
  EXPECT_EQ(t.performance, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  // One class (a CPU with one kind of core): no hybrid sets; a second processor group's
  // CPUs are numbered after the first's.
  t = windows_impl::topology_from_processor_info(processor_records({{0, 0, 3}, {0, 1, 3}}), {0, 2}, 4);
  EXPECT_TRUE(t.performance.empty());
  EXPECT_EQ(t.cores, (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  // A truncated buffer: what is whole is read.
  std::vector<uint8_t> cut = processor_records({{0, 0, 1}, {0, 0, 2}});
  cut.resize(cut.size() - 4);
  t = windows_impl::topology_from_processor_info(cut, {0}, 2);
  EXPECT_EQ(t.cores.size(), 1u);
  EXPECT_EQ(t.physical, 1);
  // Nothing: the logical count.
  t = windows_impl::topology_from_processor_info({}, {0}, 8);
  EXPECT_EQ(t.physical, 8);
}

TEST(PlatformWindowsCpu, TopologyAffinityAndTimes) {
  const CpuTopology t = cpu_topology();
  EXPECT_GE(t.logical, 1);
  EXPECT_GE(t.physical, 1);
  EXPECT_LE(t.physical, t.logical);
  EXPECT_EQ(t.performance.empty(), t.efficiency.empty());
  const std::vector<int> cpus = usable_cpus();
  ASSERT_FALSE(cpus.empty());
  std::thread([&] {
    ASSERT_TRUE(pin_current_thread(std::vector<int>{cpus.front()}));
    EXPECT_EQ(usable_cpus(), std::vector<int>{cpus.front()});
  }).join();
  EXPECT_FALSE(pin_current_thread(std::vector<int>{t.logical + 100}));
  EXPECT_FALSE(pin_current_thread({}));
  const auto before = sample_cpu_times(cpus);
  ASSERT_TRUE(before);
  const auto end = std::chrono::steady_clock::now() + 300ms;
  volatile double x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1.0;
  const auto after = sample_cpu_times(cpus);
  ASSERT_TRUE(after);
  EXPECT_GT(after->own_seconds, before->own_seconds);
  EXPECT_GE(after->busy_seconds, before->busy_seconds);
  EXPECT_GT(cpu_time_ticks_per_second(), 0);
  EXPECT_FALSE(sample_cpu_times({}));
}

TEST_F(PlatformWindows, ChildProcessOutputExitAndTerminate) {
  auto self = executable_path();
  ASSERT_TRUE(self) << self.status().message();
  EXPECT_TRUE(fs::exists(*self));
  EXPECT_GT(process_id(), 0);
  // moetier.exe itself is the child: --version prints one line and exits 0.
  const std::string out = write("child.log", "");
  auto child = ChildProcess::spawn({.args = {MOETIER_BINARY, "--version"}, .output_path = out});
  ASSERT_TRUE(child) << child.status().message();
  const ProcessExit e = child->wait();
  EXPECT_TRUE(e.success()) << e.describe();
  std::ifstream log(fs::path(reinterpret_cast<const char8_t*>(out.c_str())), std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("moetier ", 0), 0u) << text;
  // An unknown command exits 2.
  auto bad = run_process({MOETIER_BINARY, "no-such-command"});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->code, 2);
  // Not found: an error naming the program.
  auto missing = ChildProcess::spawn({.args = {"moetier-no-such-program"}, .output_path = ""});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("moetier-no-such-program"), std::string::npos);
  EXPECT_TRUE(find_program("moetier-no-such-program").empty());
}

TEST(PlatformWindowsSignals, ScopesNestAndShutdownTimesOut) {
  std::atomic<bool> outer{false}, inner{false};
  {
    InterruptScope a(&outer);
    { InterruptScope b(&inner); }
  }
  EXPECT_FALSE(outer.load());
  ShutdownSignals signals;
  EXPECT_EQ(signals.wait(10ms), ShutdownRequest::kNone);
  EXPECT_EQ(shutdown_request_name(ShutdownRequest::kNone), "");
}

}  // namespace
}  // namespace moetier::platform
