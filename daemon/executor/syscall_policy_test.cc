// The executor's system call allowlist: docs/security.md lists exactly the
// calls the table allows (and with which check), and the compiled program
// stays within seccomp's limits.
#include "daemon/executor/syscall_policy.h"

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace hrx::executor {
namespace {

std::string ReadSecurityDoc() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  std::ifstream in(std::string(srcdir ? srcdir : ".") + "/" +
                   (workspace ? workspace : "") + "/docs/security.md");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const char* CheckName(SyscallCheck check) {
  switch (check) {
    case SyscallCheck::kAllow:
      return "any";
    case SyscallCheck::kSelf:
      return "itself";
    case SyscallCheck::kSelfOrZero:
      return "itself or 0";
    case SyscallCheck::kThreadsOnly:
      return "threads";
    case SyscallCheck::kIoctlSafe:
      return "no owner/terminal requests";
    case SyscallCheck::kFcntlSafe:
      return "no F_SETOWN/F_SETSIG";
    case SyscallCheck::kPrctlSafe:
      return "not dumpable/ptracer";
    case SyscallCheck::kEnosys:
      return "ENOSYS";
  }
  return "?";
}

TEST(SyscallPolicyTest, TheDocsListExactlyWhatTheFilterAllows) {
  const std::string doc = ReadSecurityDoc();
  ASSERT_FALSE(doc.empty()) << "docs/security.md not found";
  // Lines "| `name` | check |" between the two markers.
  const size_t begin = doc.find("<!-- syscall-allowlist -->");
  const size_t end = doc.find("<!-- /syscall-allowlist -->");
  ASSERT_NE(begin, std::string::npos);
  ASSERT_NE(end, std::string::npos);
  std::map<std::string, std::string> documented;
  const std::regex row(R"(\| `([a-z0-9_]+)` \| ([^|]+) \|)");
  std::istringstream lines(doc.substr(begin, end - begin));
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, row)) {
      std::string check = match[2];
      while (!check.empty() && check.back() == ' ') check.pop_back();
      documented[match[1]] = check;
    }
  }
  std::map<std::string, std::string> allowed;
  for (const SyscallRule& rule : ExecutorSyscallPolicy()) {
    allowed[rule.name] = CheckName(rule.check);
  }
  EXPECT_EQ(documented, allowed)
      << "docs/security.md's allowlist table and syscall_policy.cc differ";
}

TEST(SyscallPolicyTest, TheProgramFitsSeccompAndDeniesByDefault) {
  const std::vector<sock_filter> program = CompileSyscallPolicy(1234);
  ASSERT_FALSE(program.empty());
  EXPECT_LE(program.size(), 4096u);  // BPF_MAXINSNS
  // The last instruction refuses whatever no rule allowed.
  EXPECT_EQ(program.back().code, BPF_RET | BPF_K);
  EXPECT_NE(program.back().k, static_cast<uint32_t>(0x7fff0000));
  std::set<int> numbers;
  for (const SyscallRule& rule : ExecutorSyscallPolicy()) {
    EXPECT_TRUE(numbers.insert(rule.number).second) << rule.name;
  }
}

}  // namespace
}  // namespace hrx::executor
