// Fault injection for both tiers of the compile cache: entries swapped between programs, damaged
// or crafted payloads, folders and entries others could write, odd files, stale temporaries, and
// the in-memory bound.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "cpu_client.h"
#include "engine/disk_cache.h"
#include "engine/executable_cache.h"

namespace torchtpu::engine {
namespace {

namespace fs = std::filesystem;
using testing::cpu_client;

std::string binary_program(const std::string& op, int n) {
  std::string t = "tensor<" + std::to_string(n) + "xf32>";
  return "module @m {\n  func.func public @main(%a: " + t + ", %b: " + t + ") -> (" + t +
         ") {\n    %0 = \"stablehlo." + op + "\"(%a, %b) : (" + t + ", " + t + ") -> " + t +
         "\n    \"func.return\"(%0) : (" + t + ") -> ()\n  }\n}\n";
}

const std::string kAdd = binary_program("add", 3);
const std::string kSub = binary_program("subtract", 3);

std::vector<float> run(const pjrt::Executable& exe, std::vector<float> a, std::vector<float> b) {
  const pjrt::Client& client = *cpu_client();
  auto n = static_cast<int64_t>(a.size());
  auto ba = client.buffer_from_host(a.data(), PJRT_Buffer_Type_F32, {n}, client.device(0));
  auto bb = client.buffer_from_host(b.data(), PJRT_Buffer_Type_F32, {n}, client.device(0));
  auto out = exe.execute({ba->raw(), bb->raw()}, client.device(0));
  std::vector<float> host(a.size());
  out.at(0)->to_host(host.data(), host.size() * sizeof(float));
  return host;
}

std::string compiled(const std::string& text) {
  return cpu_client()->compile(text, pjrt::portable_compile_options())->serialize();
}

class CompileCache : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("torchtpu-cache-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir_ = (root_ / "cache").string();
    DiskCache::set_warning_handler([this](const std::string& m) { warnings_.push_back(m); });
  }
  void TearDown() override {
    DiskCache::set_warning_handler(nullptr);
    fs::permissions(root_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(root_);
  }
  std::unique_ptr<DiskCache> disk(uint64_t max_bytes = uint64_t{1} << 30) {
    return std::make_unique<DiskCache>(dir_, max_bytes, "salt");
  }
  std::string entry(const DiskCache& d, const std::string& text) {
    return dir_ + "/" + d.key(text) + ".xla";
  }
  bool warned(const std::string& part) const {
    for (const std::string& w : warnings_) {
      if (w.find(part) != std::string::npos) return true;
    }
    return false;
  }
  static mode_t mode_of(const std::string& path) {
    struct stat st{};
    ::stat(path.c_str(), &st);
    return st.st_mode & 07777;
  }

  fs::path root_;
  std::string dir_;
  std::vector<std::string> warnings_;
};

TEST_F(CompileCache, FolderIsPrivateAndEntriesAreOwnerOnlyWhateverTheUmask) {
  mode_t old = ::umask(0);
  auto d = disk();
  d->store(kAdd, "payload");
  ::umask(old);
  EXPECT_EQ(mode_of(dir_), 0700u);
  EXPECT_EQ(mode_of(entry(*d, kAdd)), 0600u);
  EXPECT_EQ(d->load(kAdd), std::optional<std::string>("payload"));
}

TEST_F(CompileCache, EntryOfAnotherProgramUnderThisName_IsDiscardedNotServed) {
  auto d = disk();
  d->store(kAdd, "add's executable");
  d->store(kSub, "sub's executable");
  fs::copy_file(entry(*d, kSub), entry(*d, kAdd), fs::copy_options::overwrite_existing);
  EXPECT_EQ(d->load(kAdd), std::nullopt);
  EXPECT_TRUE(warned("was written for a different program")) << warnings_.at(0);
  EXPECT_EQ(d->stats().bad_entries, 1);
  EXPECT_FALSE(fs::exists(entry(*d, kAdd)));
  EXPECT_EQ(d->load(kSub), std::optional<std::string>("sub's executable"));
}

TEST_F(CompileCache, ChecksumCoversThePayload) {
  auto d = disk();
  d->store(kAdd, std::string(100, 'x'));
  std::string path = entry(*d, kAdd);
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-1, std::ios::end);
  f.put('y');
  f.close();
  EXPECT_EQ(d->load(kAdd), std::nullopt);
  EXPECT_TRUE(warned("is corrupted or truncated"));
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(CompileCache, DirectoryFifoAndSymlinkEntriesAreSkippedWithAWarning) {
  auto d = disk();
  d->store("warm up", "x");  // creates the folder
  d->store("victim", "victim's executable");
  ::mkdir(entry(*d, "a directory").c_str(), 0700);
  ASSERT_EQ(::mkfifo(entry(*d, "a fifo").c_str(), 0600), 0);
  fs::create_symlink(entry(*d, "victim"), entry(*d, "a symlink"));
  EXPECT_EQ(d->load("a directory"), std::nullopt);  // and no exception
  EXPECT_EQ(d->load("a fifo"), std::nullopt);       // and no hang
  EXPECT_EQ(d->load("a symlink"), std::nullopt);
  EXPECT_TRUE(warned("is not a regular file"));
  EXPECT_TRUE(warned("is a symbolic link"));
  EXPECT_EQ(d->stats().bad_entries, 3);
  // The odd files are gone, what the symlink pointed at is not.
  EXPECT_FALSE(fs::exists(fs::symlink_status(entry(*d, "a fifo"))));
  EXPECT_FALSE(fs::exists(fs::symlink_status(entry(*d, "a symlink"))));
  EXPECT_EQ(d->load("victim"), std::optional<std::string>("victim's executable"));
  d->store("a directory", "y");  // the now empty directory was removed: the entry can be written
  EXPECT_EQ(d->load("a directory"), std::optional<std::string>("y"));
}

TEST_F(CompileCache, FolderOthersCanWriteIsRefusedOnceAndRunsUncached) {
  fs::create_directories(dir_);
  ::chmod(dir_.c_str(), 0777);
  auto d = disk();
  d->store(kAdd, "payload");
  EXPECT_EQ(d->load(kAdd), std::nullopt);
  EXPECT_EQ(d->load(kSub), std::nullopt);
  EXPECT_TRUE(fs::is_empty(dir_));
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("is writable by other users (mode 0777)"), std::string::npos)
      << warnings_[0];
}

TEST_F(CompileCache, FolderOfAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the folder away";
  fs::create_directories(dir_);
  ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0);
  auto d = disk();
  EXPECT_EQ(d->load(kAdd), std::nullopt);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("is owned by uid 65534, not by this user"), std::string::npos);
}

