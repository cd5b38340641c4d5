#include "shared/refusal.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace hrx {
namespace {

TEST(RefusalTest, CarriesTheCataloguedCodeTokenAndPayload) {
  const absl::Status status =
      Refusal(Reason::kStreamBusy, "64 wait. Fix: wait.");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), "stream_busy: 64 wait. Fix: wait.");
  EXPECT_EQ(ReasonOf(status), Reason::kStreamBusy);
  EXPECT_EQ(ReasonToken(status), "stream_busy");
}

TEST(RefusalTest, AnOverriddenCodeKeepsTheReason) {
  const absl::Status status =
      Refusal(Reason::kHipError, "x. Fix: y.", absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReasonOf(status), Reason::kHipError);
}

TEST(RefusalTest, TheReasonSurvivesPropagation) {
  absl::StatusOr<int> failed = Refusal(Reason::kUnknownEvent, "e. Fix: f.");
  const absl::Status copied = failed.status();
  EXPECT_EQ(ReasonToken(copied), "unknown_event");
}

TEST(RefusalTest, AStatusMadeElsewhereHasNoReason) {
  // Text that looks like a token is not one: only the payload counts.
  const absl::Status status = absl::InternalError("stream_busy: forged");
  EXPECT_FALSE(ReasonOf(status).has_value());
  EXPECT_EQ(ReasonToken(status), "other");
}

TEST(RefusalTest, TokensAreUniqueSnakeCaseAndNotOk) {
  std::set<std::string_view> seen;
  const std::regex snake("[a-z][a-z0-9]*(_[a-z0-9]+)*");
  for (const ReasonInfo& info : AllReasons()) {
    EXPECT_TRUE(seen.insert(info.token).second) << info.token;
    EXPECT_TRUE(std::regex_match(std::string(info.token), snake)) << info.token;
    EXPECT_NE(info.code, absl::StatusCode::kOk) << info.token;
    EXPECT_EQ(&InfoOf(info.reason), &info);
  }
}

std::string ReadDoc(const std::string& name) {
  const char* root = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (root == nullptr || workspace == nullptr) return "";
  std::ifstream in(absl::StrCat(root, "/", workspace, "/docs/", name));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string_view OriginHeading(Origin origin) {
  switch (origin) {
    case Origin::kDaemon:
      return "### Sent by hrxd";
    case Origin::kClient:
      return "### Refused by libhrx and hrxctl";
    case Origin::kStartup:
      return "### hrxd refuses to start";
  }
  return "";
}

// The error tables docs/protocol.md should hold, from the catalogue.
std::string ExpectedTables() {
  std::string text;
  for (Origin origin : {Origin::kDaemon, Origin::kClient, Origin::kStartup}) {
    std::map<std::string, std::vector<std::string_view>> by_code;
    for (const ReasonInfo& info : AllReasons()) {
      if (info.origin != origin) continue;
      by_code[absl::StatusCodeToString(info.code)].push_back(info.token);
    }
    absl::StrAppend(&text, std::string(OriginHeading(origin)),
                    "\n\n| code | reasons |\n", "|---|---|\n");
    for (const auto& [code, tokens] : by_code) {
      absl::StrAppend(&text, "| ", code, " |");
      for (size_t i = 0; i < tokens.size(); ++i) {
        absl::StrAppend(&text, i == 0 ? " `" : ", `", std::string(tokens[i]),
                        "`");
      }
      absl::StrAppend(&text, " |\n");
    }
    text += "\n";
  }
  return text;
}

TEST(RefusalCatalogueTest, ProtocolDocListsExactlyTheCatalogue) {
  const std::string doc = ReadDoc("protocol.md");
  ASSERT_FALSE(doc.empty()) << "docs/protocol.md is not in the runfiles";
  const std::string expected = ExpectedTables();
  EXPECT_NE(doc.find(expected), std::string::npos)
      << "docs/protocol.md's error tables differ from shared/refusal.cc. "
         "Fix: replace them with:\n\n"
      << expected;
}

}  // namespace
}  // namespace hrx
