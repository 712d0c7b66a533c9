// The platform layer (src/platform/): every OS call the engine makes, tested on the real OS
// (files, mappings, memory, CPUs, signals, child processes), plus the Linux /proc and /sys
// text formats on fixed text. Tests that change process-wide signal state run in a forked
// child, which has one thread, so a signal cannot land in some other test's thread.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "platform/cpu.h"
#include "platform/file.h"
#include "platform/linux/cpu_topology.h"
#include "platform/linux/proc_text.h"
#include "platform/linux/util.h"
#include "platform/memory.h"
#include "platform/net.h"
#include "platform/process.h"
#include "platform/signals.h"
#include "platform/terminal.h"

namespace moetier::platform {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A fresh directory per test, removed afterwards.
class PlatformTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("moetier_platform_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = path(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  static std::string read(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  fs::path dir_;
};

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 7) & 0xff);
  return s;
}

// Runs fn in a forked child and returns its exit status (fn's return value), or -signal when
// a signal ended it. For tests that change process-wide signal state.
template <typename Fn>
int in_child(Fn&& fn) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// --- file.h ----------------------------------------------------------------------------

using PlatformFile = PlatformTest;

TEST_F(PlatformFile, ReadAtReturnsTheBytesAndIsShortOnlyAtTheEnd) {
  const std::string bytes = pattern(10000);
  const std::string p = write("data.bin", bytes);
  auto file = File::open(p);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->size(), 10000u);
  EXPECT_EQ(file->path(), p);

  std::string buf(10000, '\0');
  auto got = file->read_at(0, buf.data(), buf.size());
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, 10000u);
  EXPECT_EQ(buf, bytes);

  // A read across the end is short; at the end it reads nothing.
  std::string tail(100, '\0');
  got = file->read_at(9990, tail.data(), tail.size());
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, 10u);
  EXPECT_EQ(tail.substr(0, 10), bytes.substr(9990));
  got = file->read_at(10000, tail.data(), tail.size());
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, 0u);

  // Past the end is an error naming the file.
  got = file->read_at(10001, tail.data(), 1);
  ASSERT_FALSE(got);
  EXPECT_NE(got.status().message().find(p), std::string::npos) << got.status().message();
  EXPECT_NE(got.status().message().find("past the end"), std::string::npos) << got.status().message();

  // read_exact: all or an error.
  std::string mid(1000, '\0');
  ASSERT_TRUE(file->read_exact(4000, mid.data(), mid.size()));
  EXPECT_EQ(mid, bytes.substr(4000, 1000));
  const Status st = file->read_exact(9990, tail.data(), tail.size());
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), p + ": read failed at byte 10000: unexpected end of file");
  EXPECT_EQ(st.kind(), ErrorKind::kRuntime);

  // Hints change nothing.
  file->advise_sequential(0, 0);
  file->drop_cached(0, 4096);
  ASSERT_TRUE(file->read_exact(0, buf.data(), buf.size()));
  EXPECT_EQ(buf, bytes);
}

// Unbuffered reads (the expert store's): aligned ranges into aligned memory give the file's
// bytes, a range over the end is short with the tail; where the file system has no direct
// I/O the file is buffered and alignment() is 1.
TEST_F(PlatformFile, UnbufferedReadsGiveTheBytes) {
  const std::string bytes = pattern(3 * 4096 + 1000);
  const std::string p = write("direct.bin", bytes);
  auto file = File::open_unbuffered(p);
  ASSERT_TRUE(file) << file.status().message();
  EXPECT_EQ(file->size(), bytes.size());
  const uint32_t align = file->alignment();
  EXPECT_TRUE(align == 1 || align == 4096) << align;
  auto memory = AnonymousMemory::allocate({.bytes = 4 * 4096});
  ASSERT_TRUE(memory);
  uint8_t* buf = memory->data();
  auto got = file->read_at(4096, buf, 4096);
  ASSERT_TRUE(got) << got.status().message();
  EXPECT_EQ(*got, 4096u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 4096), bytes.substr(4096, 4096));
  got = file->read_at(2 * 4096, buf, 2 * 4096);  // over the end: the last 5096 bytes
  ASSERT_TRUE(got) << got.status().message();
  EXPECT_EQ(*got, 4096u + 1000u);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), *got), bytes.substr(2 * 4096));
}

TEST_F(PlatformFile, ReadAtFromSeveralThreadsAtOnce) {
  const std::string bytes = pattern(1 << 20);
  auto file = File::open(write("data.bin", bytes));
  ASSERT_TRUE(file);
  std::vector<std::string> parts(8, std::string(bytes.size() / 8, '\0'));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < parts.size(); ++t) {
    threads.emplace_back([&, t] { ASSERT_TRUE(file->read_exact(t * parts[t].size(), parts[t].data(), parts[t].size())); });
  }
  for (std::thread& t : threads) t.join();
  std::string joined;
  for (const std::string& s : parts) joined += s;
  EXPECT_EQ(joined, bytes);
}

TEST_F(PlatformFile, OpenErrorsNameThePath) {
  const std::string missing = path("no-such-file.gguf");
  auto file = File::open(missing);
  ASSERT_FALSE(file);
  EXPECT_EQ(file.status().kind(), ErrorKind::kBadInput);
  EXPECT_EQ(file.status().message(), fmt::format("cannot open '{}': No such file or directory", missing));

  auto dir = File::open(dir_.string());
  ASSERT_FALSE(dir);
  EXPECT_EQ(dir.status().kind(), ErrorKind::kBadInput);
  EXPECT_EQ(dir.status().message(), fmt::format("'{}' is not a regular file", dir_.string()));

  // A FIFO is refused at once (opening it must not wait for a writer).
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = File::open(fifo);
  ASSERT_FALSE(f);
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos);
}

TEST_F(PlatformFile, MovedFromFileIsEmptyAndTheMoveReads) {
  const std::string bytes = pattern(64);
  auto opened = File::open(write("a.bin", bytes));
  ASSERT_TRUE(opened);
  File a = std::move(*opened);
  File b = std::move(a);
  std::string buf(64, '\0');
  ASSERT_TRUE(b.read_exact(0, buf.data(), buf.size()));
  EXPECT_EQ(buf, bytes);
  auto other = File::open(write("b.bin", "xy"));
  ASSERT_TRUE(other);
  b = std::move(*other);
  EXPECT_EQ(b.size(), 2u);
}