TEST_F(CompileCache, EntriesOthersCanWriteOrOwnAreRefusedWithOneWarning) {
  auto d = disk();
  d->store(kAdd, "add");
  d->store(kSub, "sub");
  ::chmod(entry(*d, kAdd).c_str(), 0666);
  EXPECT_EQ(d->load(kAdd), std::nullopt);
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(entry(*d, kSub).c_str(), 65534, 65534), 0);
    EXPECT_EQ(d->load(kSub), std::nullopt);
  }
  EXPECT_EQ(d->stats().refused, ::geteuid() == 0 ? 2 : 1);
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_NE(warnings_[0].find("with mode 0666"), std::string::npos) << warnings_[0];
  d->store(kAdd, "add, rewritten");  // a recompiled entry replaces the refused one
  EXPECT_EQ(d->load(kAdd), std::optional<std::string>("add, rewritten"));
}

TEST_F(CompileCache, TemporaryFilesCountAgainstTheBoundAndStaleOnesAreRemoved) {
  auto d = disk(1000);
  d->store("old", std::string(300, 'o'));
  std::string fresh = dir_ + "/x.xla.tmp.1.fresh", stale = dir_ + "/x.xla.tmp.1.stale";
  std::ofstream(fresh) << std::string(600, 't');
  std::ofstream(stale) << std::string(5000, 't');
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(1));
  d->store("new", std::string(300, 'n'));  // old + new + fresh temporary > 1000: old goes
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(fresh));  // a writer may still be busy with it
  EXPECT_EQ(d->load("old"), std::nullopt);
  EXPECT_TRUE(d->load("new").has_value());
}

