// What the C++ client's test programs share: the broker world (a
// tests/client/conformance_harness child on the private PostgreSQL of
// scripts/test.sh), a main broker started once per program, and TAP lines
// for scripts/test.sh's tally.
#ifndef QUEEN_CPP_TEST_SUPPORT_HPP
#define QUEEN_CPP_TEST_SUPPORT_HPP

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace queen_test {

// The harness process: one command line in, one JSON line out.
class Harness {
public:
    static Harness &get(); // started on first use ($QUEEN_CONFORMANCE_HARNESS)
    nlohmann::json command(const std::string &line); // throws on {"error":...}
    // A broker with extra environment entries: {id, url}.
    nlohmann::json start(const std::vector<std::string> &env = {});
    void stop(int id);
    std::string dead_url();
    void sql(const std::string &text);
    // The broker every test shares, started on first use.
    const std::string &main_url();
    ~Harness();

private:
    Harness();
    int to_ = -1, from_ = -1, pid_ = -1;
    std::string main_url_;
};

// A fresh [a-z0-9] token for unique names.
std::string unique_token();

} // namespace queen_test

#endif