TEST_F(PlatformFile, MappingHoldsTheFileAndSurvivesDroppedPages) {
  const size_t page = page_size();
  const std::string bytes = pattern(5 * page + 123);
  auto file = File::open(write("data.bin", bytes));
  ASSERT_TRUE(file);
  auto map = FileMapping::map(*file);
  ASSERT_TRUE(map) << map.status().message();
  ASSERT_EQ(map->size(), bytes.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(map->data()), map->size()), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(map->data()) % page, 0u);

  // The mapping outlives its File.
  File closed = std::move(*file);
  { File gone = std::move(closed); }
  prefault_read(map->data(), map->size());
  advise_will_need(map->data() + 10, 3 * page);
  map->drop_pages(page / 2, 3 * page);  // pages 1 and 2 whole; 0 and 3 partly
  map->drop_pages(0, map->size());
  map->drop_pages(map->size() + 5, 10);  // outside: nothing
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(map->data()), map->size()), bytes);

  FileMapping moved = std::move(*map);
  EXPECT_EQ(map->data(), nullptr);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(moved.data()), moved.size()), bytes);
}

TEST_F(PlatformFile, EmptyFileMapsToNothing) {
  auto file = File::open(write("empty.bin", ""));
  ASSERT_TRUE(file);
  EXPECT_EQ(file->size(), 0u);
  auto map = FileMapping::map(*file);
  ASSERT_TRUE(map);
  EXPECT_EQ(map->data(), nullptr);
  EXPECT_EQ(map->size(), 0u);
}

TEST_F(PlatformFile, FileInfoGivesSizeAndModificationTime) {
  const auto before = std::chrono::system_clock::now();
  const std::string p = write("info.bin", pattern(4321));
  auto info = file_info(p);
  ASSERT_TRUE(info) << info.status().message();
  EXPECT_EQ(info->size, 4321u);
  const int64_t before_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(before.time_since_epoch()).count();
  // Within a few seconds of the write (file systems may round the time down).
  EXPECT_GT(info->modified_ns, before_ns - 5'000'000'000);
  EXPECT_LT(info->modified_ns, before_ns + 60'000'000'000);

  const std::string missing = path("missing");
  auto none = file_info(missing);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().kind(), ErrorKind::kBadInput);
  EXPECT_EQ(none.status().message(), fmt::format("cannot stat '{}': No such file or directory", missing));
}

TEST(PlatformFilePaths, UserCacheDirFollowsXdgThenHome) {
  EXPECT_EQ(linux_impl::cache_dir_from("/x/cache", "/home/u"), "/x/cache");
  EXPECT_EQ(linux_impl::cache_dir_from("relative", "/home/u"), "/home/u/.cache");  // the spec ignores it
  EXPECT_EQ(linux_impl::cache_dir_from(nullptr, "/home/u"), "/home/u/.cache");
  EXPECT_EQ(linux_impl::cache_dir_from(nullptr, ""), "");
  EXPECT_EQ(linux_impl::cache_dir_from(nullptr, nullptr), "");
  // The live environment, in a child so the test's own stays as it was.
  const int code = in_child([] {
    ::setenv("XDG_CACHE_HOME", "/somewhere/cache", 1);
    if (user_cache_dir() != "/somewhere/cache") return 1;
    ::unsetenv("XDG_CACHE_HOME");
    ::setenv("HOME", "/home/someone", 1);
    return user_cache_dir() == "/home/someone/.cache" ? 0 : 2;
  });
  EXPECT_EQ(code, 0);
}

// --- memory.h --------------------------------------------------------------------------

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

TEST(PlatformMemory, PageSizes) {
  const size_t page = page_size();
  EXPECT_GE(page, 4096u);
  EXPECT_EQ(page & (page - 1), 0u);
  EXPECT_EQ(huge_page_size(), size_t{2} << 20);
}

TEST(PlatformMemory, AnonymousMemoryIsAlignedZeroedAndWritable) {
  const size_t bytes = (3u << 20) + 5;
  auto mem = AnonymousMemory::allocate({.bytes = bytes, .alignment = huge_page_size(), .huge_pages = true});
  ASSERT_TRUE(mem) << mem.status().message();
  ASSERT_NE(mem->data(), nullptr);
  EXPECT_EQ(mem->size(), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(mem->data()) % huge_page_size(), 0u);
  EXPECT_TRUE(all_zero(mem->data(), bytes));
  std::memset(mem->data(), 0xab, bytes);
  EXPECT_EQ(mem->data()[bytes - 1], 0xab);

  // The default alignment is the page.
  auto small = AnonymousMemory::allocate({.bytes = 100});
  ASSERT_TRUE(small);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small->data()) % page_size(), 0u);
  EXPECT_TRUE(all_zero(small->data(), 100));

  // Moves leave the source empty.
  AnonymousMemory moved = std::move(*mem);
  EXPECT_EQ(mem->data(), nullptr);
  EXPECT_EQ(mem->size(), 0u);
  EXPECT_EQ(moved.data()[0], 0xab);
  moved = std::move(*small);
  EXPECT_EQ(moved.size(), 100u);
}

TEST(PlatformMemory, AnonymousMemoryEdgeCases) {
  auto empty = AnonymousMemory::allocate({.bytes = 0});
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->data(), nullptr);
  auto odd = AnonymousMemory::allocate({.bytes = 4096, .alignment = 3 * page_size()});
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.status().message().find("alignment"), std::string::npos);
  auto huge = AnonymousMemory::allocate({.bytes = size_t{1} << 62});
  ASSERT_FALSE(huge);
  EXPECT_EQ(huge.status().kind(), ErrorKind::kRuntime);
  EXPECT_NE(huge.status().message().find("cannot allocate 4294967296.00 GiB"), std::string::npos)
      << huge.status().message();
}