TEST_F(CompileCache, CraftedPayloadThatCannotRunIsDiscardedAndRecompiled) {
  // A self-consistent entry (right key, right checksum) holding another signature's executable:
  // no checksum can tell; the failure to run is what reveals it.
  auto d = std::shared_ptr<DiskCache>(disk());
  const std::string wide = binary_program("add", 4);
  d->store(kAdd, compiled(wide));
  ExecutableCache cache;
  cache.set_disk_cache(d);
  hlo::Fingerprint key;
  key.add(std::string_view("add3"));
  auto emit = [] { return kAdd; };
  auto exe = cache.get_or_compile(key, emit, *cpu_client());
  EXPECT_EQ(cache.stats().disk_loads, 1);
  EXPECT_THROW(run(*exe, {1, 2, 3}, {10, 20, 30}), pjrt::Error);
  auto fixed = cache.recompile_failed(key, exe.get(), "bad", emit, *cpu_client());
  ASSERT_NE(fixed, nullptr);
  EXPECT_TRUE(warned("failed to run (bad); discarding its entry and recompiling it"));
  EXPECT_EQ(run(*fixed, {1, 2, 3}, {10, 20, 30}), (std::vector<float>{11, 22, 33}));
  // The entry now holds the right program, and the cache serves the fixed executable.
  auto reloaded = cpu_client()->deserialize(*d->load(kAdd));
  EXPECT_EQ(run(*reloaded, {1, 2, 3}, {1, 1, 1}), (std::vector<float>{2, 3, 4}));
  EXPECT_EQ(cache.get_or_compile(key, emit, *cpu_client()), fixed);
  // One compiled here that fails is the caller's error to report.
  EXPECT_EQ(cache.recompile_failed(key, fixed.get(), "bad", emit, *cpu_client()), nullptr);
}

TEST_F(CompileCache, MemoryTierEvictsTheLeastRecentlyUsed) {
  ExecutableCache cache;
  std::vector<hlo::Fingerprint> keys(3);
  for (int i = 0; i < 3; ++i) keys[i].add(int64_t{i});
  auto get = [&](int i) {
    return cache.get_or_compile(keys[i], [i] { return binary_program("add", i + 1); },
                                *cpu_client());
  };
  auto first = get(0);
  get(1);
  int64_t one = cache.stats().bytes / 2;
  EXPECT_GT(one, 0);
  cache.set_max_bytes(static_cast<uint64_t>(2 * one));
  get(0);  // now 1 is the least recently used
  get(2);
  CacheStats s = cache.stats();
  EXPECT_EQ(s.evictions, 1);
  EXPECT_EQ(s.entries, 2);
  EXPECT_EQ(s.bytes, 2 * one);
  bool hit = false;
  EXPECT_EQ(cache.get_or_compile(keys[0], [] { return std::string(); }, *cpu_client(), &hit),
            first);
  EXPECT_TRUE(hit);
  cache.get_or_compile(keys[1], [] { return binary_program("add", 2); }, *cpu_client(), &hit);
  EXPECT_FALSE(hit);
  // An evicted executable stays valid for whoever still holds it.
  cache.set_max_bytes(0);
  get(2);
  EXPECT_EQ(cache.stats().entries, 1);
  EXPECT_EQ(run(*first, {1}, {2}), (std::vector<float>{3}));
}

}  // namespace
}  // namespace torchtpu::engine
