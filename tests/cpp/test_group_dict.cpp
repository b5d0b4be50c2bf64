// group_dict derivation (docs/group_dict.md) and its E60038 errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tbex/errors.h"
#include "tbex/group_dict.h"

namespace {

struct GdCase {
  int64_t cin, cout, groups;
  int64_t mag, real_g, cin1_g, cout_g;
};

// Expected values computed by hand from the formulas of docs/group_dict.md:
//   mag = min(lcm(lcm(cin_pg,16)/cin_pg, lcm(cout_pg,16)/cout_pg), groups)
//   cin1_g = ceil(mag*cin_pg/16), cout_g = ceil(mag*cout_pg/16)*16, real_g = ceil(groups/mag)
const std::vector<GdCase> kCases = {
    // groups = 1: mag 1, real_g 1, cin1_g ceil(Cin/16), cout_g align16(Cout)
    {16, 16, 1, 1, 1, 1, 16},
    {1, 1, 1, 1, 1, 1, 16},
    {20, 33, 1, 1, 1, 2, 48},
    {512, 512, 1, 1, 1, 32, 512},
    {3, 64, 1, 1, 1, 1, 64},
    {17, 15, 1, 1, 1, 2, 16},
    // the examples of docs/group_dict.md and docs/layouts.md
    {20, 56, 4, 4, 1, 2, 64},      // cin_pg 5, cout_pg 14: mag0 16, mag1 8 -> 16 -> min 4
    {256, 256, 256, 16, 16, 1, 16},  // depthwise
    {320, 320, 320, 16, 20, 1, 16},  // depthwise (fz [320,1,1,2,2] -> [80,1,16,16])
    // others
    {64, 128, 2, 1, 2, 2, 64},     // cin_pg 32, cout_pg 64: aligned, no packing
    {24, 24, 3, 2, 2, 1, 16},      // cin_pg 8: mag0 2, mag1 2 -> 2; real_g ceil(3/2)
    {24, 48, 24, 16, 2, 1, 32},    // cin_pg 1, cout_pg 2: mag0 16, mag1 8 -> 16
    {12, 18, 6, 6, 1, 1, 32},      // cin_pg 2, cout_pg 3: mag0 8, mag1 16 -> 16 -> min 6
    {36, 36, 3, 3, 1, 3, 48},      // cin_pg 12: mag0 4, mag1 4 -> min 3
    {40, 40, 20, 8, 3, 1, 16},     // cin_pg 2: mag 8, real_g ceil(20/8)=3, cin1_g 1, cout_g 16
    {96, 96, 2, 1, 2, 3, 48},      // cin_pg 48: aligned
    {40, 80, 4, 4, 1, 3, 80},      // cin_pg 10, cout_pg 20: mag0 8, mag1 4 -> 8 -> min 4
};

TEST(GroupDict, Table) {
  for (const GdCase& c : kCases) {
    SCOPED_TRACE("Cin=" + std::to_string(c.cin) + " Cout=" + std::to_string(c.cout) +
                 " groups=" + std::to_string(c.groups));
    const tbex::GroupDict gd = tbex::derive_group_dict(c.cin, c.cout, c.groups);
    EXPECT_EQ(gd.mag_factor, c.mag);
    EXPECT_EQ(gd.real_g, c.real_g);
    EXPECT_EQ(gd.cin1_g, c.cin1_g);
    EXPECT_EQ(gd.cout_g, c.cout_g);
    EXPECT_EQ(gd.cin_ori, c.cin);
    EXPECT_EQ(gd.cout_ori, c.cout);
  }
}

TEST(GroupDict, Groups1MatchesAlignment) {
  for (int64_t cin = 1; cin <= 70; cin += 3) {
    for (int64_t cout = 1; cout <= 70; cout += 5) {
      const tbex::GroupDict gd = tbex::derive_group_dict(cin, cout, 1);
      EXPECT_EQ(gd.mag_factor, 1);
      EXPECT_EQ(gd.real_g, 1);
      EXPECT_EQ(gd.cin1_g, (cin + 15) / 16);
      EXPECT_EQ(gd.cout_g, (cout + 15) / 16 * 16);
    }
  }
}

TEST(GroupDict, EqualityAndToString) {
  const tbex::GroupDict a = tbex::derive_group_dict(20, 56, 4);
  tbex::GroupDict b = a;
  EXPECT_TRUE(a == b);
  b.cout_g = 48;
  EXPECT_FALSE(a == b);
  const std::string s = a.to_string();
  EXPECT_NE(s.find("real_g: 1"), std::string::npos) << s;
  EXPECT_NE(s.find("mag_factor: 4"), std::string::npos) << s;
  EXPECT_NE(s.find("cin1_g: 2"), std::string::npos) << s;
  EXPECT_NE(s.find("cout_g: 64"), std::string::npos) << s;
  EXPECT_NE(s.find("cin_ori: 20"), std::string::npos) << s;
  EXPECT_NE(s.find("cout_ori: 56"), std::string::npos) << s;
}

struct BadCase {
  int64_t cin, cout, groups;
  const char* why;
};

TEST(GroupDict, E60038Errors) {
  const std::vector<BadCase> bad = {
      {16, 16, 0, "groups <= 0"},     {16, 16, -2, "groups <= 0"},
      {4, 8, 8, "groups > Cin"},      {8, 4, 8, "groups > Cout"},
      {10, 12, 4, "Cin % groups"},    {12, 10, 4, "Cout % groups"},
      {20, 56, 3, "Cin % groups"},    {21, 50, 7, "Cout % groups"},
  };
  for (const BadCase& c : bad) {
    SCOPED_TRACE(std::string(c.why) + ": Cin=" + std::to_string(c.cin) +
                 " Cout=" + std::to_string(c.cout) + " groups=" + std::to_string(c.groups));
    try {
      tbex::derive_group_dict(c.cin, c.cout, c.groups);
      ADD_FAILURE() << "no error thrown";
    } catch (const tbex::UserError& e) {
      EXPECT_EQ(e.code(), "E60038");
      EXPECT_EQ(e.param(), "groups");
      const std::string msg = e.what();
      EXPECT_NE(msg.find("E60038"), std::string::npos) << msg;
      EXPECT_NE(msg.find("groups=" + std::to_string(c.groups)), std::string::npos) << msg;
      EXPECT_NE(msg.find("Cin=" + std::to_string(c.cin)), std::string::npos) << msg;
      EXPECT_NE(msg.find("Cout=" + std::to_string(c.cout)), std::string::npos) << msg;
    }
  }
}

TEST(GroupDict, UserErrorIsInvalidArgument) {
  EXPECT_THROW(tbex::derive_group_dict(16, 16, 0), std::invalid_argument);
}

}  // namespace