TEST(PlatformMemory, PrefaultAndLockKeepTheContents) {
  const size_t bytes = 4u << 20;
  auto mem = AnonymousMemory::allocate({.bytes = bytes, .huge_pages = true});
  ASSERT_TRUE(mem);
  // Fresh memory: prefaulting keeps it zero.
  prefault_write(mem->data() + 100, bytes - 200);
  prefault_read(mem->data(), bytes);
  EXPECT_TRUE(all_zero(mem->data(), bytes));
  // Written memory: prefaulting again (unaligned ranges) changes nothing.
  for (size_t i = 0; i < bytes; ++i) mem->data()[i] = static_cast<uint8_t>(i * 7);
  prefault_write(mem->data() + 1, 12345);
  prefault_read(mem->data() + 3, bytes - 3);
  advise_will_need(mem->data(), bytes);
  prefault_read(mem->data(), 0);
  prefault_write(mem->data(), 0);
  ASSERT_TRUE(lock_in_ram(mem->data() + 10, 2 * page_size()));
  ASSERT_TRUE(lock_in_ram(mem->data(), 0));
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(mem->data()[i], static_cast<uint8_t>(i * 7)) << i;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

// Drops CAP_IPC_LOCK from this process (root may lock past the limit with it).
bool drop_ipc_lock_capability() {
  __user_cap_header_struct header{.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
  data[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
  return ::syscall(SYS_capset, &header, data) == 0;
}

using PlatformMemoryLock = PlatformTest;

TEST_F(PlatformMemoryLock, LockBeyondTheLimitSaysWhatIsMissingAndHowToRaiseIt) {
  if (kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer turns mlock into a no-op that succeeds";
  const std::string message_path = path("message.txt");
  const int code = in_child([&] {
    if (!drop_ipc_lock_capability()) return 10;
    const rlimit small{.rlim_cur = 64 << 10, .rlim_max = 64 << 10};
    if (::setrlimit(RLIMIT_MEMLOCK, &small) != 0) return 11;
    auto mem = AnonymousMemory::allocate({.bytes = 1 << 20});
    if (!mem) return 12;
    const Status st = lock_in_ram(mem->data(), mem->size());
    if (st) return 13;
    std::ofstream(message_path) << st.message();
    return 0;
  });
  ASSERT_EQ(code, 0);
  EXPECT_EQ(read(message_path),
            "cannot lock 1.0 MiB in RAM: Cannot allocate memory (locked-memory limit 64.0 KiB); raise it with 'ulimit -l "
            "unlimited' (or memlock in /etc/security/limits.conf)");
}

TEST(PlatformMemory, MemoryInfoIsSane) {
  const MemoryInfo m = memory_info();
  ASSERT_TRUE(m.total.has_value());
  ASSERT_TRUE(m.available.has_value());
  EXPECT_GT(*m.available, 0u);
  EXPECT_LE(*m.available, *m.total);
  EXPECT_GE(*m.total, uint64_t{64} << 20);
}

TEST(PlatformMemory, HugePageModeIsTheSystemSetting) {
  const HugePageMode mode = huge_page_mode();
  const bool has_thp = fs::exists("/sys/kernel/mm/transparent_hugepage/enabled");
  EXPECT_EQ(mode == HugePageMode::kUnavailable, !has_thp);
  EXPECT_EQ(huge_page_setting_location(), "/sys/kernel/mm/transparent_hugepage/enabled");
  EXPECT_EQ(available_memory_source(), "MemAvailable in /proc/meminfo");
  EXPECT_EQ(huge_page_mode_name(HugePageMode::kAlways), "always");
  EXPECT_EQ(huge_page_mode_name(HugePageMode::kMadvise), "madvise");
  EXPECT_EQ(huge_page_mode_name(HugePageMode::kNever), "never");
  EXPECT_EQ(huge_page_mode_name(HugePageMode::kUnavailable), "unavailable");
}

TEST(PlatformMemory, RegionPagesOfATouchedAllocation) {
  const size_t bytes = 8u << 20;
  auto mem = AnonymousMemory::allocate({.bytes = bytes, .alignment = huge_page_size(), .huge_pages = true});
  ASSERT_TRUE(mem);
  std::memset(mem->data(), 1, bytes);
  const RegionPages r = region_pages(mem->data() + 12345);
  ASSERT_TRUE(r.resident.has_value());
  EXPECT_GE(*r.resident, bytes);  // the kernel may merge it with a neighbouring region
  ASSERT_TRUE(r.anon_huge_pages.has_value());
  EXPECT_LE(*r.anon_huge_pages, *r.resident);
  if (huge_page_mode() == HugePageMode::kAlways || huge_page_mode() == HugePageMode::kMadvise) {
    RecordProperty("anon_huge_pages", std::to_string(*r.anon_huge_pages));
  }
  // An address no mapping contains.
  const RegionPages none = region_pages(reinterpret_cast<const void*>(uintptr_t{8}));
  EXPECT_FALSE(none.resident.has_value());
}

TEST(PlatformMemory, ProcessMemoryPeakAndItsReset) {
  const ProcessMemory before = process_memory();
  ASSERT_TRUE(before.resident.has_value());
  ASSERT_TRUE(before.peak_resident.has_value());
  EXPECT_GE(*before.peak_resident, *before.resident);
  const size_t bytes = 64u << 20;
  {
    auto mem = AnonymousMemory::allocate({.bytes = bytes});
    ASSERT_TRUE(mem);
    std::memset(mem->data(), 1, bytes);
    const ProcessMemory during = process_memory();
    EXPECT_GE(*during.resident, *before.resident + bytes / 2);
    EXPECT_GE(*during.peak_resident, *during.resident);
  }
  release_free_heap();
  const ProcessMemory after = process_memory();
  EXPECT_GE(*after.peak_resident, *before.resident + bytes / 2);  // the peak remembers
  if (!reset_peak_resident()) GTEST_SKIP() << "/proc/self/clear_refs is not writable here";
  const ProcessMemory reset = process_memory();
  EXPECT_LT(*reset.peak_resident, *after.peak_resident - bytes / 2);
}

// --- cpu.h -----------------------------------------------------------------------------

TEST(PlatformCpu, TopologyIsSane) {
  const CpuTopology t = cpu_topology();
  EXPECT_GE(t.physical, 1);
  EXPECT_LE(t.physical, t.logical);
  EXPECT_EQ(t.logical, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  // The cores, when known, hold every online CPU once.
  if (!t.cores.empty()) {
    EXPECT_EQ(static_cast<int>(t.cores.size()), t.physical);
    int n = 0;
    for (const auto& core : t.cores) n += static_cast<int>(core.size());
    EXPECT_EQ(n, t.logical);
  }
  // Hybrid sets: both or neither, disjoint.
  EXPECT_EQ(t.performance.empty(), t.efficiency.empty());
  for (int p : t.performance) EXPECT_EQ(std::count(t.efficiency.begin(), t.efficiency.end(), p), 0);
  const std::string name = cpu_model_name();
  EXPECT_EQ(name.find('\n'), std::string::npos);
  RecordProperty("cpu_model_name", name);
}

TEST(PlatformCpu, UsableCpusAndPinningRoundTrip) {
  const std::vector<int> usable = usable_cpus();
  ASSERT_FALSE(usable.empty());
  EXPECT_TRUE(std::is_sorted(usable.begin(), usable.end()));
  // In a thread of its own: pinning changes only the calling thread.
  std::thread([&] {
    const std::vector<int> one = {usable.front()};
    ASSERT_TRUE(pin_current_thread(one));
    EXPECT_EQ(usable_cpus(), one);
    ASSERT_TRUE(pin_current_thread(usable));
    EXPECT_EQ(usable_cpus(), usable);
  }).join();
  EXPECT_EQ(usable_cpus(), usable);

  EXPECT_EQ(pin_current_thread({}).kind(), ErrorKind::kBadInput);
  const std::vector<int> bad = {-1};
  EXPECT_EQ(pin_current_thread(bad).kind(), ErrorKind::kBadInput);
  const std::vector<int> absent = {1 << 20};
  const Status st = pin_current_thread(absent);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("CPU 1048576 does not exist"), std::string::npos) << st.message();
  EXPECT_EQ(usable_cpus(), usable);
}

TEST(PlatformCpu, CpuTimeGrowsWithBusyWork) {
  const std::vector<int> cpus = usable_cpus();
  EXPECT_GT(cpu_time_ticks_per_second(), 0);
  const auto before = sample_cpu_times(cpus);
  ASSERT_TRUE(before.has_value());
  // About 0.3 s of CPU time on this thread.
  volatile double sink = 0;
  const auto start = std::chrono::steady_clock::now();
  std::optional<CpuTimes> after;
  while (std::chrono::steady_clock::now() - start < 5s) {
    for (int i = 0; i < 1'000'000; ++i) sink = sink + i * 0.5;
    after = sample_cpu_times(cpus);
    ASSERT_TRUE(after.has_value());
    if (after->own_seconds - before->own_seconds >= 0.3) break;
  }
  EXPECT_GE(after->own_seconds - before->own_seconds, 0.3);
  // Our own work is part of the usable CPUs' busy time (to a tick per CPU).
  const double tick = 1.0 / static_cast<double>(cpu_time_ticks_per_second());
  EXPECT_GE(after->busy_seconds - before->busy_seconds,
            after->own_seconds - before->own_seconds - 2 * tick * static_cast<double>(cpus.size()) - 0.05);

  EXPECT_FALSE(sample_cpu_times({}).has_value());
  const std::vector<int> absent = {1 << 20};
  EXPECT_FALSE(sample_cpu_times(absent).has_value());
}

// --- signals.h -------------------------------------------------------------------------

std::atomic<int> g_previous_handler_calls{0};
extern "C" void previous_handler(int) { g_previous_handler_calls.fetch_add(1); }

TEST(PlatformSignals, InterruptScopeSetsItsFlagAndRestoresThePreviousHandler) {
  struct sigaction original {}, mine {};
  mine.sa_handler = previous_handler;
  sigemptyset(&mine.sa_mask);
  ASSERT_EQ(::sigaction(SIGINT, &mine, &original), 0);
  g_previous_handler_calls = 0;
  {
    std::atomic<bool> outer{false};
    InterruptScope outer_scope(&outer);
    {
      std::atomic<bool> inner{false};
      InterruptScope inner_scope(&inner);
      ASSERT_EQ(::raise(SIGINT), 0);  // delivered to this thread before raise returns
      EXPECT_TRUE(inner.load());
      EXPECT_FALSE(outer.load());
    }
    ASSERT_EQ(::raise(SIGINT), 0);
    EXPECT_TRUE(outer.load());
    EXPECT_EQ(g_previous_handler_calls.load(), 0);
  }
  ASSERT_EQ(::raise(SIGINT), 0);
  EXPECT_EQ(g_previous_handler_calls.load(), 1);
  struct sigaction now {};
  ASSERT_EQ(::sigaction(SIGINT, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, &previous_handler);
  ASSERT_EQ(::sigaction(SIGINT, &original, nullptr), 0);
}

// Exit codes of the child below: 0 all well, N: check N failed.
int shutdown_signals_child() {
  {
    ShutdownSignals signals;
    struct sigaction pipe_action {};
    ::sigaction(SIGPIPE, nullptr, &pipe_action);
    if (pipe_action.sa_handler != SIG_IGN) return 1;
    const auto start = std::chrono::steady_clock::now();
    if (signals.wait(50ms) != ShutdownRequest::kNone) return 2;
    if (std::chrono::steady_clock::now() - start < 40ms) return 3;
    // Process-directed, as from a terminal or a service manager.
    ::kill(::getpid(), SIGTERM);
    if (signals.wait(2s) != ShutdownRequest::kTerminate) return 4;
    ::kill(::getpid(), SIGINT);
    if (signals.wait(2s) != ShutdownRequest::kInterrupt) return 5;
    // A thread started now inherits the blocked set: the signal still comes to wait().
    std::thread([] { ::kill(::getpid(), SIGINT); }).join();
    if (signals.wait(2s) != ShutdownRequest::kInterrupt) return 6;
    // Pending when the object goes: discarded, not delivered.
    ::kill(::getpid(), SIGTERM);
  }
  sigset_t mask;
  ::pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  if (sigismember(&mask, SIGINT) || sigismember(&mask, SIGTERM)) return 7;
  struct sigaction pipe_action {};
  ::sigaction(SIGPIPE, nullptr, &pipe_action);
  if (pipe_action.sa_handler != SIG_DFL) return 8;
  return 0;
}

TEST(PlatformSignals, ShutdownSignalsWaitForSigtermAndSigintAndTimeOut) {
  EXPECT_EQ(in_child(shutdown_signals_child), 0);
  EXPECT_EQ(shutdown_request_name(ShutdownRequest::kInterrupt), "SIGINT");
  EXPECT_EQ(shutdown_request_name(ShutdownRequest::kTerminate), "SIGTERM");
  EXPECT_EQ(shutdown_request_name(ShutdownRequest::kNone), "");
}

// --- process.h -------------------------------------------------------------------------

using PlatformProcess = PlatformTest;

TEST(PlatformProcessSelf, ExecutablePathAndId) {
  auto exe = executable_path();
  ASSERT_TRUE(exe) << exe.status().message();
  EXPECT_EQ(exe->filename(), "moetier_unit_tests");
  EXPECT_TRUE(exe->is_absolute());
  EXPECT_EQ(process_id(), static_cast<int64_t>(::getpid()));
}

TEST_F(PlatformProcess, FindProgramSearchesPathForAnExecutableFile) {
  const fs::path sh = find_program("sh");
  ASSERT_FALSE(sh.empty());
  EXPECT_TRUE(sh.is_absolute()) << sh;
  EXPECT_EQ(sh.filename(), "sh");
  EXPECT_TRUE(find_program("moetier-no-such-program-on-path").empty());
  EXPECT_TRUE(find_program("").empty());
  // A name with a folder is taken as it is; a file that is not executable, or a folder, is
  // no program.
  EXPECT_EQ(find_program("/bin/sh"), fs::path("/bin/sh"));
  const std::string plain = write("plain", "#!/bin/sh\n");
  EXPECT_TRUE(find_program(plain).empty());
  fs::create_directories(dir_ / "tool");
  const std::string tool = write("tool2", "#!/bin/sh\nexit 0\n");
  fs::permissions(tool, fs::perms::owner_exec, fs::perm_options::add);
  EXPECT_EQ(find_program(tool), fs::path(tool));
  // Found through PATH (its empty entries mean the current folder), skipping a folder of the
  // same name; in a child, so the test's own environment stays as it was.
  const std::string dir = dir_.string();
  const int code = in_child([&] {
    ::setenv("PATH", (dir + "/nowhere:" + dir).c_str(), 1);
    if (find_program("tool2") != fs::path(dir + "/tool2")) return 1;
    if (!find_program("tool").empty()) return 2;
    ::setenv("PATH", ":/nowhere", 1);
    if (::chdir(dir.c_str()) != 0) return 3;
    return find_program("tool2") == fs::path("./tool2") ? 0 : 4;
  });
  EXPECT_EQ(code, 0);
}

TEST_F(PlatformProcess, SpawnWritesTheOutputFileAndReturnsTheExitCode) {
  const std::string out = path("child.log");
  auto child = ChildProcess::spawn({.args = {"/bin/sh", "-c", "echo hi; exit 3"}, .output_path = out});
  ASSERT_TRUE(child) << child.status().message();
  EXPECT_GT(child->id(), 0);
  const ProcessExit exit = child->wait();
  EXPECT_EQ(exit.code, 3);
  EXPECT_EQ(exit.signal, 0);
  EXPECT_FALSE(exit.success());
  EXPECT_EQ(exit.describe(), "status 3");
  EXPECT_EQ(read(out), "hi\n");
  // Reaped: poll, wait and terminate give the same exit again.
  EXPECT_EQ(child->poll()->code, 3);
  EXPECT_EQ(child->wait().code, 3);
  EXPECT_EQ(child->terminate().code, 3);
  EXPECT_FALSE(child->memory().resident.has_value());
}

TEST_F(PlatformProcess, StderrGoesToTheOutputFileToo) {
  const std::string out = path("child.log");
  auto child = ChildProcess::spawn({.args = {"sh", "-c", "echo out; echo err >&2"}, .output_path = out});
  ASSERT_TRUE(child) << child.status().message();
  EXPECT_TRUE(child->wait().success());
  EXPECT_EQ(read(out), "out\nerr\n");
}

TEST_F(PlatformProcess, PollAndMemoryWhileRunningThenTerminateWithinTheGrace) {
  auto child = ChildProcess::spawn({.args = {"sleep", "30"}, .output_path = path("sleep.log")});
  ASSERT_TRUE(child) << child.status().message();
  EXPECT_FALSE(child->poll().has_value());
  const ProcessMemory m = child->memory();
  ASSERT_TRUE(m.resident.has_value());
  EXPECT_GT(*m.resident, 0u);
  const auto start = std::chrono::steady_clock::now();
  const ProcessExit exit = child->terminate(5s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  EXPECT_EQ(exit.signal, SIGTERM);
  EXPECT_EQ(exit.code, -1);
  EXPECT_EQ(exit.describe(), "signal 15");
}

TEST_F(PlatformProcess, TerminateKillsAChildThatIgnoresTheRequest) {
  const std::string out = path("stubborn.log");
  auto child = ChildProcess::spawn({.args = {"/bin/sh", "-c", "trap '' TERM; echo ready; exec sleep 30"}, .output_path = out});
  ASSERT_TRUE(child) << child.status().message();
  // Only once the trap is set, or SIGTERM could end the shell before it.
  for (int i = 0; i < 500 && read(out) != "ready\n"; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_EQ(read(out), "ready\n");
  const auto start = std::chrono::steady_clock::now();
  const ProcessExit exit = child->terminate(300ms);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 300ms);
  EXPECT_EQ(exit.signal, SIGKILL);
}

TEST_F(PlatformProcess, ChildStartsWithDefaultSignalsWhateverThisProcessHas) {
  // Blocked SIGTERM (as under ShutdownSignals) and ignored SIGPIPE here ...
  sigset_t term, old_mask;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &old_mask), 0);
  struct sigaction ignore {}, old_pipe {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGPIPE, &ignore, &old_pipe), 0);
  auto sleeper = ChildProcess::spawn({.args = {"sleep", "30"}, .output_path = ""});
  auto piper = ChildProcess::spawn({.args = {"/bin/sh", "-c", "kill -PIPE $$; exit 0"}, .output_path = ""});
  ::sigaction(SIGPIPE, &old_pipe, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ASSERT_TRUE(sleeper);
  ASSERT_TRUE(piper);
  // ... but not in the children: SIGTERM ends the sleeper, SIGPIPE the shell.
  EXPECT_EQ(sleeper->terminate(5s).signal, SIGTERM);
  EXPECT_EQ(piper->wait().signal, SIGPIPE);
}

TEST_F(PlatformProcess, DestructorStopsARunningChild) {
  int64_t id = -1;
  {
    auto child = ChildProcess::spawn({.args = {"sleep", "30"}, .output_path = ""});
    ASSERT_TRUE(child);
    id = child->id();
    ChildProcess moved = std::move(*child);
    EXPECT_EQ(moved.id(), id);
  }
  // Ended and reaped: no such process any more.
  EXPECT_EQ(::kill(static_cast<pid_t>(id), 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(PlatformProcess, StartErrorsNameTheProgramOrTheFile) {
  auto missing = ChildProcess::spawn({.args = {"/nonexistent/moetier-no-such-program"}, .output_path = ""});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().message(), "cannot run /nonexistent/moetier-no-such-program: No such file or directory");
  auto not_on_path = run_process({"moetier-no-such-program-on-path"});
  ASSERT_FALSE(not_on_path);
  EXPECT_NE(not_on_path.status().message().find("moetier-no-such-program-on-path"), std::string::npos);
  const std::string unwritable = path("no-such-dir/child.log");
  auto bad_log = ChildProcess::spawn({.args = {"true"}, .output_path = unwritable});
  ASSERT_FALSE(bad_log);
  EXPECT_NE(bad_log.status().message().find(unwritable), std::string::npos) << bad_log.status().message();
  auto empty = ChildProcess::spawn({.args = {}, .output_path = ""});
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.status().kind(), ErrorKind::kBadInput);
}

TEST(PlatformProcessRun, RunProcessFindsTheProgramOnPathAndReturnsItsExit) {
  auto exit = run_process({"sh", "-c", "exit 5"});
  ASSERT_TRUE(exit) << exit.status().message();
  EXPECT_EQ(exit->code, 5);
  auto ok = run_process({"true"});
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->success());
}

TEST(PlatformProcessRun, ReplaceProcessRunsTheProgramAsThisProcess) {
  const int code = in_child([] {
    const Status st = replace_process({"/bin/sh", "-c", "exit 7"});
    return st ? 100 : 101;  // only reached when exec failed
  });
  EXPECT_EQ(code, 7);
  const Status st = replace_process({"/nonexistent/moetier-node"});
  ASSERT_FALSE(st);
  EXPECT_EQ(st.message(), "cannot run /nonexistent/moetier-node: No such file or directory");
  EXPECT_EQ(replace_process({}).kind(), ErrorKind::kBadInput);
}

// --- terminal.h ------------------------------------------------------------------------

// A listening socket that nobody accepts from holds backlog + 1 finished handshakes; a later
// client's handshake is dropped or its last step refused, so the listener has no more to
// accept until the client retries (a second on). cpp-httplib listens with a backlog of 5.
TEST(PlatformNet, ListenBacklogWidensAnOpenListeningSocket) {
  const auto queued_after_listen = [](int backlog, int widened) {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(s, backlog), 0);
    if (widened > 0) EXPECT_TRUE(set_listen_backlog(s, widened));
    socklen_t len = sizeof(addr);
    EXPECT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    std::vector<int> clients;
    for (int i = 0; i < 24; ++i) {
      clients.push_back(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
      const int rc = connect(clients.back(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
      EXPECT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
    }
    // Loopback handshakes take microseconds; a retry takes a second.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // What the listener holds: the connections it accepts without waiting.
    int queued = 0;
    const int flags = fcntl(s, F_GETFL);
    EXPECT_EQ(fcntl(s, F_SETFL, flags | O_NONBLOCK), 0);
    for (int fd; (fd = accept(s, nullptr, nullptr)) >= 0;) {
      ++queued;
      ::close(fd);
    }
    for (int c : clients) ::close(c);
    ::close(s);
    return queued;
  };
  const int narrow = queued_after_listen(5, 0);
  const int wide = queued_after_listen(5, 64);
  EXPECT_LE(narrow, 6);
  EXPECT_EQ(wide, 24) << "a backlog of 64 holds every one of 24 clients";
  EXPECT_FALSE(set_listen_backlog(-1, 64));  // not a socket: an error, not a crash
}

TEST(PlatformTerminal, IsTerminalAgreesWithTheStreams) {
  prepare_console();
  EXPECT_EQ(is_terminal(StandardStream::kStdin), ::isatty(0) != 0);
  EXPECT_EQ(is_terminal(StandardStream::kStdout), ::isatty(1) != 0);
  EXPECT_EQ(is_terminal(StandardStream::kStderr), ::isatty(2) != 0);
  // A file is not a terminal, whatever the test runner's streams are.
  const int code = in_child([] {
    const int fd = ::open("/dev/null", O_RDWR);
    ::dup2(fd, 2);
    return is_terminal(StandardStream::kStderr) ? 1 : 0;
  });
  EXPECT_EQ(code, 0);
}

// --- Linux /proc and /sys text (platform/linux/proc_text.h) -------------------------------

TEST(PlatformProcText, Meminfo) {
  const MemoryInfo m = procfs::parse_meminfo(
      "MemTotal:       24684084 kB\nMemFree:         1000000 kB\nMemAvailable:   12000000 kB\nBuffers: 5 kB\n");
  EXPECT_EQ(m.total, uint64_t{24684084} * 1024);
  EXPECT_EQ(m.available, uint64_t{12000000} * 1024);
  const MemoryInfo old_kernel = procfs::parse_meminfo("MemTotal: 100 kB\nMemFree: 50 kB\n");
  EXPECT_EQ(old_kernel.total, uint64_t{102400});
  EXPECT_FALSE(old_kernel.available.has_value());
  EXPECT_FALSE(procfs::parse_meminfo("").total.has_value());
  EXPECT_FALSE(procfs::field_bytes("MemTotal: lots\n", "MemTotal").has_value());
  EXPECT_FALSE(procfs::field_bytes("MemTotalX: 5 kB\n", "MemTotal").has_value());
  EXPECT_EQ(procfs::field_bytes("HugePages_Total:       7\n", "HugePages_Total"), uint64_t{7});
}

TEST(PlatformProcText, ThpEnabled) {
  EXPECT_EQ(procfs::parse_thp_enabled("always [madvise] never\n"), HugePageMode::kMadvise);
  EXPECT_EQ(procfs::parse_thp_enabled("[always] madvise never\n"), HugePageMode::kAlways);
  EXPECT_EQ(procfs::parse_thp_enabled("always madvise [never]\n"), HugePageMode::kNever);
  EXPECT_EQ(procfs::parse_thp_enabled(""), HugePageMode::kUnavailable);
  EXPECT_EQ(procfs::parse_thp_enabled("always madvise never"), HugePageMode::kUnavailable);
  EXPECT_EQ(procfs::parse_thp_enabled("[sometimes]"), HugePageMode::kUnavailable);
}

TEST(PlatformProcText, SmapsEntryOfAnAddress) {
  const std::string smaps =
      "7f0000000000-7f0000200000 rw-p 00000000 00:00 0 \n"
      "Size:               2048 kB\n"
      "Rss:                1024 kB\n"
      "AnonHugePages:         0 kB\n"
      "7f0000200000-7f0000800000 rw-p 00000000 00:00 0 \n"
      "Size:               6144 kB\n"
      "Rss:                6144 kB\n"
      "AnonHugePages:      4096 kB\n"
      "FilePmdMapped:         0 kB\n"
      "VmFlags: rd wr mr mw me ac hg\n"
      "7f0000800000-7f0000a00000 r--s 00000000 08:01 1234  /models/m.gguf\n"
      "Rss:                2048 kB\n"
      "FilePmdMapped:      2048 kB\n";
  const RegionPages second = procfs::parse_smaps_entry(smaps, 0x7f0000300000);
  EXPECT_EQ(second.resident, uint64_t{6144} * 1024);
  EXPECT_EQ(second.anon_huge_pages, uint64_t{4096} * 1024);
  EXPECT_EQ(second.file_huge_pages, uint64_t{0});
  const RegionPages first = procfs::parse_smaps_entry(smaps, 0x7f0000000000);
  EXPECT_EQ(first.resident, uint64_t{1024} * 1024);
  EXPECT_FALSE(first.file_huge_pages.has_value());
  const RegionPages file = procfs::parse_smaps_entry(smaps, 0x7f00009fffff);
  EXPECT_EQ(file.file_huge_pages, uint64_t{2048} * 1024);
  EXPECT_FALSE(procfs::parse_smaps_entry(smaps, 0x7f0000a00000).resident.has_value());  // one past the end
  EXPECT_FALSE(procfs::parse_smaps_entry("", 0x1000).resident.has_value());
}

TEST(PlatformProcText, ProcessStatus) {
  const ProcessMemory m = procfs::parse_process_status("Name:\tmoetier\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n");
  EXPECT_EQ(m.resident, uint64_t{102400} * 1024);
  EXPECT_EQ(m.peak_resident, uint64_t{204800} * 1024);
  EXPECT_FALSE(procfs::parse_process_status("Name:\tkthreadd\n").resident.has_value());
}

TEST(PlatformProcText, StatBusySeconds) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  const std::string stat =
      "cpu  300 40 60 9000 80 12 14 16 100 0\n"
      "cpu0 100 20 30 4000 40 6 7 8 50 0\n"
      "cpu1 200 20 30 5000 40 6 7 8 50 0\n"
      "intr 123\nctxt 456\n";
  const std::vector<int> cpu0 = {0}, cpu1 = {1}, both = {1, 0};
  EXPECT_DOUBLE_EQ(*procfs::stat_busy_seconds(stat, cpu0, 100), (100 + 20 + 30 + 6 + 7 + 8) / 100.0);
  EXPECT_DOUBLE_EQ(*procfs::stat_busy_seconds(stat, cpu1, 100), (200 + 20 + 30 + 6 + 7 + 8) / 100.0);
  EXPECT_DOUBLE_EQ(*procfs::stat_busy_seconds(stat, both, 100), (300 + 40 + 60 + 12 + 14 + 16) / 100.0);
  // Older kernels end the line after steal.
  EXPECT_DOUBLE_EQ(*procfs::stat_busy_seconds("cpu3 1 2 3 4 5 6 7 8\n", std::vector<int>{3}, 10),
                   (1 + 2 + 3 + 6 + 7 + 8) / 10.0);
  EXPECT_FALSE(procfs::stat_busy_seconds(stat, std::vector<int>{2}, 100).has_value());        // no such line
  EXPECT_FALSE(procfs::stat_busy_seconds("cpu0 1 2 3\n", cpu0, 100).has_value());              // short line
  EXPECT_FALSE(procfs::stat_busy_seconds("cpu0 1 2 3 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n", cpu0, 100)
                   .has_value());  // repeated
  EXPECT_FALSE(procfs::stat_busy_seconds(stat, std::vector<int>{}, 100).has_value());
  EXPECT_FALSE(procfs::stat_busy_seconds(stat, cpu0, 0).has_value());
  // Only the all-CPUs line, a non-number, a negative count, a cpu line with no number, nothing.
  for (const std::string text : {"cpu 1 2 3 4 5 6 7 8\n", "cpu0 1 2 x 4 5 6 7 8\n", "cpu0 -1 2 3 4 5 6 7 8\n",
                                 "cpux 1\n", ""}) {
    EXPECT_FALSE(procfs::stat_busy_seconds(text, cpu0, 100).has_value()) << text;
  }
  // The all-CPUs line beside the per-CPU ones is not a CPU.
  EXPECT_DOUBLE_EQ(*procfs::stat_busy_seconds("cpu 1 2 3 4 5 6 7 8\ncpu3 1 2 3 4 5 6 7 8\n", std::vector<int>{3}, 10),
                   (1 + 2 + 3 + 6 + 7 + 8) / 10.0);
}

TEST(PlatformProcText, Cpuinfo) {
  const std::string two_cores_four_threads =
      "processor\t: 0\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nphysical id\t: 0\ncore id\t\t: 0\n\n"
      "processor\t: 1\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nphysical id\t: 0\ncore id\t\t: 0\n\n"
      "processor\t: 2\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nphysical id\t: 0\ncore id\t\t: 1\n\n"
      "processor\t: 3\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nphysical id\t: 0\ncore id\t\t: 1\n\n";
  EXPECT_EQ(procfs::cpuinfo_model_name(two_cores_four_threads), "AMD EPYC 7B13 64-Core Processor");
  EXPECT_EQ(procfs::cpuinfo_core_count(two_cores_four_threads), 2);
  // Two packages with the same core ids: four cores.
  EXPECT_EQ(procfs::cpuinfo_core_count("physical id : 0\ncore id : 0\nphysical id : 0\ncore id : 1\n"
                                       "physical id : 1\ncore id : 0\nphysical id : 1\ncore id : 1\n"),
            4);
  // arm64 names neither.
  const std::string arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n";
  EXPECT_EQ(procfs::cpuinfo_model_name(arm), "");
  EXPECT_EQ(procfs::cpuinfo_core_count(arm), 0);
  EXPECT_EQ(procfs::cpuinfo_model_name("model\t\t: 85\nmodel name\t: Intel Xeon  \n"), "Intel Xeon");
}

TEST(PlatformProcText, CpuinfoCores) {
  // Two cores with two threads each, numbered as Intel numbers them (siblings 0 and 2).
  const std::string smt =
      "processor\t: 0\nphysical id\t: 0\ncore id\t\t: 0\n\n"
      "processor\t: 1\nphysical id\t: 0\ncore id\t\t: 1\n\n"
      "processor\t: 2\nphysical id\t: 0\ncore id\t\t: 0\n\n"
      "processor\t: 3\nphysical id\t: 0\ncore id\t\t: 1\n\n";
  EXPECT_EQ(procfs::cpuinfo_cores(smt), (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  // Two packages with the same core ids stay apart.
  EXPECT_EQ(procfs::cpuinfo_cores("processor : 0\nphysical id : 0\ncore id : 0\n"
                                  "processor : 1\nphysical id : 1\ncore id : 0\n"),
            (std::vector<std::vector<int>>{{0}, {1}}));
  // arm64 names no cores; a core id without its processor number is malformed.
  EXPECT_TRUE(procfs::cpuinfo_cores("processor\t: 0\nBogoMIPS\t: 50.00\n").empty());
  EXPECT_TRUE(procfs::cpuinfo_cores("core id : 0\n").empty());
}

// A made-up machine's /proc and /sys under a temporary root.
class FakeCpuRoot {
 public:
  FakeCpuRoot() : root_(std::filesystem::temp_directory_path() / fmt::format("moetier-cpu-{}", ::getpid())) {
    std::filesystem::remove_all(root_);
  }
  ~FakeCpuRoot() { std::filesystem::remove_all(root_); }
  void write(const std::string& path, const std::string& text) {
    const std::filesystem::path p = root_ / path;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

// /proc/cpuinfo blocks: (processor, core id) pairs of package 0.
std::string cpuinfo_of(const std::vector<std::pair<int, int>>& cpus) {
  std::string text;
  for (const auto& [cpu, core] : cpus) {
    text += fmt::format("processor\t: {}\nmodel name\t: 13th Gen Intel(R) Core(TM) i7-13620H\nphysical id\t: 0\n"
                        "core id\t\t: {}\n\n",
                        cpu, core);
  }
  return text;
}

TEST(PlatformCpu, TopologyOfAHybridLaptopFromItsFiles) {
  // i7-13620H: P-cores with SMT at CPUs 0-11 (siblings adjacent), E-cores at 12-15.
  FakeCpuRoot fake;
  std::vector<std::pair<int, int>> cpus;
  for (int c = 0; c < 12; ++c) cpus.push_back({c, 4 * (c / 2)});
  for (int c = 12; c < 16; ++c) cpus.push_back({c, 32 + (c - 12)});
  fake.write("proc/cpuinfo", cpuinfo_of(cpus));
  fake.write("sys/devices/system/cpu/online", "0-15\n");
  fake.write("sys/devices/cpu_core/cpus", "0-11\n");
  fake.write("sys/devices/cpu_atom/cpus", "12-15\n");
  CpuTopology t = linux_impl::read_cpu_topology(fake.root(), 99);
  EXPECT_EQ(t.logical, 16);
  EXPECT_EQ(t.physical, 10);
  EXPECT_EQ(t.performance, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(t.efficiency, (std::vector<int>{12, 13, 14, 15}));
  ASSERT_EQ(t.cores.size(), 10u);
  EXPECT_EQ(t.cores[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(t.cores[6], std::vector<int>{12});

  // SMT off: the siblings are offline (cpuinfo and online list only the first threads).
  cpus.clear();
  for (int c = 0; c < 12; c += 2) cpus.push_back({c, 4 * (c / 2)});
  for (int c = 12; c < 16; ++c) cpus.push_back({c, 32 + (c - 12)});
  fake.write("proc/cpuinfo", cpuinfo_of(cpus));
  fake.write("sys/devices/system/cpu/online", "0,2,4,6,8,10,12-15\n");
  fake.write("sys/devices/cpu_core/cpus", "0,2,4,6,8,10\n");
  t = linux_impl::read_cpu_topology(fake.root(), 99);
  EXPECT_EQ(t.logical, 10);
  EXPECT_EQ(t.physical, 10);
  EXPECT_EQ(t.performance, (std::vector<int>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(t.cores[1], std::vector<int>{2});
}

TEST(PlatformCpu, TopologyOfANonHybridMachineFromItsFiles) {
  FakeCpuRoot fake;
  fake.write("proc/cpuinfo", cpuinfo_of({{0, 0}, {1, 1}, {2, 0}, {3, 1}}));
  fake.write("sys/devices/system/cpu/online", "0-3\n");
  CpuTopology t = linux_impl::read_cpu_topology(fake.root(), 99);
  EXPECT_EQ(t.logical, 4);
  EXPECT_EQ(t.physical, 2);
  EXPECT_TRUE(t.performance.empty());
  EXPECT_TRUE(t.efficiency.empty());
  EXPECT_EQ(t.cores, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  // Only one PMU list (not hybrid): no sets. No online list: the fallback count.
  fake.write("sys/devices/cpu_core/cpus", "0-3\n");
  std::filesystem::remove(std::filesystem::path(fake.root()) / "sys/devices/system/cpu/online");
  t = linux_impl::read_cpu_topology(fake.root(), 4);
  EXPECT_EQ(t.logical, 4);
  EXPECT_TRUE(t.performance.empty());
  // Nothing readable at all: the fallback, one core per CPU.
  t = linux_impl::read_cpu_topology(fake.root() + "/absent", 3);
  EXPECT_EQ(t.logical, 3);
  EXPECT_EQ(t.physical, 3);
  EXPECT_TRUE(t.cores.empty());
}

TEST(PlatformProcText, CpuList) {
  EXPECT_EQ(procfs::parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(procfs::parse_cpu_list("5"), (std::vector<int>{5}));
  EXPECT_EQ(procfs::parse_cpu_list("16-23\n"), (std::vector<int>{16, 17, 18, 19, 20, 21, 22, 23}));
  EXPECT_FALSE(procfs::parse_cpu_list("").has_value());
  EXPECT_FALSE(procfs::parse_cpu_list("\n").has_value());
  EXPECT_FALSE(procfs::parse_cpu_list("3-1").has_value());
  EXPECT_FALSE(procfs::parse_cpu_list("0,,2").has_value());
  EXPECT_FALSE(procfs::parse_cpu_list("0-x").has_value());
  EXPECT_FALSE(procfs::parse_cpu_list("0-999999999").has_value());
}

TEST(PlatformProcText, LockErrorMessage) {
  EXPECT_EQ(procfs::lock_error_message(uint64_t{3} << 30, "Cannot allocate memory", "8.0 MiB"),
            "cannot lock 3.00 GiB in RAM: Cannot allocate memory (locked-memory limit 8.0 MiB); raise it with "
            "'ulimit -l unlimited' (or memlock in /etc/security/limits.conf)");
}

}  // namespace
}  // namespace moetier::platform
