#include "support.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace queen_test {

Harness &Harness::get()
{
    static Harness h;
    return h;
}

Harness::Harness()
{
    const char *bin = std::getenv("QUEEN_CONFORMANCE_HARNESS");
    if (bin == nullptr)
        throw std::runtime_error("QUEEN_CONFORMANCE_HARNESS is not set: run through scripts/test.sh");
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0)
        throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ < 0)
        throw std::runtime_error("fork");
    if (pid_ == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        execl(bin, bin, static_cast<char *>(nullptr));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
}

Harness::~Harness()
{
    // End of input: the harness stops every broker it started, then exits.
    if (to_ >= 0)
        close(to_);
    if (from_ >= 0)
        close(from_);
    if (pid_ > 0)
        waitpid(pid_, nullptr, 0);
}

nlohmann::json Harness::command(const std::string &line)
{
    std::string out = line + "\n";
    if (write(to_, out.data(), out.size()) != static_cast<ssize_t>(out.size()))
        throw std::runtime_error("harness: write failed");
    std::string reply;
    char c;
    while (read(from_, &c, 1) == 1 && c != '\n')
        reply += c;
    if (reply.empty())
        throw std::runtime_error("harness: no answer to " + line);
    auto j = nlohmann::json::parse(reply);
    if (j.contains("error"))
        throw std::runtime_error("harness: " + line + ": " + j["error"].get<std::string>());
    return j;
}

nlohmann::json Harness::start(const std::vector<std::string> &env)
{
    std::string line = "start";
    for (const auto &e : env)
        line += " " + e;
    return command(line);
}

void Harness::stop(int id) { command("stop " + std::to_string(id)); }

std::string Harness::dead_url() { return command("dead_url")["url"].get<std::string>(); }

void Harness::sql(const std::string &text) { command("sql " + text); }

const std::string &Harness::main_url()
{
    if (main_url_.empty())
        main_url_ = start()["url"].get<std::string>();
    return main_url_;
}

std::string unique_token()
{
    static std::mt19937_64 rng(std::random_device{}() ^
                               static_cast<unsigned long long>(
                                   std::chrono::steady_clock::now().time_since_epoch().count()));
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::string s;
    for (int i = 0; i < 12; i++)
        s += alphabet[rng() % 36];
    return s;
}

} // namespace queen_test

namespace {

// One TAP line per test, which scripts/test.sh counts.
class TapListener : public testing::EmptyTestEventListener {
    int n_ = 0;
    void OnTestEnd(const testing::TestInfo &t) override
    {
        const char *verdict = t.result()->Passed() || t.result()->Skipped() ? "ok" : "not ok";
        std::printf("%s %d - %s.%s%s\n", verdict, ++n_, t.test_suite_name(), t.name(),
                    t.result()->Skipped() ? " # SKIP" : "");
        std::fflush(stdout);
    }
};

} // namespace

int main(int argc, char **argv)
{
    testing::InitGoogleTest(&argc, argv);
    testing::UnitTest::GetInstance()->listeners().Append(new TapListener);
    return RUN_ALL_TESTS();
}
